//! The control plane's Service parts, as the API server and the
//! EndpointSlice controller play them (LoadBalancer addresses are
//! [`crate::lbpool`]'s, from LoadBalancerIPPools):
//!
//! - [`complete`] gives each Service being written what the API server
//!   would ([`alloc`]: ClusterIP from the service range, NodePorts),
//!   claiming it in the ranges' allocation records
//!   ([`records`]: one bitmap per range, compare-and-swap) instead of
//!   listing the Services; a refused allocation gives every problem and
//!   claims nothing. What a written Service no longer holds, or a deleted
//!   one held, is freed by [`release()`]; [`repair()`] rebuilds the
//!   records from the Services (leaks after a crash).
//! - [`sync_slices`] brings the EndpointSlices in line with the Services
//!   and Pods ([`slices`]); [`sync_slices_of`] those of a few Services.
//!
//! All work on any [`Datastore`](tartan_api::store::Datastore); the
//! caller (today `tartan-lab`) says when they run and keeps two of them
//! from interleaving.

pub mod alloc;
pub mod complete;
pub mod records;
pub mod release;
pub mod repair;
pub mod slices;
pub mod sync;

use tartan_api::store::StoreError;

pub use alloc::Ranges;
pub use complete::{Completed, complete};
pub use release::{Release, release};
pub use repair::{Repaired, repair};
pub use sync::{sync_slices, sync_slices_of};

/// What can stop the Service controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The datastore refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Other writers kept changing the EndpointSlices between reads.
    #[error("the EndpointSlices kept changing under the lab's controller")]
    KeptChanging,
    /// Other writers kept changing the allocation records between reads.
    #[error("the Service allocation records kept changing; try again")]
    RecordsKeptChanging,
    /// A range too large for its allocation record.
    #[error("the range {0} is too large: at most 1048576 members (an IPv4 /12)")]
    RangeTooLarge(String),
    /// Fewer Services came back from allocation than went in.
    #[error("a Service went missing")]
    ServiceMissing,
}

#[cfg(test)]
mod complete_tests;
#[cfg(test)]
mod dual_stack_tests;
#[cfg(test)]
mod reads_tests;
