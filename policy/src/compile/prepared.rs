//! A policy prepared for compiling: its runs for one direction and what
//! they need. The compile cache keeps these; profiles are built from them.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::rules::Run;
use crate::ir::{EndpointSel, Policy};

/// A policy's runs for one direction, with what they need.
#[derive(Debug, Clone)]
pub(super) struct CachedPolicy {
    pub(super) policy: Policy,
    pub(super) families: Vec<bool>,
    /// The form of the selector sets its written rules name.
    pub(super) ranges: bool,
    pub(super) runs: Arc<Vec<Run>>,
    pub(super) selectors: Vec<EndpointSel>,
    pub(super) named_ports: Vec<String>,
    /// Named ports of the protected endpoint its merged runs use
    /// (ingress): they are resolved per profile.
    pub(super) local_names: BTreeSet<String>,
}
