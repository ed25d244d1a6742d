//! Block IPAM over the datastore.
//!
//! Pools are carved into blocks of `blockSize`; a node claims a block by
//! creating its IPAMBlock with `affinity: host:<node>` (the create is the
//! atomic claim: a second claimant meets AlreadyExists), then records a
//! BlockAffinity. Every change to a block is a compare-and-swap on its
//! resourceVersion, so two writers never both take an address.
//!
//! An address is written into its block (with the handle in the block's
//! attributes) before the IPAMHandle is written, so a crash between the two
//! leaves an allocation that GC finds by scanning blocks, never an address
//! that is in use but free in its block. Asking again with the same handle
//! returns the address already held (a retried ADD).

mod assign;
pub mod block;
mod error;
mod local;
mod plan;
pub mod pools;
mod release;
mod remember;
pub mod report;
mod writes;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ipnet::IpNet;
use rand::Rng;
use sha2::{Digest, Sha256};
use tartan_api::resources::block_name;
use tartan_api::store::Datastore;

pub use error::IpamError;
pub use local::{NODE_LABEL, node_label_value};
pub use pools::{Family, Pool};
pub use release::Collected;

/// How many compare-and-swap rounds one call makes before giving up.
const MAX_ATTEMPTS: u32 = 400;

/// How long a released address rests before reuse, unless configured.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(10);

/// What one node's IPAM is told.
#[derive(Debug, Clone)]
pub struct IpamConfig {
    pub node: String,
    /// IPv4 pools to draw from, by name or CIDR; empty: every pool.
    pub ipv4_pools: Vec<String>,
    pub ipv6_pools: Vec<String>,
    /// Give an IPv4 address: `None` when some pool applies, `Some(true)`
    /// always (an error if no pool applies), `Some(false)` never.
    pub assign_ipv4: Option<bool>,
    pub assign_ipv6: Option<bool>,
    /// Blocks this node claims may not lend addresses to other nodes, and
    /// this node never borrows.
    pub strict_affinity: bool,
    pub cooldown: Duration,
    /// A file where the names of this node's blocks are kept between
    /// calls, so that an ADD reads its blocks at once instead of listing
    /// the node's BlockAffinities first (one round trip fewer). A hint
    /// only: a block named there is used only if it is still this node's.
    pub remember: Option<PathBuf>,
}

impl IpamConfig {
    pub fn new(node: &str) -> Self {
        IpamConfig {
            node: node.to_string(),
            ipv4_pools: vec![],
            ipv6_pools: vec![],
            assign_ipv4: None,
            assign_ipv6: None,
            strict_affinity: false,
            cooldown: DEFAULT_COOLDOWN,
            remember: None,
        }
    }

    fn wanted(&self, f: Family) -> (&[String], Option<bool>) {
        match f {
            Family::V4 => (&self.ipv4_pools, self.assign_ipv4),
            Family::V6 => (&self.ipv6_pools, self.assign_ipv6),
        }
    }
}

/// The object name of a handle's IPAMHandle: the handle itself when it is a
/// valid object name, otherwise `h-` and a digest of it.
pub fn handle_object_name(handle: &str) -> String {
    let ok = !handle.is_empty()
        && handle.len() <= 253
        && handle
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && handle.starts_with(|c: char| c.is_ascii_alphanumeric())
        && handle.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return handle.to_string();
    }
    let digest = Sha256::digest(handle.as_bytes());
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("h-{hex}")
}

/// The object name of a node's claim on a block.
pub fn affinity_name(node: &str, cidr: &IpNet) -> String {
    format!("{node}.{}", block_name(cidr))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Addresses taken for a handle, and how many in each block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub handle: String,
    pub addresses: Vec<IpNet>,
    pub blocks: BTreeMap<String, u32>,
}

/// One node's IPAM client.
pub struct Ipam {
    store: Arc<dyn Datastore>,
    cfg: IpamConfig,
}

impl Ipam {
    pub fn new(store: Arc<dyn Datastore>, cfg: IpamConfig) -> Self {
        Ipam { store, cfg }
    }

    pub fn config(&self) -> &IpamConfig {
        &self.cfg
    }
}

/// A short, growing, jittered pause after a lost race, so that many
/// writers on one block do not retry in lockstep.
async fn backoff(attempt: u32) {
    let cap_us = 200u64 * u64::from(attempt.min(20) + 1);
    let us = rand::rng().random_range(0..=cap_us);
    tokio::time::sleep(Duration::from_micros(us)).await;
}

#[cfg(test)]
mod reads_tests;
#[cfg(test)]
mod tests;
