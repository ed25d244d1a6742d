//! The `tartan-controllers` daemon's loop: while this replica leads
//! (its [`lease`](crate::lease) election says so), the
//! [`firststart`](crate::firststart) pass until it settles, then a pass of
//! each controller every interval; a standby only takes part in the
//! election.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tartan_api::store::Datastore;
use tokio::sync::watch;
use tracing::warn;

use crate::firststart::{FirstStart, FirstStartError, Outcome};
use crate::ipamgc::Collector;
use crate::lbpool;
use crate::metrics::{Metrics, Name};

/// How often each controller runs.
#[derive(Debug, Clone, Copy)]
pub struct Intervals {
    pub loadbalancer: Duration,
    pub ipam_gc: Duration,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn name(s: &str) -> Name {
    Name {
        name: s.to_string(),
    }
}

/// Run the controllers for ever, acting only while `leading` is true.
pub async fn run(
    store: Arc<dyn Datastore>,
    leading: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
    intervals: Intervals,
    mut gc: Collector,
    mut first: FirstStart,
) {
    let tick = intervals.loadbalancer.min(intervals.ipam_gc);
    let mut last_gc: Option<tokio::time::Instant> = None;
    loop {
        tokio::time::sleep(tick).await;
        let leads = *leading.borrow();
        metrics.leader.set(i64::from(leads));
        if !leads {
            // A new leader starts from scratch: how long a node has been
            // missing is counted again.
            last_gc = None;
            gc = Collector::new(gc.grace);
            continue;
        }
        if !first.settled() {
            first_start(&mut first, &*store, &metrics).await;
        }
        match lbpool::pass(&*store).await {
            Ok(r) => {
                metrics.lb_assigned.inc_by(r.assigned as u64);
                metrics.lb_released.inc_by(r.released as u64);
                metrics.lb_unsatisfied.set(r.problems.len() as i64);
                metrics.lb_pool_addresses.clear();
                metrics.lb_pool_in_use.clear();
                for (pool, (size, used)) in &r.usage {
                    let cap = |v: u128| i64::try_from(v).unwrap_or(i64::MAX);
                    metrics
                        .lb_pool_addresses
                        .get_or_create(&name(pool))
                        .set(cap(*size));
                    metrics
                        .lb_pool_in_use
                        .get_or_create(&name(pool))
                        .set(cap(*used));
                }
            }
            Err(e) => {
                metrics
                    .pass_errors
                    .get_or_create(&name("loadbalancer"))
                    .inc();
                warn!(error = %e, "LoadBalancer pass failed; retrying");
            }
        }
        let due = last_gc.is_none_or(|t| t.elapsed() >= intervals.ipam_gc);
        if !due || !*leading.borrow() {
            continue;
        }
        last_gc = Some(tokio::time::Instant::now());
        match gc.pass(&*store, unix_now()).await {
            Ok(r) => {
                metrics.ipam_released_addresses.inc_by(r.addresses as u64);
                metrics.ipam_labelled_affinities.inc_by(r.labelled as u64);
                for (kind, n) in [
                    ("IPAMBlock", r.blocks),
                    ("IPAMHandle", r.handles),
                    ("BlockAffinity", r.affinities),
                    ("WorkloadEndpoint", r.endpoints),
                    ("BGPNodeStatus", r.reports),
                ] {
                    metrics
                        .ipam_deleted_objects
                        .get_or_create(&name(kind))
                        .inc_by(n as u64);
                }
            }
            Err(e) => {
                metrics.pass_errors.get_or_create(&name("ipam-gc")).inc();
                warn!(error = %e, "IPAM garbage collection pass failed; retrying");
            }
        }
    }
}

async fn first_start(first: &mut FirstStart, store: &dyn Datastore, metrics: &Metrics) {
    match first.pass(store).await {
        Ok(o) => {
            metrics.config_problems.set(0);
            if let Outcome::Created(names) = o {
                metrics.default_pools_created.inc_by(names.len() as u64);
            }
        }
        Err(e) => {
            metrics
                .pass_errors
                .get_or_create(&name("first-start"))
                .inc();
            match e {
                // Logged by the pass, once per change.
                FirstStartError::Config(c) => {
                    metrics.config_problems.set(c.problems.len() as i64);
                }
                FirstStartError::Store(e) => {
                    warn!(error = %e, "first start (default IPPools) failed; retrying")
                }
            }
        }
    }
}
