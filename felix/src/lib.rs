//! felix, Tartan's node agent. It watches the datastore, computes the
//! dataplane this node should have with pure functions ([`calc`]), and has
//! drivers ([`dataplane`]) read the kernel and change only the difference.
//!
//! Routes it owns carry protocol 202 ([`ROUTE_PROTOCOL`]), the same as the
//! CNI plugin's pod routes: the plugin makes a pod's route when it wires the
//! pod, felix keeps it (and repairs it) from then on. bgpd's learned routes
//! carry 201; neither program touches the other's.
//!
//! felix also keeps the CNI plugins' credentials fresh ([`cnitoken`]): a
//! token of their own service account, renewed before it expires.

pub mod calc;
pub mod cnitoken;
pub mod daemon;
pub mod dataplane;
pub mod health;
pub mod services;
pub mod serving;
pub mod unreadable;

/// Route protocol of local routes (pods, blocks).
pub const ROUTE_PROTOCOL: u8 = 202;
