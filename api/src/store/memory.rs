//! An in-memory backend with etcd's semantics: one revision counter for the
//! whole store, a history of changes a watch reads from, and compaction.
//! Used by unit tests of everything above the datastore (watch resume,
//! IPAM, calculation) and by `tartanctl --datastore memory`. It can be made
//! unavailable to test how callers ride out an outage.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch as notify;

use super::{
    Datastore, DynamicObject, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError, WatchScope,
};
use crate::kind::Kind;

#[derive(Default)]
struct State {
    objects: BTreeMap<ObjectKey, DynamicObject>,
    revision: u64,
    /// Changes after `compacted`, oldest first.
    history: VecDeque<(u64, ObjectKey, RawEvent)>,
    compacted: u64,
    unavailable: bool,
    next_uid: u64,
}

#[derive(Clone)]
pub struct MemoryStore {
    state: Arc<Mutex<State>>,
    /// Carries the latest revision; bumped on every change (and on outage
    /// changes) to wake watches.
    tick: Arc<notify::Sender<u64>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

fn rv_of(o: &DynamicObject) -> Option<u64> {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
}

fn parse_rv(key: &ObjectKey, rv: &str) -> Result<u64> {
    rv.parse().map_err(|_| StoreError::Conflict {
        key: key.clone(),
        expected: rv.to_string(),
    })
}

fn in_scope(key: &ObjectKey, kind: Kind, namespace: Option<&str>) -> bool {
    key.kind == kind && (namespace.is_none() || key.namespace.as_deref() == namespace)
}

impl MemoryStore {
    pub fn new() -> Self {
        let (tx, _) = notify::channel(0);
        MemoryStore {
            state: Arc::default(),
            tick: Arc::new(tx),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_available(&self) -> Result<MutexGuard<'_, State>> {
        let s = self.lock();
        if s.unavailable {
            return Err(StoreError::Unavailable("memory store switched off".into()));
        }
        Ok(s)
    }

    /// Forget history up to and including `revision`: watches from an
    /// older revision get [`StoreError::Expired`].
    pub fn compact(&self, revision: u64) {
        let mut s = self.lock();
        let revision = revision.min(s.revision);
        while s.history.front().is_some_and(|(r, _, _)| *r <= revision) {
            s.history.pop_front();
        }
        s.compacted = s.compacted.max(revision);
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Switch the store off (every call fails as unavailable and running
    /// watches end) or on again.
    pub fn set_unavailable(&self, off: bool) {
        let rev = {
            let mut s = self.lock();
            s.unavailable = off;
            s.revision
        };
        self.tick.send_replace(rev);
    }

    fn record(&self, mut s: MutexGuard<'_, State>, key: ObjectKey, event: RawEvent) {
        let rev = s.revision;
        s.history.push_back((rev, key, event));
        drop(s);
        self.tick.send_replace(rev);
    }
}

#[async_trait]
impl Datastore for MemoryStore {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        let s = self.lock_available()?;
        s.objects
            .get(key)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(key.clone()))
    }

    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        let s = self.lock_available()?;
        let items = s
            .objects
            .iter()
            .filter(|(k, _)| in_scope(k, kind, namespace))
            .map(|(_, o)| o.clone())
            .collect();
        Ok(Listing {
            items,
            revision: s.revision.to_string(),
        })
    }

    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        let s = self.lock_available()?;
        let items = s
            .objects
            .iter()
            .filter(|(k, o)| in_scope(k, kind, namespace) && narrow.matches(o))
            .map(|(_, o)| o.clone())
            .collect();
        Ok(Listing {
            items,
            revision: s.revision.to_string(),
        })
    }

    async fn create(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let mut s = self.lock_available()?;
        if s.objects.contains_key(&key) {
            return Err(StoreError::AlreadyExists(key));
        }
        s.revision += 1;
        s.next_uid += 1;
        obj.metadata.namespace = key.namespace.clone();
        obj.metadata.uid = Some(format!("memory-{}", s.next_uid));
        obj.metadata.resource_version = Some(s.revision.to_string());
        s.objects.insert(key.clone(), obj.clone());
        self.record(s, key, RawEvent::Put(obj.clone()));
        Ok(obj)
    }

    async fn update(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let expected = key.expected_version(&obj)?;
        let expected_rv = parse_rv(&key, &expected)?;
        let mut s = self.lock_available()?;
        let Some(old) = s.objects.get(&key) else {
            return Err(StoreError::NotFound(key));
        };
        if rv_of(old) != Some(expected_rv) {
            return Err(StoreError::Conflict { key, expected });
        }
        let uid = old.metadata.uid.clone();
        s.revision += 1;
        obj.metadata.uid = uid;
        obj.metadata.namespace = key.namespace.clone();
        obj.metadata.resource_version = Some(s.revision.to_string());
        s.objects.insert(key.clone(), obj.clone());
        self.record(s, key, RawEvent::Put(obj.clone()));
        Ok(obj)
    }

    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        let mut s = self.lock_available()?;
        let Some(old) = s.objects.get(key) else {
            return Err(StoreError::NotFound(key.clone()));
        };
        if let Some(rv) = resource_version
            && rv_of(old) != Some(parse_rv(key, rv)?)
        {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: rv.to_string(),
            });
        }
        let Some(mut old) = s.objects.remove(key) else {
            return Err(StoreError::NotFound(key.clone()));
        };
        s.revision += 1;
        old.metadata.resource_version = Some(s.revision.to_string());
        self.record(s, key.clone(), RawEvent::Deleted(old));
        Ok(())
    }

    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        let from: u64 = revision
            .parse()
            .map_err(|_| StoreError::BadObject(format!("revision {revision:?} is not a number")))?;
        {
            let s = self.lock_available()?;
            if from < s.compacted {
                return Err(StoreError::Expired(revision.to_string()));
            }
        }
        let store = self.clone();
        let scope = scope.clone();
        let rx = self.tick.subscribe();
        // State: (store, scope, last revision delivered, wake-up receiver,
        // events read but not yet handed out, finished).
        let init = (
            store,
            scope,
            from,
            rx,
            VecDeque::<Result<RawEvent>>::new(),
            false,
        );
        let stream = futures::stream::unfold(
            init,
            |(store, scope, mut last, mut rx, mut ready, done)| async move {
                loop {
                    if let Some(item) = ready.pop_front() {
                        return Some((item, (store, scope, last, rx, ready, false)));
                    }
                    if done {
                        return None;
                    }
                    {
                        let s = store.lock();
                        if s.unavailable {
                            ready.push_back(Err(StoreError::Unavailable(
                                "memory store switched off".into(),
                            )));
                            drop(s);
                            let item = ready.pop_front()?;
                            return Some((item, (store, scope, last, rx, ready, true)));
                        }
                        if last < s.compacted {
                            let item = Err(StoreError::Expired(last.to_string()));
                            drop(s);
                            return Some((item, (store, scope, last, rx, ready, true)));
                        }
                        let since = last;
                        for (rev, key, ev) in s.history.iter().filter(|(r, _, _)| *r > since) {
                            if in_scope(key, scope.kind, scope.namespace.as_deref()) {
                                ready.push_back(Ok(ev.clone()));
                            }
                            last = *rev;
                        }
                    }
                    if ready.is_empty() && rx.changed().await.is_err() {
                        return None;
                    }
                }
            },
        );
        Ok(stream.boxed())
    }

    fn describe(&self) -> String {
        "memory".to_string()
    }
}
