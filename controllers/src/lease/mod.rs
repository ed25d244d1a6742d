//! Leader election over a `coordination.k8s.io/v1` Lease, on any
//! [`Datastore`](tartan_api::store::Datastore), as client-go's
//! leaderelection does it:
//!
//! - A candidate creates the Lease when there is none, renews it while it
//!   holds it, and takes it over only when the holder has not renewed for
//!   `leaseDurationSeconds`, measured on the candidate's own clock from
//!   the moment it first saw the holder's latest record (so clocks that
//!   disagree about the wall time cannot make two holders).
//! - Every write is a compare-and-swap on the Lease's `resourceVersion`
//!   (a create for a missing Lease): of two candidates writing one
//!   version, one wins and the other follows.
//! - The holder acts only until `renew_deadline` (shorter than the lease
//!   duration) after its last successful renewal began; a renewal that
//!   fails (refused, lost to another writer, or not done in time) ends its
//!   leadership at once.
//! - A replica that shuts down stops acting, then [`release`]s the Lease
//!   (no holder), and another takes it at its next round.
//!
//! [`Candidate`] is the pure part: the Lease as read and the time in, what
//! to write out; [`elect`] runs it against a store.

pub mod candidate;
pub mod elect;
#[cfg(test)]
mod tests;

pub use candidate::{Candidate, Plan, Timing};
pub use elect::{Elector, release, run};
