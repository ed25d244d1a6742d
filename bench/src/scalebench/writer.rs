//! Writing the simulated cluster into the datastore: many objects from
//! several writers at once, and the kubelets' heartbeats (each Node's
//! Ready condition posted again every interval) while a size is measured.
//! The heartbeats go through a store that keeps every Node it read or
//! wrote, as an API server's watch cache holds them: one etcd transaction
//! per post.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kube::api::DynamicObject;
use serde_json::Value;
use tartan_api::store::Datastore;

/// Creates object `f(i)` for every `i < n`, from `writers` writers.
pub async fn create_indexed<F>(
    store: &Arc<dyn Datastore>,
    n: usize,
    writers: usize,
    f: F,
) -> Result<()>
where
    F: Fn(usize) -> Value + Clone + Send + Sync + 'static,
{
    let writers = writers.max(1);
    let mut tasks = Vec::new();
    for w in 0..writers {
        let (store, f) = (store.clone(), f.clone());
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(writers) {
                let v = f(i);
                let obj: DynamicObject = serde_json::from_value(v).context("generated object")?;
                let name = obj.metadata.name.clone().unwrap_or_default();
                store
                    .create(obj)
                    .await
                    .with_context(|| format!("create {name}"))?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// The kubelets: every Node's status posted again each `every`, spread
/// evenly over the interval, until dropped.
pub struct Heartbeats {
    stop: Arc<AtomicBool>,
    pub writes: Arc<AtomicU64>,
    pub failures: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Writers the heartbeats are spread over (each paces its own share).
const BEAT_WRITERS: usize = 4;

impl Heartbeats {
    /// Starts posting for `nodes` (name, the object as last written).
    pub fn start(
        rt: &tokio::runtime::Runtime,
        store: &Arc<dyn Datastore>,
        nodes: Vec<DynamicObject>,
        every: Duration,
    ) -> Heartbeats {
        let stop = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(AtomicU64::new(0));
        let mut shares: Vec<Vec<DynamicObject>> = vec![Vec::new(); BEAT_WRITERS];
        for (i, n) in nodes.into_iter().enumerate() {
            shares[i % BEAT_WRITERS].push(n);
        }
        let tasks = shares
            .into_iter()
            .filter(|s| !s.is_empty())
            .map(|share| {
                let (store, stop) = (store.clone(), stop.clone());
                let (writes, failures) = (writes.clone(), failures.clone());
                rt.spawn(async move {
                    beat(store, share, every, stop, writes, failures).await;
                })
            })
            .collect();
        Heartbeats {
            stop,
            writes,
            failures,
            tasks,
        }
    }

    /// Stops the writers and waits for them.
    pub fn stop(mut self, rt: &tokio::runtime::Runtime) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks.drain(..) {
            let _ = rt.block_on(t);
        }
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn beat(
    store: Arc<dyn Datastore>,
    mut share: Vec<DynamicObject>,
    every: Duration,
    stop: Arc<AtomicBool>,
    writes: Arc<AtomicU64>,
    failures: Arc<AtomicU64>,
) {
    // Each Node read once first, as a kubelet does when it starts: a
    // store that keeps what it reads then posts each status in one
    // transaction from the first beat on.
    for obj in share.iter_mut() {
        if let Ok(key) = tartan_api::store::ObjectKey::of(obj)
            && let Ok(fresh) = store.get(&key).await
        {
            *obj = fresh;
        }
    }
    let gap = every / share.len().max(1) as u32;
    let start = Instant::now();
    let mut k: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let due = start + gap * (k as u32);
        tokio::time::sleep_until(due.into()).await;
        let i = (k as usize) % share.len();
        k += 1;
        let mut obj = share[i].clone();
        obj.data["status"]["conditions"] = Value::Array(vec![super::objects::ready(&now())]);
        match store.update_status(obj).await {
            Ok(new) => {
                share[i] = new;
                writes.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                failures.fetch_add(1, Ordering::Relaxed);
                // Read it again: another writer (felix, bgpd) may have
                // changed the Node since.
                if let Ok(key) = tartan_api::store::ObjectKey::of(&share[i])
                    && let Ok(fresh) = store.get(&key).await
                {
                    share[i] = fresh;
                }
            }
        }
    }
}

/// Now as the API server writes times (RFC 3339, seconds, UTC).
pub fn now() -> String {
    let t = k8s_openapi::jiff::Timestamp::now();
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}
