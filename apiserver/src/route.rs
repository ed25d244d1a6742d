//! A resource request resolved to the store: which kind, namespace, object
//! and subresource it addresses, and the API server's `Status` answers
//! about it (404, 409, 410, 403, …) in its words.

use axum::response::Response;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::{ObjectKey, StoreError};

use crate::request::ResourceRef;
use crate::wire::status;

/// The store's view of a resource request.
pub struct Route {
    pub kind: Kind,
    /// `None` for cluster-scoped kinds (a namespace's own path included).
    pub namespace: Option<String>,
    /// The object the path names.
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Route {
    /// The kind `r` names, if the store holds it.
    pub fn of(r: &ResourceRef) -> Option<Route> {
        let kind = Kind::all().find(|k| {
            let i = k.info();
            i.group == r.group && i.version == r.version && i.plural == r.resource
        })?;
        Some(Route {
            kind,
            namespace: r.namespace.clone().filter(|_| kind.info().namespaced),
            name: r.name.clone().filter(|_| r.object_path),
            subresource: r.subresource.clone(),
        })
    }

    pub fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(self.kind, self.namespace.as_deref(), name)
    }

    /// `ippools.tartan.dev` or `pods`, as API server messages name it.
    pub fn resource(&self) -> String {
        let i = self.kind.info();
        if i.group.is_empty() {
            i.plural.to_string()
        } else {
            format!("{}.{}", i.plural, i.group)
        }
    }

    pub fn details(&self, name: &str) -> Value {
        let i = self.kind.info();
        json!({"name": name, "group": i.group, "kind": i.plural})
    }

    /// A store error as the API server answers it.
    pub fn error(&self, name: &str, e: StoreError) -> Response {
        let r = self.resource();
        match e {
            StoreError::NotFound(_) => status(
                404,
                "NotFound",
                &format!("{r} \"{name}\" not found"),
                Some(self.details(name)),
            ),
            StoreError::AlreadyExists(_) => status(
                409,
                "AlreadyExists",
                &format!("{r} \"{name}\" already exists"),
                Some(self.details(name)),
            ),
            StoreError::Conflict { .. } => status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {r} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                ),
                Some(self.details(name)),
            ),
            StoreError::Expired(_) => status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                None,
            ),
            StoreError::Unavailable(m) => status(503, "ServiceUnavailable", &m, None),
            StoreError::Invalid(m) => status(422, "Invalid", &m, Some(self.details(name))),
            other => status(500, "InternalError", &other.to_string(), None),
        }
    }
}

/// 403 as the API server words it: `services "s" is forbidden: User "u"
/// cannot update resource "services/status" in API group "" in the
/// namespace "ns"`.
pub fn forbidden(user: &str, verb: &str, r: Option<&ResourceRef>, path: &str) -> Response {
    let Some(r) = r else {
        return status(
            403,
            "Forbidden",
            &format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\""),
            None,
        );
    };
    let what = if r.group.is_empty() {
        r.resource.clone()
    } else {
        format!("{}.{}", r.resource, r.group)
    };
    let object = match &r.name {
        Some(n) => format!("{what} \"{n}\""),
        None => what,
    };
    let scope = match &r.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    status(
        403,
        "Forbidden",
        &format!(
            "{object} is forbidden: User \"{user}\" cannot {verb} resource \"{}\" in API group \"{}\" {scope}",
            r.combined(),
            r.group
        ),
        Some(
            json!({"name": r.name.clone().unwrap_or_default(), "group": r.group, "kind": r.resource}),
        ),
    )
}

/// 404 for a path the server has no resource at.
pub fn no_such_resource() -> Response {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource",
        None,
    )
}
