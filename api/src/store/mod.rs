//! The datastore: one interface over etcd and the Kubernetes API.
//!
//! Objects travel as [`DynamicObject`]s in Kubernetes shape (apiVersion,
//! kind, metadata, spec); [`typed`] converts them to and from the typed
//! resources. Every write is checked against the object's
//! `metadata.resourceVersion` where one is given (compare-and-swap), and
//! every backend hands out the same errors, so callers never look at which
//! store they talk to.
//!
//! A backend implements the raw calls of [`Datastore`]; [`watch::watch`]
//! builds the consumer's watch on top of them: list, then watch from the
//! list's revision, relisting when the store says the revision is gone
//! (etcd compaction, Kubernetes 410 Gone) and reporting to its consumer only
//! the difference, so no event is lost or repeated.

pub mod conformance;
pub mod connect;
pub mod error;
pub mod etcd;
pub mod kube;
pub mod memory;
pub mod narrow;
pub mod placeholder;
pub mod readable;
pub mod recording;
pub mod resource;
pub mod retry;
pub mod shape;
pub mod typed;
pub mod watch;

use std::fmt;

pub use ::kube::core::DynamicObject;
use async_trait::async_trait;
use futures::stream::BoxStream;

pub use connect::{StoreSpec, connect};
pub use error::StoreError;
pub use narrow::Narrow;

use crate::kind::Kind;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Names one object. `namespace` is `None` exactly for cluster-scoped kinds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> Self {
        ObjectKey {
            kind,
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of an object, read from its apiVersion/kind and metadata.
    pub fn of(obj: &DynamicObject) -> Result<Self> {
        let types = obj
            .types
            .as_ref()
            .ok_or_else(|| StoreError::BadObject("apiVersion and kind are required".into()))?;
        let kind = Kind::from_type(&types.api_version, &types.kind).ok_or_else(|| {
            StoreError::BadObject(format!(
                "unknown kind {:?} in apiVersion {:?}",
                types.kind, types.api_version
            ))
        })?;
        let name = obj
            .metadata
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| StoreError::BadObject(format!("{kind}: metadata.name is required")))?;
        let namespace = if kind.info().namespaced {
            Some(
                obj.metadata
                    .namespace
                    .clone()
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "default".to_string()),
            )
        } else {
            None
        };
        Ok(ObjectKey {
            kind,
            namespace,
            name,
        })
    }
}

impl ObjectKey {
    /// The resourceVersion an update of `obj` (this key's object) replaces;
    /// updates without one are refused.
    pub fn expected_version(&self, obj: &DynamicObject) -> Result<String> {
        obj.metadata
            .resource_version
            .clone()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                StoreError::BadObject(format!("{self}: update needs metadata.resourceVersion"))
            })
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Whether two versions of an object say the same: everything outside
/// metadata, and the labels and annotations (an empty map and none alike).
pub fn same_content(a: &DynamicObject, b: &DynamicObject) -> bool {
    fn non_empty(
        m: &Option<std::collections::BTreeMap<String, String>>,
    ) -> Option<&std::collections::BTreeMap<String, String>> {
        m.as_ref().filter(|m| !m.is_empty())
    }
    a.data == b.data
        && non_empty(&a.metadata.labels) == non_empty(&b.metadata.labels)
        && non_empty(&a.metadata.annotations) == non_empty(&b.metadata.annotations)
}

/// A consistent listing of one kind: the objects and the store revision they
/// were read at, from which a watch continues.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub items: Vec<DynamicObject>,
    pub revision: String,
}

/// One page of a listing read in pages ([`Datastore::list_page`]).
#[derive(Clone, Debug, Default)]
pub struct ListPage {
    pub items: Vec<DynamicObject>,
    /// The revision every page of this listing is read at.
    pub revision: String,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<String>,
}

/// One change as a backend's raw watch reports it.
#[derive(Clone, Debug)]
pub enum RawEvent {
    /// Created or changed: the object as it now is.
    Put(DynamicObject),
    /// Deleted: the object as it last was (at least its key; its
    /// resourceVersion is the revision of the deletion).
    Deleted(DynamicObject),
    /// Nothing changed for this kind up to this revision (a Kubernetes
    /// bookmark, an etcd progress notify).
    Progress(String),
}

/// What to watch: one kind, optionally one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchScope {
    pub kind: Kind,
    pub namespace: Option<String>,
    /// The consumer reads only the metadata and type of each changed
    /// object and the shape of its other fields
    /// ([`shape::metadata_from_slice`]): a backend may decode just that
    /// (etcd does, for each event after the listing) or give the object
    /// whole. Listings are whole.
    pub metadata_only: bool,
}

/// The calls every backend implements. Conventions:
/// - `create` fails with [`StoreError::AlreadyExists`] if the name is taken.
/// - `update` requires `metadata.resourceVersion` and fails with
///   [`StoreError::Conflict`] if the stored object has another one;
///   [`StoreError::NotFound`] if it is gone.
/// - `delete` with `Some(rv)` deletes only that version (else `Conflict`).
/// - Returned objects carry the store's resourceVersion (and, on create, a
///   uid and creationTimestamp).
/// - A raw watch ends with [`StoreError::Expired`] when the revision it
///   watches from is no longer available; other errors end it too.
/// - Transient failures (store unreachable) are [`StoreError::Unavailable`]
///   after the backend's own retries; callers may retry them.
#[async_trait]
pub trait Datastore: Send + Sync + 'static {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject>;
    /// All objects of a kind; of one namespace if `namespace` is given.
    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing>;
    /// The objects of a kind that `narrow` picks, read without reading
    /// the whole kind where the backend can (see [`narrow`]); by default a
    /// whole listing, filtered.
    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        let mut l = self.list(kind, namespace).await?;
        l.items.retain(|o| narrow.matches(o));
        Ok(l)
    }

    /// One page (at most about `limit` objects) of the listing of a kind;
    /// the first with `from: None`, each next one from the previous
    /// page's `next`, until that is `None`. All pages are read at the
    /// first page's revision, so together they are one consistent
    /// listing; a consumer holds one page at a time instead of the whole
    /// listing. A `from` whose revision the store has forgotten fails
    /// (start again from the first page). The default reads everything
    /// as one page.
    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        let _ = (from, limit);
        let l = self.list(kind, namespace).await?;
        Ok(ListPage {
            items: l.items,
            revision: l.revision,
            next: None,
        })
    }
    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject>;
    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject>;
    /// Write `obj`'s `status` (a compare-and-swap like [`update`]): on
    /// Kubernetes the `status` subresource, which a plain update of a
    /// kind with one (a Service) leaves as it was; elsewhere an update.
    ///
    /// [`update`]: Datastore::update
    async fn update_status(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.update(obj).await
    }
    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()>;
    /// Changes after `revision` (exclusive), in order.
    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>>;
    /// A short name for logs: `etcd://127.0.0.1:2379`, `kubernetes`, `memory`.
    fn describe(&self) -> String;
}
