//! What a Service write reads, through a store that records every call:
//! completing and writing Services reads them by name and the three
//! allocation records, never a listing of every Service, however many
//! are stored. The recording store also serves the concurrency test
//! (it can yield on every call, and counts lost compare-and-swaps).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use futures::stream::BoxStream;
use serde_json::json;
use tartan_api::Kind;
use tartan_api::store::connect::Checked;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{
    Datastore, DynamicObject, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError, WatchScope,
};

use super::complete_tests::{apply, obj, svc};
use super::*;

/// One call: what was asked, of which kind, and how many objects came back.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub call: &'static str,
    pub kind: Kind,
    pub objects: usize,
}

/// A memory store that records every read.
pub(super) struct Recording {
    inner: Checked,
    calls: Mutex<Vec<Call>>,
    yielding: bool,
    conflicts: AtomicUsize,
}

impl Recording {
    /// With `yielding`, every call lets other tasks run first.
    pub(super) fn new(yielding: bool) -> Recording {
        Recording {
            inner: Checked(Box::new(MemoryStore::new())),
            calls: Mutex::new(vec![]),
            yielding,
            conflicts: AtomicUsize::new(0),
        }
    }

    async fn note(&self, call: &'static str, kind: Kind, objects: usize) {
        if self.yielding {
            tokio::task::yield_now().await;
        }
        self.calls.lock().unwrap().push(Call {
            call,
            kind,
            objects,
        });
    }

    pub(super) fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }

    /// Compare-and-swap writes lost to another writer.
    pub(super) fn conflicts(&self) -> usize {
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
        self.note("get", key.kind, 1).await;
        self.inner.get(key).await
    }
    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        let l = self.inner.list(kind, namespace).await?;
        self.note("list", kind, l.items.len()).await;
        Ok(l)
    }
    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        let l = self.inner.list_narrow(kind, namespace, narrow).await?;
        self.note("list_narrow", kind, l.items.len()).await;
        Ok(l)
    }
    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.note("create", ObjectKey::of(&obj)?.kind, 1).await;
        let r = self.inner.create(obj).await;
        self.count(r)
    }
    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.note("update", ObjectKey::of(&obj)?.kind, 1).await;
        let r = self.inner.update(obj).await;
        self.count(r)
    }
    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
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

#[tokio::test]
async fn a_service_write_lists_no_services() {
    let store = Recording::new(false);
    for i in 0..200 {
        let t = if i % 2 == 0 { "ClusterIP" } else { "NodePort" };
        apply(&store, vec![svc(&format!("s{i}"), t, json!({}))])
            .await
            .unwrap();
    }
    store.take();
    // Two new Services, one written again as another type, with a slice.
    let slice = obj(
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "n1-a", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "n1"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"]}]}),
    );
    let written = apply(
        &store,
        vec![
            svc("n1", "ClusterIP", json!({})),
            slice,
            svc("n2", "NodePort", json!({"selector": {"app": "x"}})),
            svc("s1", "ClusterIP", json!({})),
        ],
    )
    .await
    .unwrap();
    assert_eq!(written[0].data["spec"]["clusterIP"], "10.96.0.202");
    let keys: Vec<(String, String)> = ["n1", "n2", "s1"]
        .iter()
        .map(|n| ("default".to_string(), n.to_string()))
        .collect();
    sync_slices_of(&store, &keys).await.unwrap();
    let calls = store.take();
    for c in &calls {
        assert!(
            c.call != "list" || !matches!(c.kind, Kind::Service | Kind::EndpointSlice),
            "listed every {}: {calls:#?}",
            c.kind
        );
        assert!(c.objects <= 1, "read {} objects at once: {c:?}", c.objects);
    }
    let service_gets = calls
        .iter()
        .filter(|c| c.call == "get" && c.kind == Kind::Service)
        .count();
    // Its stored self before the claim, then once more before the write
    // (this test's apply) and once for the slices.
    assert_eq!(service_gets, 3 * 3, "{calls:#?}");
    // n2 selects: its namespace's Pods (none here) are read, and its slice written.
    assert!(
        calls
            .iter()
            .any(|c| c.call == "create" && c.kind == Kind::EndpointSlice),
        "{calls:#?}"
    );
}
