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
//! - [`tartan_config`]: the install's ConfigMap (default pools, pod MTU);
//!   [`mtu`]: the MTU under encapsulation.
pub mod bgp;
pub mod build_info;
pub mod cni_files;
pub mod defaults;
pub mod examples;
pub mod kind;
pub mod label_selector;
pub mod logging;
pub mod mtu;
pub mod resources;
pub mod selector;
pub mod store;
pub mod tartan_config;
pub mod validate;

pub use kind::Kind;
