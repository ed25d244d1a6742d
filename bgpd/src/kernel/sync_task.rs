//! The background task of [`super::KernelSync`]: drains the pending map and
//! applies each batch against one snapshot of the kernel's main table.
use super::diff::diff;
use super::error::KernelError;
use super::message::family_of;
use super::netlink::{Kernel, Snapshot};
use super::route::{KernelRoute, Nexthop};
use super::sync_shared::{Counters, Pending, Shared};
use futures::StreamExt;
use ipnet::IpNet;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{debug, warn};

/// Requests in flight at once. The kernel handles them one by one anyway;
/// pipelining only saves the round trips through the connection task.
const CONCURRENCY: usize = 64;

/// How long a failed change waits before it is tried again (the next hop
/// may become reachable, the foreign route may go away).
const RETRY_AFTER: Duration = Duration::from_secs(10);

pub(crate) async fn run(
    kernel: Kernel,
    shared: Arc<Shared>,
    applied: watch::Sender<u64>,
) -> Kernel {
    let mut retry = Pending::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    // Prefixes whose last attempt failed: warn once, not every retry.
    let mut failing = HashSet::new();
    loop {
        match retry_at {
            Some(at) => {
                tokio::select! {
                    _ = shared.wake.notified() => {}
                    _ = tokio::time::sleep_until(at) => {
                        retry_at = None;
                        let mut st = shared.lock();
                        for (prefix, hops) in retry.drain() {
                            // A newer change from the RIB wins over a retry.
                            st.pending.entry(prefix).or_insert(hops);
                        }
                    }
                }
            }
            None => shared.wake.notified().await,
        }
        let (batch, generation, shutdown) = {
            let mut st = shared.lock();
            (std::mem::take(&mut st.pending), st.queued, st.shutdown)
        };
        if !batch.is_empty() {
            for prefix in batch.keys() {
                retry.remove(prefix);
            }
            let started = Instant::now();
            retry.extend(apply(&kernel, &shared.counters, batch, &mut failing).await);
            if let Some(h) = &shared.apply_seconds {
                h.observe(started.elapsed().as_secs_f64());
            }
            if !retry.is_empty() && retry_at.is_none() {
                retry_at = Some(tokio::time::Instant::now() + RETRY_AFTER);
            }
        }
        applied.send_replace(generation);
        if shutdown {
            return kernel;
        }
    }
}

enum Op {
    Replace {
        route: KernelRoute,
        holder: Option<u8>,
        had_own: bool,
    },
    Delete(IpNet),
}

/// Applies one batch; returns the changes to retry.
async fn apply(
    kernel: &Kernel,
    counters: &Counters,
    batch: Pending,
    failing: &mut HashSet<IpNet>,
) -> Pending {
    let started = Instant::now();
    let mut families: Vec<_> = batch.keys().map(family_of).collect();
    families.sort_unstable_by_key(|f| u8::from(*f));
    families.dedup();
    let snap = match kernel.snapshot(&families).await {
        Ok(snap) => snap,
        Err(e) => {
            warn!(error = %e, changes = batch.len(), "cannot read the routing table; retrying the batch later");
            Counters::add(&counters.failed, batch.len() as u64);
            return batch;
        }
    };
    let ops = plan(&batch, &snap);
    let planned = ops.len();
    let results: Vec<(IpNet, Result<(), KernelError>)> = futures::stream::iter(ops)
        .map(|op| execute(kernel, counters, op))
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;

    let mut retry = Pending::new();
    for (prefix, result) in results {
        match result {
            Ok(()) => {
                failing.remove(&prefix);
            }
            Err(e) => {
                let first = failing.insert(prefix);
                report(&prefix, &e, first);
                // An invalid route stays invalid; anything else may heal.
                if !matches!(e, KernelError::Invalid { .. })
                    && let Some(change) = batch.get(&prefix)
                {
                    retry.insert(prefix, change.clone());
                }
            }
        }
    }
    // Prefixes that needed no write are fine now, whatever happened before.
    for prefix in batch.keys() {
        if !retry.contains_key(prefix) {
            failing.remove(prefix);
        }
    }
    debug!(
        changes = batch.len(),
        writes = planned,
        failed = retry.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "kernel batch applied"
    );
    retry
}

