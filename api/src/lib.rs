//! Tartan resource and interface types.
pub mod bgp;
