//! The datastore's own round trip, timed while the CNI ADDs run: a read of
//! one small object every 10 ms over a connection of its own, as the
//! plugin reads. Its tail beside the ADDs' tells how much of theirs is
//! the datastore's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use tartan_api::store::{Datastore, ObjectKey};

/// Reads between two probes.
const EVERY: Duration = Duration::from_millis(10);

pub struct Probe {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Timed>,
}

/// What a probe measured.
#[derive(Debug, Default)]
pub struct Timed {
    /// The reads that succeeded, each from its start to its answer.
    pub reads: Vec<Duration>,
    /// Reads the datastore refused or did not answer.
    pub failed: u64,
}

impl Probe {
    /// Reads `key` from `spec`'s datastore until stopped.
    pub fn start(rt: &tokio::runtime::Runtime, spec: &str, key: ObjectKey) -> Result<Probe> {
        let store: Arc<dyn Datastore> = rt.block_on(tartan_api::store::connect(
            spec,
            Some(Duration::from_secs(10)),
        ))?;
        // The first read opens the connection; it is not timed.
        rt.block_on(store.get(&key))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = rt.spawn(async move {
            let mut took = Timed::default();
            let mut tick = tokio::time::interval(EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // At least one read, however soon it is stopped.
            loop {
                tick.tick().await;
                let t = Instant::now();
                match store.get(&key).await {
                    Ok(_) => took.reads.push(t.elapsed()),
                    Err(_) => took.failed += 1,
                }
                if flag.load(Ordering::Relaxed) {
                    return took;
                }
            }
        });
        Ok(Probe { stop, task })
    }

    /// What was timed.
    pub fn stop(self, rt: &tokio::runtime::Runtime) -> Result<Timed> {
        self.stop.store(true, Ordering::Relaxed);
        Ok(rt.block_on(self.task)?)
    }
}
