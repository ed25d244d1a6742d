//! The Kubernetes backend: every kind through the API server, Tartan's as
//! the `tartan.dev/v1` custom resources, the rest as the native kinds.
//!
//! The API server does the work etcd's backend does by hand: it keeps
//! resourceVersion, rejects stale updates with 409 Conflict, and says 410
//! Gone when a watch asks for a version it no longer has. This file only
//! maps its answers onto the [`Datastore`] conventions.

use async_trait::async_trait;
use futures::stream::{BoxStream, StreamExt};
use kube::api::{
    Api, DeleteParams, ListParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use kube::core::Status;
use tracing::debug;

use super::{
    Datastore, DynamicObject, ListPage, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError,
    WatchScope,
};
use crate::kind::Kind;

/// Objects asked for per list page; larger lists follow continue tokens,
/// all pages read at the first page's snapshot.
const PAGE: u32 = 500;

/// How long the API server keeps one watch request open. The consumer's
/// watch opens the next from the last revision it saw.
const WATCH_TIMEOUT_SECS: u32 = 290;

#[derive(Clone)]
pub struct KubeStore {
    client: kube::Client,
}

impl KubeStore {
    /// Connect as kubectl would: in-cluster service account, else
    /// `KUBECONFIG` / `~/.kube/config` and its current context.
    pub async fn connect() -> Result<Self> {
        let client = kube::Client::try_default().await.map_err(|e| {
            StoreError::Unavailable(format!("kubernetes: no usable configuration: {e}"))
        })?;
        Ok(KubeStore { client })
    }

    /// Use an existing client (tests point one at a replay server).
    pub fn from_client(client: kube::Client) -> Self {
        KubeStore { client }
    }

    fn api(&self, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = kind.api_resource();
        match namespace {
            Some(ns) if kind.info().namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &ar)
            }
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }

    fn api_for(&self, key: &ObjectKey) -> Api<DynamicObject> {
        self.api(key.kind, key.namespace.as_deref())
    }
}

/// The API server's answer as a store error, for the object `key` when the
/// call was about one.
fn map_err(e: kube::Error, key: Option<&ObjectKey>, expected: Option<&str>) -> StoreError {
    match e {
        kube::Error::Api(s) => map_status(&s, key, expected),
        kube::Error::HyperError(e) => StoreError::Unavailable(format!("kubernetes: {e}")),
        kube::Error::Service(e) => StoreError::Unavailable(format!("kubernetes: {e}")),
        kube::Error::ReadEvents(e) => {
            StoreError::Unavailable(format!("kubernetes: watch stream: {e}"))
        }
        other => StoreError::Backend(format!("kubernetes: {other}")),
    }
}

fn map_status(s: &Status, key: Option<&ObjectKey>, expected: Option<&str>) -> StoreError {
    let msg = if s.message.is_empty() {
        s.reason.clone()
    } else {
        s.message.clone()
    };
    match (s.code, key) {
        (404, Some(k)) => StoreError::NotFound(k.clone()),
        (409, Some(k)) if s.reason == "AlreadyExists" => StoreError::AlreadyExists(k.clone()),
        (409, Some(k)) => StoreError::Conflict {
            key: k.clone(),
            expected: expected.unwrap_or_default().to_string(),
        },
        (410, _) => StoreError::Expired(msg),
        (422, _) | (400, _) => StoreError::Invalid(msg),
        (429, _) | (500, _) | (502..=504, _) => {
            StoreError::Unavailable(format!("kubernetes: {} {msg}", s.code))
        }
        (code, _) => StoreError::Backend(format!("kubernetes: {code} {}: {msg}", s.reason)),
    }
}

