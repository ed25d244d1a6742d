//! Block IPAM: pod addresses from per-node blocks of the IPPools.
//!
//! INTERFACE SCAFFOLD: the types and signatures below are the contract
//! between the plugin and the allocator; the allocator's bodies are being
//! written (see the module's README in the issue notes).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use tartan_api::store::{Datastore, StoreError};

/// How one node's IPAM behaves.
#[derive(Clone, Debug)]
pub struct IpamConfig {
    /// This node's name (block affinity).
    pub node: String,
    /// Never borrow addresses from other nodes' blocks.
    pub strict_affinity: bool,
    /// A released address is not handed out again for this long.
    pub cooldown: Duration,
    /// Which families to assign (dual stack: both).
    pub ipv4: bool,
    pub ipv6: bool,
    /// IPPool names to use; empty: every enabled pool whose nodeSelector
    /// matches (until selectors exist: every enabled pool).
    pub pools: Vec<String>,
}

/// One assignment request. `handle` is `<network>.<containerId>`; asking
/// again with the same handle returns the same addresses.
#[derive(Clone, Debug, Default)]
pub struct AssignRequest {
    pub handle: String,
    /// Kept with the allocation (pod, namespace, node…).
    pub attributes: BTreeMap<String, String>,
}

/// The addresses given: each an address with its pool's prefix length
/// (for the CNI result: `10.244.1.5/16`... the plugin installs /32 and /128).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assigned {
    pub ipv4: Option<IpNet>,
    pub ipv6: Option<IpNet>,
}

#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// No enabled pool of the family is usable by this node.
    #[error("no usable IP pool for {family} on node {node}")]
    NoPool { family: &'static str, node: String },
    /// Every usable pool is full.
    #[error("IP pools {pools} are exhausted: no free address for {family}")]
    Exhausted { family: &'static str, pools: String },
    /// Too many compare-and-swap conflicts in a row.
    #[error("gave up after {0} conflicting writes")]
    Contention(u32),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct Ipam {
    #[allow(dead_code)]
    store: Arc<dyn Datastore>,
    #[allow(dead_code)]
    config: IpamConfig,
}

impl Ipam {
    pub fn new(store: Arc<dyn Datastore>, config: IpamConfig) -> Self {
        Ipam { store, config }
    }

    /// Assign (or find again) the addresses of `req.handle`.
    pub async fn assign(&self, _req: &AssignRequest) -> Result<Assigned, IpamError> {
        Err(IpamError::Contention(0))
    }

    /// Release every address of `handle`; how many were released (0 when
    /// none: releasing is idempotent).
    pub async fn release_handle(&self, _handle: &str) -> Result<usize, IpamError> {
        Ok(0)
    }

    /// Release one address whatever holds it; whether it was allocated.
    pub async fn release_ip(&self, _ip: IpAddr) -> Result<bool, IpamError> {
        Ok(false)
    }

    /// Release every allocation on this node whose handle is not in
    /// `valid` (handles that start with `network_prefix` only); the
    /// handles released.
    pub async fn gc(
        &self,
        _network_prefix: &str,
        _valid: &HashSet<String>,
    ) -> Result<Vec<String>, IpamError> {
        Ok(Vec::new())
    }

    /// Whether an address of each configured family could be assigned now.
    pub async fn has_room(&self) -> Result<bool, IpamError> {
        Ok(false)
    }
}
