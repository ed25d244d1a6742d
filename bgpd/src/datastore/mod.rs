//! bgpd driven by the datastore: its configuration is built from
//! BGPConfiguration, Node and BGPPeer objects, and what it announces from
//! the IPAM blocks the node holds; a change rebuilds it and the running
//! speaker applies only the difference.

pub mod build;
pub mod follow;
#[cfg(test)]
mod tests;

pub use build::{Inputs, build};
