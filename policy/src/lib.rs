//! Tartan's policy model, pure (no I/O): the model Kubernetes
//! NetworkPolicy converts into ([`model`], [`k8s`]); Tartan's own policies
//! ([`tartan`]); the rule IR both become ([`ir`]); and compilation of the
//! IR for one node into nftables sets, maps and chains ([`compile`]).
//! A policy that cannot be read stands as an isolation ([`isolate`]).
//! Selectors are parsed by the api crate ([`selector`], re-exported).

pub mod compile;
pub mod ir;
pub mod isolate;
pub mod k8s;
#[cfg(test)]
mod k8s_tests;
pub mod model;
pub mod tartan;
#[cfg(test)]
mod tartan_tests;

pub use tartan_api::selector;
pub use tartan_api::selector::{Selector, SelectorError};
