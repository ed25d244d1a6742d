//! The datastore's own round trips under the same load, timed on their
//! own after the CNI ADDs (so that they take nothing from them): a read of
//! a small object and a compare-and-swap write of another, one every
//! 10 ms by turns, over a connection of its own. An ADD is a new process
//! making several such round trips one after another (reads, then the
//! block's write, then its record's), so its tail holds the datastore's
//! further out than these p99s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::DynamicObject;
use serde_json::json;
use tartan_api::store::{Datastore, ObjectKey};

/// Between two round trips.
const EVERY: Duration = Duration::from_millis(10);

/// What was timed.
#[derive(Debug, Default)]
pub struct Timed {
    /// Reads and writes that succeeded, each from its start to its answer.
    pub reads: Vec<Duration>,
    pub writes: Vec<Duration>,
    /// Round trips the datastore refused or did not answer.
    pub failed: u64,
}

/// Reads `read` and rewrites a Pod of its own in `default` for `span`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    spec: &str,
    read: ObjectKey,
    span: Duration,
) -> Result<Timed> {
    rt.block_on(async {
        let store: Arc<dyn Datastore> =
            tartan_api::store::connect(spec, Some(Duration::from_secs(10))).await?;
        // The first round trip opens the connection; not timed.
        store.get(&read).await?;
        let pod: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "scale-probe", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "none"}]}}))?;
        let mut pod = store.create(pod).await.context("the probe's Pod")?;
        let mut took = Timed::default();
        let mut tick = tokio::time::interval(EVERY);
        let end = Instant::now() + span;
        let mut n: u64 = 0;
        while Instant::now() < end {
            tick.tick().await;
            n += 1;
            let t = Instant::now();
            if n.is_multiple_of(2) {
                match store.get(&read).await {
                    Ok(_) => took.reads.push(t.elapsed()),
                    Err(_) => took.failed += 1,
                }
            } else {
                // An annotation: no agent acts on it.
                let mut next = pod.clone();
                next.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert("tartan.dev/probe".into(), n.to_string());
                match store.update(next).await {
                    Ok(p) => {
                        took.writes.push(t.elapsed());
                        pod = p;
                    }
                    Err(_) => {
                        took.failed += 1;
                        pod = store.get(&ObjectKey::of(&pod)?).await?;
                    }
                }
            }
        }
        store.delete(&ObjectKey::of(&pod)?, None).await?;
        Ok(took)
    })
}
