//! Tartan's object model and datastore.
//!
//! - [`kind`]: every kind Tartan stores or reads and its names.
//! - [`resources`]: the typed `tartan.dev/v1` resources (CRDs).
//! - [`selector`]: the label selector language (`role == 'db' && has(x)`),
//!   parsed on every write and by every agent.
//! - [`validate`]: checks with messages a person can act on.
//! - [`store`]: the `Datastore` trait and its etcd, Kubernetes and
//!   in-memory backends; watch with resume.
//! - [`examples`]: a valid object of every kind.
//! - [`bgp`]: wire types of bgpd's control API.
pub mod bgp;
pub mod build_info;
pub mod examples;
pub mod kind;
pub mod logging;
pub mod resources;
pub mod selector;
pub mod store;
pub mod validate;

pub use kind::Kind;
