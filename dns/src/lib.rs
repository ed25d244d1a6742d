//! Tartan's cluster DNS (kube-dns's job).
//!
//! - [`model`]: a Service or EndpointSlice as DNS sees it (compact);
//!   [`records`]: all of them, indexed (names and PTR).
//! - [`answer`]: the cluster domain's answers (pure).
//! - [`forward`] and [`cache`]: other names, from the upstreams, cached;
//!   [`upstream`]: how questions reach them (sockets, or scripted replies).
//! - [`handler`]: one request's bytes to one response's bytes; [`replies`]:
//!   encoded replies for the cluster domain, reused until the records change;
//!   [`wire`]: a response's bytes, compressed at any size.
//! - [`limit`]: the per-client rate limit.
//! - [`server`]: UDP (a thread per socket) and TCP serving; [`sockets`]:
//!   the UDP sockets, one per core.
//! - [`watch`]: the datastore followed into the records.
//! - [`health`] and [`metrics`]: `/livez`, `/readyz`, `/metrics`.
//! - [`daemon`]: all of it assembled.
pub mod answer;
pub mod cache;
pub mod daemon;
pub mod forward;
pub mod handler;
pub mod health;
pub mod limit;
pub mod metrics;
pub mod model;
pub mod records;
pub mod replies;
pub mod server;
pub mod sockets;
pub mod upstream;
pub mod watch;
pub mod wire;
