//! A stand-in for the Kubernetes API server, where no real one can run:
//! the Kubernetes backend's tests, the RBAC test that runs the daemons
//! against it, and the lab. It answers the REST calls Tartan's clients
//! make in the API server's shapes and words (`server`, `watch`,
//! `route`, `wire`), names the user of each request by its bearer token
//! (`identity`), records every request with its RBAC attributes
//! (`request`; kept in memory or streamed to a file, `request_log`) and judges it by the roles of install manifests (`rbac`).
//! A second mode, [`Replay`], serves recorded responses verbatim.

pub mod identity;
pub mod rbac;
pub mod replay;
pub mod request;
pub mod request_log;
pub mod route;
pub mod server;
pub mod watch;
pub mod wire;

pub use identity::{Tokens, kubeconfig};
pub use rbac::{Policy, service_account_user};
pub use replay::Replay;
pub use request::{Attributes, ResourceRef};
pub use request_log::{RequestLog, Verdicts};
pub use server::{ApiServer, Recorded, Running};
