//! bgpd driven by the datastore: its configuration is built from
//! BGPConfiguration, Node and BGPPeer objects, and what it announces from
//! the IPAM blocks the node holds, the service ranges and the Services
//! with Local policy that have an endpoint here; a change rebuilds it and
//! the running speaker applies only the difference. It publishes the
//! node's BGPNodeStatus report (`publish`, from `report`).

mod announce;
pub mod autodetect;
pub mod build;
mod export_scope;
pub mod follow;
mod nodes;
pub mod publish;
pub mod report;
pub mod services;
#[cfg(test)]
mod tests;

pub use build::{Inputs, build};
pub use nodes::NodeView;
