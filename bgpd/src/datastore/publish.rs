//! Publishes this node's BGPNodeStatus: a look at the speaker every
//! second, a write when the report changed (so at most one a second) and
//! every `refresh` regardless, so that readers can tell a dead bgpd by the
//! report's age. On the refresh timer it reads its own Node (one object,
//! never a listing: every node doing this costs the datastore O(nodes),
//! not O(nodes²)); a node deleted from the cluster deletes its report and
//! stops reporting. Reports left by nodes that are gone and cannot do
//! that themselves are deleted by tartan-controllers' garbage collection.
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use prometheus_client::metrics::histogram::Histogram;
use tartan_api::resources::{BgpNodeStatus, BgpNodeStatusSpec};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tracing::{debug, info, warn};

use super::report::{changed, report};
use crate::control::ControlSource;

/// The default of `--status-interval`.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);

/// How often the speaker is looked at: the bound on writes for changes.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Runs until dropped (abort the task to stop).
pub async fn publish<S: ControlSource>(
    store: Arc<dyn Datastore>,
    node: String,
    speaker: S,
    refresh: Duration,
) {
    publish_recording(store, node, speaker, refresh, None).await
}

/// As [`publish`], recording the time of every write of the report in
/// `write_seconds`.
pub async fn publish_recording<S: ControlSource>(
    store: Arc<dyn Datastore>,
    node: String,
    speaker: S,
    refresh: Duration,
    write_seconds: Option<Histogram>,
) {
    let refresh = refresh.max(LOOK_EVERY);
    let refresh_seconds = u32::try_from(refresh.as_secs()).unwrap_or(u32::MAX);
    let mut written: Option<BgpNodeStatusSpec> = None;
    let mut last_write: Option<Instant> = None;
    let mut last_sweep: Option<Instant> = None;
    // Whether our Node exists, as of the last sweep.
    let mut node_present = true;
    let mut tick = tokio::time::interval(LOOK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if last_sweep.is_none_or(|t| t.elapsed() >= refresh) {
            last_sweep = Some(Instant::now());
            match node_exists(store.as_ref(), &node).await {
                Ok(present) => {
                    if node_present && !present {
                        info!(node = %node, "our Node is gone: no more status reports");
                        written = None;
                    }
                    if !present {
                        remove_own(store.as_ref(), &node).await;
                    }
                    node_present = present;
                }
                Err(e) => warn!(error = %e, "cannot read our Node"),
            }
        }
        if !node_present {
            continue;
        }
        let (Ok(status), Ok(peers)) = (speaker.status().await, speaker.peers().await) else {
            // The speaker is shutting down.
            return;
        };
        let new = report(
            &node,
            &status,
            &peers,
            epoch_seconds(),
            refresh_seconds,
            written.as_ref(),
        );
        let due = last_write.is_none_or(|t| t.elapsed() >= refresh);
        if !due && written.as_ref().is_some_and(|w| !changed(w, &new)) {
            continue;
        }
        let started = Instant::now();
        let written_now = write(store.as_ref(), &new).await;
        if let Some(h) = &write_seconds {
            h.observe(started.elapsed().as_secs_f64());
        }
        match written_now {
            Ok(()) => {
                debug!(node = %node, sessions = new.sessions.len(), "status report written");
                written = Some(new);
                last_write = Some(Instant::now());
            }
            Err(e) => warn!(error = %e, "cannot write the BGPNodeStatus report"),
        }
    }
}

/// Writes the report: an update of the stored one, or a create.
async fn write(store: &dyn Datastore, spec: &BgpNodeStatusSpec) -> Result<(), StoreError> {
    let mut obj = BgpNodeStatus::new(&spec.node, spec.clone());
    match store.get_typed::<BgpNodeStatus>(None, &spec.node).await {
        Ok(old) => {
            obj.metadata.resource_version = old.metadata.resource_version;
            store.update_typed(&obj).await.map(|_| ())
        }
        Err(StoreError::NotFound(_)) => store.create_typed(&obj).await.map(|_| ()),
        Err(e) => Err(e),
    }
}

/// Whether `node`'s Node object exists.
async fn node_exists(store: &dyn Datastore, node: &str) -> Result<bool, StoreError> {
    match store.get_typed::<Node>(None, node).await {
        Ok(_) => Ok(true),
        Err(StoreError::NotFound(_)) => Ok(false),
        // A Node that does not read still exists.
        Err(StoreError::BadObject(_)) => Ok(true),
        Err(e) => Err(e),
    }
}

/// Deletes this node's report, if there is one.
async fn remove_own(store: &dyn Datastore, node: &str) {
    match store.delete_typed::<BgpNodeStatus>(None, node, None).await {
        Ok(()) => info!(node = %node, "deleted our status report: our Node is gone"),
        Err(StoreError::NotFound(_)) => {}
        Err(e) => warn!(node = %node, error = %e, "cannot delete our status report"),
    }
}

fn epoch_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
