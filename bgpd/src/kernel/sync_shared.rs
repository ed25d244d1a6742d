//! The state the RIB's side of the kernel sync ([`super::sync`]) and its
//! background task ([`super::sync_task`]) share: the pending changes,
//! counters, and the wake-up.

use ipnet::IpNet;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use tokio::sync::{Notify, watch};

use super::route::Nexthop;

/// What the RIB asked for, not yet applied. `None` removes the route.
pub(crate) type Pending = HashMap<IpNet, Option<Vec<Nexthop>>>;

#[derive(Debug, Default)]
pub(crate) struct State {
    pub pending: Pending,
    /// Start-time routes not set since; [`KernelSync::flush_stale`]
    /// deletes what is left.
    pub stale: HashSet<IpNet>,
    /// Bumped by every change; the task reports the value it has applied.
    pub queued: u64,
    pub shutdown: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub installed: AtomicU64,
    pub removed: AtomicU64,
    pub failed: AtomicU64,
    pub refused: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(super) state: Mutex<State>,
    pub wake: Notify,
    pub counters: Counters,
    /// Where the time of each batch is recorded, if anywhere.
    pub apply_seconds: Option<Histogram>,
    /// The last `queued` value applied; closed when the task ends.
    pub(super) applied: watch::Receiver<u64>,
}

impl Shared {
    /// The state, even if a thread panicked while holding the lock: every
    /// update leaves it consistent.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
