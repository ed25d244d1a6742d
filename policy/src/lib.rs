//! Tartan's policy model, pure (no I/O): the selector language that picks
//! endpoints, nodes and pools by their labels; the model Kubernetes
//! NetworkPolicy converts into ([`model`], [`k8s`]); Tartan's own policies
//! ([`tartan`]); the rule IR both become ([`ir`]); and compilation of the
//! IR for one node into nftables sets, maps and chains ([`compile`]).

pub mod compile;
pub mod ir;
pub mod k8s;
#[cfg(test)]
mod k8s_tests;
pub mod model;
pub mod selector;
pub mod tartan;
#[cfg(test)]
mod tartan_tests;

pub use selector::{Selector, SelectorError};
