//! Tartan's CNI plugin and its block IPAM.
//!
//! - [`ipam`]: addresses from per-node blocks of the IPPools, claimed and
//!   allocated by compare-and-swap in the datastore.
//! - [`plugin`]: the CNI 1.1 plugin `tartan`: spec handling, pod wiring.
pub mod ipam;
pub mod plugin;
