//! Test support: an in-memory store that records every call (what was
//! asked, of which kind, the names it touched), so that a test can assert
//! what a code path reads, for example that it never lists a whole kind.
//! It can also yield before every call, to interleave concurrent writers,
//! or take a set time over each (a round trip, so that a test under
//! tokio's paused clock can count how many a code path waits for one
//! after another), and counts compare-and-swap writes lost to another
//! writer.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;

use super::connect::Checked;
use super::memory::MemoryStore;
use super::{
    Datastore, DynamicObject, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError, WatchScope,
};
use crate::kind::Kind;

/// One call: its name (`get`, `list`, `list_narrow`, `create`, `update`),
/// the kind, and the names of the objects it read or wrote.
#[derive(Debug, Clone)]
pub struct Call {
    pub call: &'static str,
    pub kind: Kind,
    pub names: Vec<String>,
}

impl Call {
    /// A get or a listing.
    pub fn is_read(&self) -> bool {
        matches!(self.call, "get" | "list" | "list_narrow")
    }
}

/// A [`MemoryStore`] (behind the same checks as a connected store) that
/// records every call.
pub struct Recording {
    inner: Checked,
    calls: Mutex<Vec<Call>>,
    yielding: bool,
    latency: Option<std::time::Duration>,
    conflicts: AtomicUsize,
}

fn names(objects: &[DynamicObject]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.metadata.name.clone().unwrap_or_default())
        .collect()
}

impl Recording {
    /// With `yielding`, every call lets other tasks run first.
    pub fn new(yielding: bool) -> Recording {
        Recording {
            inner: Checked(Box::new(MemoryStore::new())),
            calls: Mutex::new(vec![]),
            yielding,
            latency: None,
            conflicts: AtomicUsize::new(0),
        }
    }

    /// Every call takes `latency` (tokio's clock) before it is answered.
    pub fn with_latency(latency: std::time::Duration) -> Recording {
        Recording {
            latency: Some(latency),
            ..Recording::new(false)
        }
    }

    async fn note(&self, call: &'static str, kind: Kind, names: Vec<String>) {
        if self.yielding {
            tokio::task::yield_now().await;
        }
        self.round_trip().await;
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.push(Call { call, kind, names });
    }

    async fn round_trip(&self) {
        if let Some(d) = self.latency {
            tokio::time::sleep(d).await;
        }
    }

    /// The calls recorded since the last take.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The reads recorded since the last take (writes dropped).
    pub fn take_reads(&self) -> Vec<Call> {
        self.take().into_iter().filter(Call::is_read).collect()
    }

    /// Compare-and-swap writes lost to another writer.
    pub fn conflicts(&self) -> usize {
        self.conflicts.load(Ordering::Relaxed)
    }

    fn count<T>(&self, r: Result<T>) -> Result<T> {
        if matches!(
            r,
            Err(StoreError::Conflict { .. } | StoreError::AlreadyExists(_))
        ) {
            self.conflicts.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

#[async_trait]
impl Datastore for Recording {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        self.note("get", key.kind, vec![key.name.clone()]).await;
        self.inner.get(key).await
    }
    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        let l = self.inner.list(kind, namespace).await?;
        self.note("list", kind, names(&l.items)).await;
        Ok(l)
    }
    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        let l = self.inner.list_narrow(kind, namespace, narrow).await?;
        self.note("list_narrow", kind, names(&l.items)).await;
        Ok(l)
    }
    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        self.note("create", key.kind, vec![key.name]).await;
        let r = self.inner.create(obj).await;
        self.count(r)
    }
    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        self.note("update", key.kind, vec![key.name]).await;
        let r = self.inner.update(obj).await;
        self.count(r)
    }
    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        self.round_trip().await;
        self.inner.delete(key, resource_version).await
    }
    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        self.inner.watch_raw(scope, revision).await
    }
    fn describe(&self) -> String {
        "recording".into()
    }
}
