use tartan_api::store::StoreError;
use thiserror::Error;

use super::pools::Family;

#[derive(Debug, Error)]
pub enum IpamError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No pool of the family applies to this node.
    #[error("no {family} pool applies to node {node}{detail}")]
    NoPool {
        family: Family,
        node: String,
        /// Pools passed over and why, e.g. "; skipped: p1 (it is disabled)".
        detail: String,
    },
    /// Every address is taken (or cooling down).
    #[error("no free {family} address for node {node} in {pools}{detail}")]
    Exhausted {
        family: Family,
        node: String,
        pools: String,
        detail: String,
    },
    /// Other writers kept winning the compare-and-swap.
    #[error("gave up after {attempts} attempts: other writers kept changing {what}")]
    Contention { attempts: u32, what: String },
    #[error("invalid IPAM configuration: {0}")]
    Config(String),
    /// Stored IPAM data is inconsistent.
    #[error("IPAM data is inconsistent: {0}")]
    Corrupt(String),
}

impl IpamError {
    /// The call may succeed if repeated later.
    pub fn is_transient(&self) -> bool {
        match self {
            IpamError::Store(e) => e.is_transient(),
            IpamError::Contention { .. } => true,
            _ => false,
        }
    }
}
