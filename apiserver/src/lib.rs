//! A stand-in for the Kubernetes API server, where no real one can run:
//! the Kubernetes backend's tests, the RBAC test that runs the daemons
//! against it, and the lab. It answers the REST calls Tartan's clients
//! make in the API server's shapes and words (`server`, `watch`,
//! `route`, `wire`), names the user of each request by its bearer token
//! (`identity`; lifetimes, revocation and the TokenRequest API in
//! `tokenrequest`), records every request with its RBAC attributes
//! (`request`; kept in memory or streamed to a file, `request_log`) and judges it by the roles of install manifests (`rbac`).
//! For kubectl it serves discovery and enough OpenAPI to validate on the
//! server (`discovery`, `resources`, `strict`), PATCH in every media type
//! and server-side apply with managedFields (`writes`, `patch_request`, `patch`, `apply`,
//! `fields`), Tables (`table`), field selectors (`fieldsel`) and
//! CustomResourceDefinitions as objects (`crds`, `crd_routes`). Built-in
//! objects get the API server's defaults and checks, namespaces must
//! exist, names may be generated (`admission`).
//! A second mode, [`Replay`], serves recorded responses verbatim.

// A refused request's error is its HTTP answer (`Response`), built once
// per request and returned straight away: boxing it would buy nothing.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod apply;
pub mod clock;
pub mod columns;
pub mod crd_routes;
pub mod crd_watch;
pub mod crds;
pub mod creations;
pub mod discovery;
pub mod fields;
pub mod fieldsel;
pub mod identity;
pub mod objects;
pub mod patch;
pub mod patch_request;
pub mod rbac;
pub mod replay;
pub mod request;
pub mod request_log;
pub mod resources;
pub mod route;
pub mod server;
pub mod strict;
pub mod table;
pub mod tokenrequest;
pub mod watch;
pub mod wire;
pub mod writes;

pub use identity::{Tokens, kubeconfig, kubeconfig_token_file};
pub use rbac::{Policy, service_account_user};
pub use replay::Replay;
pub use request::{Attributes, ResourceRef};
pub use request_log::{RequestLog, Verdicts};
pub use server::{ApiServer, Recorded, Running};
