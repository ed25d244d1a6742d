//! Objects of one resource as JSON, wherever they are kept: the memory
//! store (every kind of the kind table) or the stand-in's own map of
//! CustomResourceDefinitions. The writes of [`crate::writes`] are written
//! once over this, and its failures are the API server's `Status`
//! answers, in its words.

use axum::response::Response;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey, StoreError};

use crate::admission::{SYSTEM_NAMESPACES, Write, admit, no_namespace};
use crate::creations::Creations;
use crate::resources::Served;
use crate::route::Route;
use crate::wire::{status, to_wire};

/// One resource's objects.
pub trait Objects {
    fn served(&self) -> &Served;
    /// The namespace of the request, for namespaced kinds.
    fn namespace(&self) -> Option<&str>;
    /// The object, or `None` when there is none.
    fn get(&self, name: &str) -> impl Future<Output = Result<Option<Value>, Response>> + Send;
    fn create(&self, obj: Value) -> impl Future<Output = Result<Value, Response>> + Send;
    /// Replace the object whose resourceVersion `obj` carries (409 when it
    /// has moved on).
    fn update(&self, obj: Value) -> impl Future<Output = Result<Value, Response>> + Send;
    /// What the API server does to `obj` before `write` stores it (the
    /// namespace it goes into must exist; a built-in kind's defaults and
    /// checks: [`crate::admission`]). Nothing by default.
    fn admit(
        &self,
        obj: &mut Value,
        write: Write<'_>,
    ) -> impl Future<Output = Result<(), Response>> + Send {
        let _ = (obj, write);
        async { Ok(()) }
    }
}

pub fn details(served: &Served, name: &str) -> Value {
    json!({"name": name, "group": served.group, "kind": served.plural})
}

/// 404 `ippools.tartan.dev "p" not found`.
pub fn not_found(served: &Served, name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("{} \"{name}\" not found", served.resource()),
        Some(details(served, name)),
    )
}

/// 409 `ippools.tartan.dev "p" already exists`.
pub fn already_exists(served: &Served, name: &str) -> Response {
    status(
        409,
        "AlreadyExists",
        &format!("{} \"{name}\" already exists", served.resource()),
        Some(details(served, name)),
    )
}

/// 409: the object moved on since the writer read it.
pub fn conflict(served: &Served, name: &str) -> Response {
    status(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            served.resource()
        ),
        Some(details(served, name)),
    )
}

/// 400 with the API server's reason.
pub fn bad_request(message: &str) -> Response {
    status(400, "BadRequest", message, None)
}

/// The memory store's objects of one kind.
pub struct InStore<'a> {
    pub store: &'a MemoryStore,
    pub route: &'a Route,
    pub served: Served,
    pub creations: &'a Creations,
}

impl InStore<'_> {
    fn typed(&self, obj: Value) -> Result<DynamicObject, Response> {
        serde_json::from_value(obj).map_err(|e| bad_request(&e.to_string()))
    }

    /// A create's namespace must exist (the system ones always do): one
    /// read, for creates of namespaced kinds only.
    async fn namespace_exists(&self) -> Result<(), Response> {
        let Some(ns) = self.route.namespace.as_deref() else {
            return Ok(());
        };
        if SYSTEM_NAMESPACES.contains(&ns) {
            return Ok(());
        }
        match self
            .store
            .get(&ObjectKey::new(Kind::Namespace, None, ns))
            .await
        {
            Ok(_) => Ok(()),
            Err(StoreError::NotFound(_)) => Err(no_namespace(ns)),
            Err(e) => Err(self.route.error(ns, e)),
        }
    }
}

impl Objects for InStore<'_> {
    fn served(&self) -> &Served {
        &self.served
    }

    fn namespace(&self) -> Option<&str> {
        self.route.namespace.as_deref()
    }

    async fn get(&self, name: &str) -> Result<Option<Value>, Response> {
        match self.store.get(&self.route.key(name)).await {
            Ok(o) => Ok(Some(to_wire(&o))),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(self.route.error(name, e)),
        }
    }

    async fn create(&self, obj: Value) -> Result<Value, Response> {
        let obj = self.typed(obj)?;
        let name = obj.metadata.name.clone().unwrap_or_default();
        let o = self
            .store
            .create(obj)
            .await
            .map_err(|e| self.route.error(&name, e))?;
        if let (Some(uid), Some(rv)) = (&o.metadata.uid, &o.metadata.resource_version) {
            self.creations.created(uid, rv);
        }
        Ok(to_wire(&o))
    }

    async fn update(&self, obj: Value) -> Result<Value, Response> {
        let obj = self.typed(obj)?;
        let name = obj.metadata.name.clone().unwrap_or_default();
        self.store
            .update(obj)
            .await
            .map(|o| to_wire(&o))
            .map_err(|e| self.route.error(&name, e))
    }

    async fn admit(&self, obj: &mut Value, write: Write<'_>) -> Result<(), Response> {
        if matches!(write, Write::Create) {
            self.namespace_exists().await?;
        }
        admit(&self.served, obj, write)
    }
}
