//! Tartan's CNI plugin and block IPAM.
//!
//! - [`spec`]: the CNI protocol: environment, network configuration,
//!   results and errors, as CNI 1.1 writes them.
//! - [`ipam`]: addresses from per-node blocks, claimed and changed by
//!   compare-and-swap in the datastore.
//! - [`wire`]: the veth pair, addresses and routes of one pod interface.
//! - [`plugin`]: ADD, DEL, CHECK, STATUS, GC and VERSION over the above.
//! - [`install`]: the node's conflist rendered from the ConfigMap
//!   `tartan-config`, with the pods' MTU from the underlay.

pub mod install;
pub mod ipam;
pub mod logging;
pub mod plugin;
pub mod spec;
pub mod wire;

/// The route protocol number of routes the plugin (and felix) install for
/// local pods. bgpd's learned routes carry 201; neither removes the other's.
pub const ROUTE_PROTOCOL: u8 = 202;
