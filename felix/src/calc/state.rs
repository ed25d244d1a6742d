//! What felix knows of the datastore: the objects it watches, by key.

use std::collections::BTreeMap;

use tartan_api::resources::{IpPoolSpec, IpamBlockSpec, WorkloadEndpointSpec};

/// The watched objects that shape this node's routes.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// `namespace/name` → endpoint.
    pub endpoints: BTreeMap<String, WorkloadEndpointSpec>,
    /// block name → block.
    pub blocks: BTreeMap<String, IpamBlockSpec>,
    /// pool name → pool.
    pub pools: BTreeMap<String, IpPoolSpec>,
}