#[async_trait]
impl Datastore for KubeStore {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        let mut o = self
            .api_for(key)
            .get(&key.name)
            .await
            .map_err(|e| map_err(e, Some(key), None))?;
        fill_types(key.kind, &mut o);
        Ok(o)
    }

    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        let api = self.api(kind, namespace);
        let mut items = Vec::new();
        let mut revision = String::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(PAGE);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = api.list(&lp).await.map_err(|e| map_err(e, None, None))?;
            if token.is_none() {
                revision = page.metadata.resource_version.clone().unwrap_or_default();
            }
            items.extend(page.items.into_iter().map(|mut o| {
                fill_types(kind, &mut o);
                o
            }));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        Ok(Listing { items, revision })
    }

    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        // The API server selects by the label; the name prefix is checked
        // here.
        let api = self.api(kind, namespace);
        let selector = narrow.label_selector();
        let mut items = Vec::new();
        let mut revision = String::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().labels(&selector).limit(PAGE);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = api.list(&lp).await.map_err(|e| map_err(e, None, None))?;
            if token.is_none() {
                revision = page.metadata.resource_version.clone().unwrap_or_default();
            }
            items.extend(page.items.into_iter().filter_map(|mut o| {
                fill_types(kind, &mut o);
                narrow.matches(&o).then_some(o)
            }));
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        Ok(Listing { items, revision })
    }

    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        let mut lp = ListParams::default().limit(u32::try_from(limit.max(1)).unwrap_or(PAGE));
        if let Some(t) = from {
            lp = lp.continue_token(t);
        }
        let page = self
            .api(kind, namespace)
            .list(&lp)
            .await
            .map_err(|e| map_err(e, None, None))?;
        Ok(ListPage {
            revision: page.metadata.resource_version.clone().unwrap_or_default(),
            next: page.metadata.continue_.filter(|t| !t.is_empty()),
            items: page
                .items
                .into_iter()
                .map(|mut o| {
                    fill_types(kind, &mut o);
                    o
                })
                .collect(),
        })
    }

    async fn create(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        obj.metadata.namespace = key.namespace.clone();
        let mut o = self
            .api_for(&key)
            .create(&PostParams::default(), &obj)
            .await
            .map_err(|e| map_err(e, Some(&key), None))?;
        fill_types(key.kind, &mut o);
        Ok(o)
    }

    async fn update(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let expected = key.expected_version(&obj)?;
        obj.metadata.namespace = key.namespace.clone();
        let mut o = self
            .api_for(&key)
            .replace(&key.name, &PostParams::default(), &obj)
            .await
            .map_err(|e| map_err(e, Some(&key), Some(&expected)))?;
        fill_types(key.kind, &mut o);
        Ok(o)
    }

    async fn update_status(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let expected = key.expected_version(&obj)?;
        obj.metadata.namespace = key.namespace.clone();
        let mut o = self
            .api_for(&key)
            .replace_status(&key.name, &PostParams::default(), &obj)
            .await
            .map_err(|e| map_err(e, Some(&key), Some(&expected)))?;
        fill_types(key.kind, &mut o);
        Ok(o)
    }

    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        let dp = DeleteParams {
            preconditions: resource_version.map(|rv| Preconditions {
                resource_version: Some(rv.to_string()),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        self.api_for(key)
            .delete(&key.name, &dp)
            .await
            .map_err(|e| map_err(e, Some(key), resource_version))?;
        Ok(())
    }

    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        let kind = scope.kind;
        let mut wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
        wp.bookmarks = true;
        let stream = self
            .api(kind, scope.namespace.as_deref())
            .watch(&wp, revision)
            .await
            .map_err(|e| map_err(e, None, None))?;
        debug!(%kind, revision, "kubernetes watch opened");
        Ok(stream
            .map(move |ev| match ev {
                Ok(WatchEvent::Added(mut o)) | Ok(WatchEvent::Modified(mut o)) => {
                    fill_types(kind, &mut o);
                    Ok(RawEvent::Put(o))
                }
                Ok(WatchEvent::Deleted(mut o)) => {
                    fill_types(kind, &mut o);
                    Ok(RawEvent::Deleted(o))
                }
                Ok(WatchEvent::Bookmark(b)) => Ok(RawEvent::Progress(b.metadata.resource_version)),
                Ok(WatchEvent::Error(s)) => Err(map_status(&s, None, None)),
                Err(e) => Err(map_err(e, None, None)),
            })
            .boxed())
    }

    fn describe(&self) -> String {
        "kubernetes".to_string()
    }
}

/// List items and watch events come without apiVersion/kind; the store's
/// objects always carry them.
fn fill_types(kind: Kind, o: &mut DynamicObject) {
    if o.types.is_none() {
        o.types = Some(kube::core::TypeMeta {
            api_version: kind.api_version(),
            kind: kind.info().name.to_string(),
        });
    }
}
