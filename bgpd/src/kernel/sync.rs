//! [`KernelSync`]: the RIB's non-blocking door to the kernel.
//!
//! The RIB calls [`KernelSync::set`] for every best-route change. Changes go
//! into a map keyed by prefix behind a mutex, and a [`Notify`] wakes the
//! background task, which swaps the whole map out and applies it as one
//! batch. A map rather than a channel because it coalesces by itself: a
//! prefix that flaps a thousand times while the kernel is busy costs one
//! slot and one kernel write, and memory stays bounded by the number of
//! prefixes instead of growing with the churn. `set` takes the lock only to
//! insert, never awaits, and so never blocks the RIB.
use super::netlink::Kernel;
use super::route::{KernelRoute, Nexthop, canonical};
use super::sync_shared::{Counters, Shared, State};
use super::sync_task;
use ipnet::IpNet;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};
use tracing::info;

/// Counters since the task started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Routes created or replaced.
    pub installed: u64,
    /// Routes deleted (withdrawn, or stale after a restart).
    pub removed: u64,
    /// Kernel writes that failed (e.g. ENETUNREACH); they are retried.
    pub failed: u64,
    /// Replaces skipped because a route of another protocol holds the key.
    pub refused: u64,
}

/// The RIB's handle on the kernel sync task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KernelSync {
    shared: Arc<Shared>,
}

/// Owns the background task. Dropping it aborts the task (routes stay in
/// the kernel); [`KernelSyncHandle::shutdown`] applies what is queued first.
#[derive(Debug)]
#[must_use = "dropping the handle stops the kernel sync task"]
pub struct KernelSyncHandle {
    shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<Kernel>>,
}

impl KernelSync {
    /// Starts the task on the current tokio runtime. `initial` is what
    /// [`Kernel::list_own`] found at start: those routes stay in place
    /// until [`KernelSync::flush_stale`].
    pub fn spawn(kernel: Kernel, initial: Vec<KernelRoute>) -> (KernelSync, KernelSyncHandle) {
        Self::spawn_inner(kernel, initial, None)
    }

    /// As [`KernelSync::spawn`], recording the time of every batch in
    /// `apply_seconds`.
    pub fn spawn_recording(
        kernel: Kernel,
        initial: Vec<KernelRoute>,
        apply_seconds: Histogram,
    ) -> (KernelSync, KernelSyncHandle) {
        Self::spawn_inner(kernel, initial, Some(apply_seconds))
    }

    fn spawn_inner(
        kernel: Kernel,
        initial: Vec<KernelRoute>,
        apply_seconds: Option<Histogram>,
    ) -> (KernelSync, KernelSyncHandle) {
        let (applied_tx, applied_rx) = watch::channel(0);
        let state = State {
            stale: initial.iter().map(|r| r.prefix.trunc()).collect(),
            ..State::default()
        };
        info!(
            kept = state.stale.len(),
            "kernel sync started; keeping routes from the previous run"
        );
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Notify::new(),
            counters: Counters::default(),
            apply_seconds,
            applied: applied_rx,
        });
        let task = tokio::spawn(sync_task::run(kernel, shared.clone(), applied_tx));
        (
            KernelSync {
                shared: shared.clone(),
            },
            KernelSyncHandle {
                shared,
                task: Some(task),
            },
        )
    }

    /// Sets the route for `prefix` (`None` or no next hops: remove it).
    /// Never blocks: the change is applied by the task, coalesced with
    /// later changes to the same prefix.
    pub fn set(&self, prefix: IpNet, nexthops: Option<Vec<Nexthop>>) {
        let prefix = prefix.trunc();
        let nexthops = nexthops.map(canonical).filter(|h| !h.is_empty());
        {
            let mut st = self.shared.lock();
            st.stale.remove(&prefix);
            st.pending.insert(prefix, nexthops);
            st.queued += 1;
        }
        self.shared.wake.notify_one();
    }

    /// Deletes the start-time routes that were not set since, and returns
    /// once that is done. Call it when the RIB has converged (after a
    /// restart: every neighbor has sent End-of-RIB, or the selection
    /// deferral time is over; RFC 4724 4.1).
    pub async fn flush_stale(&self) {
        let target = self.queue_flush_stale();
        self.wait_applied(target).await;
    }

    /// [`KernelSync::flush_stale`] without waiting for it to be applied:
    /// returns the change's number.
    pub fn queue_flush_stale(&self) -> u64 {
        let target = {
            let mut st = self.shared.lock();
            let stale: Vec<IpNet> = st.stale.drain().collect();
            info!(
                stale = stale.len(),
                "removing routes not re-learned since start"
            );
            for prefix in stale {
                st.pending.entry(prefix).or_insert(None);
            }
            st.queued += 1;
            st.queued
        };
        self.shared.wake.notify_one();
        target
    }

    /// Returns once every change made before the call has been applied
    /// (or has failed and been counted).
    pub async fn wait_idle(&self) {
        let target = self.shared.lock().queued;
        self.wait_applied(target).await;
    }

    async fn wait_applied(&self, target: u64) {
        let mut rx = self.shared.applied.clone();
        // An error means the task is gone: nothing more will be applied.
        let _ = rx.wait_for(|&applied| applied >= target).await;
    }

    pub fn stats(&self) -> KernelStats {
        let c = &self.shared.counters;
        KernelStats {
            installed: c.installed.load(Ordering::Relaxed),
            removed: c.removed.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            refused: c.refused.load(Ordering::Relaxed),
        }
    }
}

impl KernelSyncHandle {
    /// Applies what is queued, stops the task and gives the kernel handle
    /// back. Installed routes stay (graceful restart keeps forwarding).
    pub async fn shutdown(mut self) -> Option<Kernel> {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_one();
        self.task.take()?.await.ok()
    }
}

impl Drop for KernelSyncHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
