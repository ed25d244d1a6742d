//! Tartan's policy model, pure (no I/O): the selector language that picks
//! endpoints, nodes and pools by their labels; the model policies are
//! converted to ([`model`]); Kubernetes NetworkPolicy into it ([`k8s`]).
//! Not yet: Tartan's own policies, compilation to nftables.

pub mod k8s;
#[cfg(test)]
mod k8s_tests;
pub mod model;
pub mod selector;

pub use selector::{Selector, SelectorError};