/// The kernel writes the batch needs, given the snapshot: unchanged routes
/// and removals of absent routes need none.
fn plan(batch: &Pending, snap: &Snapshot) -> Vec<Op> {
    let desired: HashMap<IpNet, Vec<Nexthop>> = batch
        .iter()
        .filter_map(|(p, hops)| Some((*p, hops.clone()?)))
        .collect();
    let current: Vec<KernelRoute> = batch
        .keys()
        .filter_map(|p| snap.own.get(p).cloned())
        .collect();
    let d = diff(&desired, &current);
    let replaces = d.replace.into_iter().map(|route| Op::Replace {
        holder: snap.holders.get(&route.prefix).copied(),
        had_own: snap.own.contains_key(&route.prefix),
        route,
    });
    replaces
        .chain(d.delete.into_iter().map(Op::Delete))
        .collect()
}

async fn execute(kernel: &Kernel, counters: &Counters, op: Op) -> (IpNet, Result<(), KernelError>) {
    match op {
        Op::Replace {
            route,
            holder,
            had_own,
        } => {
            let result = kernel.write(&route, holder).await;
            match &result {
                Ok(()) => Counters::add(&counters.installed, 1),
                Err(KernelError::Foreign { .. }) => Counters::add(&counters.refused, 1),
                Err(_) => {
                    Counters::add(&counters.failed, 1);
                    // The old Tartan route no longer matches the RIB's
                    // choice: better no route than a stale one.
                    if had_own && kernel.delete(route.prefix).await.is_ok() {
                        Counters::add(&counters.removed, 1);
                    }
                }
            }
            (route.prefix, result)
        }
        Op::Delete(prefix) => {
            let result = kernel.delete(prefix).await;
            match &result {
                Ok(()) => Counters::add(&counters.removed, 1),
                Err(_) => Counters::add(&counters.failed, 1),
            }
            (prefix, result)
        }
    }
}

fn report(prefix: &IpNet, e: &KernelError, first: bool) {
    let errno = e.errno().unwrap_or(0);
    match e {
        KernelError::Foreign { protocol, .. } if first => {
            warn!(%prefix, protocol, "not installing: a route of another protocol holds this prefix")
        }
        _ if first => warn!(%prefix, errno, error = %e, "kernel route change failed; will retry"),
        _ => debug!(%prefix, errno, error = %e, "kernel route change failed again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::RTPROT_TARTAN;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn hop(s: &str) -> Nexthop {
        Nexthop::new(s.parse().unwrap())
    }

    #[test]
    fn plan_writes_only_what_changed() {
        let mut snap = Snapshot::default();
        for (p, gw) in [("10.1.0.0/24", "10.0.0.2"), ("10.2.0.0/24", "10.0.0.2")] {
            snap.holders.insert(net(p), RTPROT_TARTAN);
            snap.own
                .insert(net(p), KernelRoute::new(net(p), vec![hop(gw)]));
        }
        snap.holders.insert(net("10.9.0.0/24"), 4);
        let batch: Pending = [
            ("10.1.0.0/24", Some(vec![hop("10.0.0.2")])), // unchanged
            ("10.2.0.0/24", None),                        // withdrawn
            ("10.3.0.0/24", None),                        // absent already
            ("10.4.0.0/24", Some(vec![hop("10.0.0.3")])), // new
            ("10.9.0.0/24", Some(vec![hop("10.0.0.3")])), // foreign key
        ]
        .into_iter()
        .map(|(p, h)| (net(p), h))
        .collect();

        let ops = plan(&batch, &snap);
        let mut replaced = Vec::new();
        let mut deleted = Vec::new();
        for op in ops {
            match op {
                Op::Replace {
                    route,
                    holder,
                    had_own,
                } => {
                    assert!(!had_own);
                    replaced.push((route.prefix, holder));
                }
                Op::Delete(p) => deleted.push(p),
            }
        }
        assert_eq!(
            replaced,
            vec![(net("10.4.0.0/24"), None), (net("10.9.0.0/24"), Some(4))]
        );
        assert_eq!(deleted, vec![net("10.2.0.0/24")]);
    }
}
