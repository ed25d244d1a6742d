//! A watch its consumer can trust: list, then follow the raw watch from the
//! list's revision; when the store has forgotten that revision (etcd
//! compaction, Kubernetes 410 Gone) or the connection drops, resume — by
//! relisting if need be — and hand the consumer only what changed since
//! what it last saw. Each object's events reach the consumer once, in order;
//! after a relist, objects that vanished in between come out as `Deleted`.
//!
//! The consumer never sees store errors: the watch retries with backoff and
//! logs. [`WatchEvent::Synced`] says the consumer's view now equals the
//! store at a revision (after the first list and after every relist), which
//! is when a node agent may act on "everything".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use futures::StreamExt;
use futures::stream::BoxStream;
use tracing::{debug, info, warn};

use super::{Datastore, DynamicObject, ObjectKey, RawEvent, Result, StoreError, WatchScope};

/// What the consumer of a watch sees.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    Added(DynamicObject),
    Modified(DynamicObject),
    /// The object as it was last seen by this watch.
    Deleted(DynamicObject),
    /// The consumer's view equals the store at `revision`.
    Synced {
        revision: String,
    },
}

/// A running watch of one kind (and optionally one namespace).
pub struct Watch {
    store: Arc<dyn Datastore>,
    scope: WatchScope,
    /// What the consumer has been told exists, by (namespace, name).
    seen: HashMap<(Option<String>, String), DynamicObject>,
    /// The revision the consumer's view is at; `None` until the first list.
    revision: Option<String>,
    raw: Option<BoxStream<'static, Result<RawEvent>>>,
    pending: std::collections::VecDeque<WatchEvent>,
    must_relist: bool,
    backoff: Option<ExponentialBackoff>,
    relists: u64,
}

/// Start watching: the first events are the current objects as `Added`,
/// then `Synced`, then changes.
pub fn watch(store: Arc<dyn Datastore>, scope: WatchScope) -> Watch {
    Watch {
        store,
        scope,
        seen: HashMap::new(),
        revision: None,
        raw: None,
        pending: Default::default(),
        must_relist: true,
        backoff: None,
        relists: 0,
    }
}

fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
}

fn local_key(o: &DynamicObject) -> (Option<String>, String) {
    (
        o.metadata.namespace.clone().filter(|n| !n.is_empty()),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

impl Watch {
    /// The next event. Waits as long as it takes; never fails.
    pub async fn next(&mut self) -> WatchEvent {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return e;
            }
            if self.must_relist {
                match self
                    .store
                    .list(self.scope.kind, self.scope.namespace.as_deref())
                    .await
                {
                    Ok(listing) => {
                        self.must_relist = false;
                        self.backoff = None;
                        self.relists += 1;
                        self.apply_listing(listing.items, listing.revision);
                        continue;
                    }
                    Err(e) => {
                        self.pause(&e, "list").await;
                        continue;
                    }
                }
            }
            let Some(raw) = self.raw.as_mut() else {
                let rev = self.revision.clone().unwrap_or_default();
                match self.store.watch_raw(&self.scope, &rev).await {
                    Ok(s) => self.raw = Some(s),
                    Err(StoreError::Expired(_)) => {
                        info!(kind = %self.scope.kind, revision = %rev, "watch revision no longer available; relisting");
                        self.must_relist = true;
                    }
                    Err(e) => self.pause(&e, "watch").await,
                }
                continue;
            };
            match raw.next().await {
                Some(Ok(ev)) => {
                    self.backoff = None;
                    self.apply_raw(ev);
                }
                Some(Err(StoreError::Expired(rev))) => {
                    info!(kind = %self.scope.kind, revision = %rev, "watch fell behind; relisting");
                    self.raw = None;
                    self.must_relist = true;
                }
                Some(Err(e)) => {
                    self.raw = None;
                    self.pause(&e, "watch").await;
                }
                None => {
                    debug!(kind = %self.scope.kind, "watch stream ended; resuming");
                    self.raw = None;
                }
            }
        }
    }

    /// The revision the consumer's view is at.
    pub fn revision(&self) -> Option<&str> {
        self.revision.as_deref()
    }

    /// How many times the watch listed (1 for the first list).
    pub fn lists(&self) -> u64 {
        self.relists
    }

    async fn pause(&mut self, e: &StoreError, what: &str) {
        let delay = self
            .backoff
            .get_or_insert_with(backoff)
            .next()
            .unwrap_or(Duration::from_secs(5));
        warn!(kind = %self.scope.kind, error = %e, retry_in = ?delay, "{what} failed");
        tokio::time::sleep(delay).await;
    }

    /// Replace the consumer's view with a full listing, telling it only the
    /// differences.
    fn apply_listing(&mut self, items: Vec<DynamicObject>, revision: String) {
        let mut fresh: HashMap<_, _> = HashMap::with_capacity(items.len());
        for o in items {
            fresh.insert(local_key(&o), o);
        }
        let gone: Vec<_> = self
            .seen
            .keys()
            .filter(|k| !fresh.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some(o) = self.seen.remove(&k) {
                self.pending.push_back(WatchEvent::Deleted(o));
            }
        }
        let mut keys: Vec<_> = fresh.keys().cloned().collect();
        keys.sort();
        for k in keys {
            let Some(o) = fresh.remove(&k) else { continue };
            match self.seen.get(&k) {
                Some(old) if old.metadata.resource_version == o.metadata.resource_version => {}
                Some(_) => self.pending.push_back(WatchEvent::Modified(o.clone())),
                None => self.pending.push_back(WatchEvent::Added(o.clone())),
            }
            self.seen.insert(k, o);
        }
        self.pending.push_back(WatchEvent::Synced {
            revision: revision.clone(),
        });
        self.revision = Some(revision);
    }

    fn apply_raw(&mut self, ev: RawEvent) {
        match ev {
            RawEvent::Put(o) => {
                let k = local_key(&o);
                self.note_revision(&o);
                match self.seen.get(&k) {
                    // A repeat of what the consumer has (a resumed watch
                    // replaying its first event): nothing to say.
                    Some(old) if old.metadata.resource_version == o.metadata.resource_version => {}
                    Some(_) => {
                        self.pending.push_back(WatchEvent::Modified(o.clone()));
                        self.seen.insert(k, o);
                    }
                    None => {
                        self.pending.push_back(WatchEvent::Added(o.clone()));
                        self.seen.insert(k, o);
                    }
                }
            }
            RawEvent::Deleted(o) => {
                self.note_revision(&o);
                if let Some(last) = self.seen.remove(&local_key(&o)) {
                    self.pending.push_back(WatchEvent::Deleted(last));
                }
            }
            RawEvent::Progress(rev) => self.revision = Some(rev),
        }
    }

    fn note_revision(&mut self, o: &DynamicObject) {
        if let Some(rv) = &o.metadata.resource_version {
            self.revision = Some(rv.clone());
        }
    }
}

/// The key of an object as the watch reports it, for consumers that keep
/// maps by key.
pub fn key_of(scope: &WatchScope, o: &DynamicObject) -> ObjectKey {
    let (namespace, name) = local_key(o);
    ObjectKey {
        kind: scope.kind,
        namespace,
        name,
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
