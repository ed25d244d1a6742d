//! The stand-in server: plain HTTP, the objects in a [`MemoryStore`]
//! (whose revisions and compaction behave like the etcd behind a real API
//! server), lists with `resourceVersion` and `continue`, the `status`
//! subresource, `Status` bodies for 404, 409 AlreadyExists, 409 Conflict,
//! failed delete preconditions and 422 (messages as the API server words
//! them). Bearer tokens name the user when any were issued (401 without
//! a valid one: `tokenrequest` has their lifetimes and the TokenRequest
//! API); every request is recorded with its RBAC attributes and, given a
//! policy, its verdict (refused 403 when enforcing).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey};

use crate::admission::{SYSTEM_NAMESPACES, Write, admit, unconditional_update};
use crate::crds::Crds;
use crate::creations::Creations;
use crate::fieldsel::FieldSelector;
use crate::identity::{Tokens, bearer, kubeconfig};
use crate::objects::{InStore, bad_request};
use crate::rbac::Policy;
use crate::request::{attributes, parse_query};
pub use crate::request_log::Recorded;
use crate::request_log::RequestLog;
use crate::resources::{Served, find};
use crate::route::{Route, forbidden, no_such_resource};
use crate::table::{table, wants_table};
use crate::watch::{Pace, Shape, watch};
use crate::wire::{item_wire, json_response, status, to_wire};
use crate::writes::{self, Ctx};
use tartan_api::label_selector::LabelSelector;

#[derive(Clone)]
pub struct ApiServer {
    pub store: MemoryStore,
    /// Every request seen (in memory, or streamed to a file).
    pub requests: RequestLog,
    /// Bookmark interval for watches that ask for bookmarks.
    pub bookmark_every: Duration,
    /// Watches end after this long (the API server's timeoutSeconds cap).
    pub watch_cap: Duration,
    pub tokens: Tokens,
    /// RBAC that judges each request.
    pub policy: Option<Arc<Policy>>,
    /// Refuse (403) what the policy does not allow.
    pub enforce: bool,
    /// The user of requests that carry no token (the old insecure port's
    /// rule): kubectl sends no token to a plain-HTTP server. `None`: such
    /// requests are refused 401 once tokens are in use.
    pub insecure_user: Option<String>,
    /// CustomResourceDefinitions, kept as objects.
    pub crds: Crds,
    /// Creation versions of the objects created here.
    pub creations: Creations,
}

pub struct Running {
    pub url: String,
    pub server: ApiServer,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    /// A client without a token.
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("server url"));
        kube::Client::try_from(config).expect("kube client")
    }

    /// A kubeconfig for `user` with a token issued now to `client`.
    pub fn kubeconfig_for(&self, user: &str, client: &str) -> String {
        let token = self.server.tokens.issue(user, client);
        kubeconfig(&self.url, user, &token)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests.requests()
    }
}

impl Default for ApiServer {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiServer {
    pub fn new() -> Self {
        ApiServer {
            store: MemoryStore::new(),
            requests: Default::default(),
            bookmark_every: Duration::from_millis(200),
            watch_cap: Duration::from_secs(300),
            tokens: Tokens::default(),
            policy: None,
            enforce: false,
            insecure_user: None,
            crds: Crds::default(),
            creations: Creations::default(),
        }
    }

    /// Store the Namespaces a cluster has from its start
    /// ([`SYSTEM_NAMESPACES`]), as the API server makes them (the
    /// `tartan-apiserver` program does; without them creates into these
    /// namespaces are served all the same).
    pub fn with_system_namespaces(self) -> Self {
        let now = crate::clock::rfc3339(crate::clock::now());
        for ns in SYSTEM_NAMESPACES {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "creationTimestamp": now,
                             "labels": {"kubernetes.io/metadata.name": ns}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            let Ok(obj) = serde_json::from_value::<DynamicObject>(obj) else {
                continue;
            };
            // The memory store's writes never wait.
            match futures::executor::block_on(self.store.create(obj)) {
                Ok(o) => {
                    if let (Some(uid), Some(rv)) = (&o.metadata.uid, &o.metadata.resource_version) {
                        self.creations.created(uid, rv);
                    }
                }
                Err(e) => tracing::warn!(namespace = ns, error = %e, "system namespace not stored"),
            }
        }
        self
    }

    /// Serve requests without a token as `user` (kubectl over plain HTTP).
    pub fn with_insecure_user(mut self, user: &str) -> Self {
        self.insecure_user = Some(user.to_string());
        self
    }

    /// Judge every request by `policy`; with `enforce`, refuse what it
    /// does not allow.
    pub fn with_policy(mut self, policy: Policy, enforce: bool) -> Self {
        self.policy = Some(Arc::new(policy));
        self.enforce = enforce;
        self
    }

    /// Serve on a new port of 127.0.0.1.
    pub async fn start(self) -> std::io::Result<Running> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        self.start_on(listener).await
    }

    /// Serve on `listener` (bound by the caller, for example inside a
    /// network namespace).
    pub async fn start_on(self, listener: std::net::TcpListener) -> std::io::Result<Running> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let url = format!("http://{}", listener.local_addr()?);
        let server = self.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let server = server.clone();
                async move { server.handle(method, uri, headers, body).await }
            },
        );
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "the API server stand-in stopped");
            }
        });
        Ok(Running {
            url,
            server: self,
            task,
        })
    }

    fn record(&self, r: Recorded) {
        self.requests.push(r);
    }

    async fn handle(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let query = parse_query(uri.query());
        let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let attrs = attributes(method.as_str(), uri.path(), &query);
        let token = bearer(
            headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok()),
        );
        let holder = match token {
            Some(t) => self.authenticate(t).await,
            None => None,
        };
        let user = match (&holder, token) {
            (Some(h), _) => Some(h.user.clone()),
            (None, None) => self.insecure_user.clone(),
            (None, Some(_)) => None,
        };
        let allowed = self
            .policy
            .as_ref()
            .map(|p| user.as_deref().is_some_and(|u| p.allows(u, &attrs)));
        self.record(Recorded {
            method: method.clone(),
            path: uri.path().to_string(),
            query: query.clone(),
            body: body_json.clone(),
            user: user.clone(),
            client: holder.map(|h| h.client),
            attributes: attrs.clone(),
            allowed,
        });
        if self.tokens.required() && user.is_none() {
            return status(401, "Unauthorized", "Unauthorized", None);
        }
        if self.enforce && allowed == Some(false) {
            let who = user.as_deref().unwrap_or("system:anonymous");
            return forbidden(who, &attrs.verb, attrs.resource.as_ref(), &attrs.path);
        }
        if let Some(r) = crate::request::token_request_target(&attrs) {
            return self.token_request(&attrs.verb, r, body_json).await;
        }
        let header = |h: axum::http::HeaderName| {
            headers
                .get(h)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string()
        };
        let accept = header(axum::http::header::ACCEPT);
        let options = if method == Method::DELETE {
            &body_json
        } else {
            &Value::Null
        };
        let dry_run = match writes::dry_run(&query, options) {
            Ok(d) => d,
            Err(resp) => return resp,
        };
        let ctx = Ctx {
            query: &query,
            user_agent: &header(axum::http::header::USER_AGENT),
            now: crate::clock::now(),
            dry_run,
        };
        let Some(r) = attrs.resource.as_ref() else {
            let host = header(axum::http::header::HOST);
            return match crate::discovery::document(uri.path(), &host) {
                Some(doc) if method == Method::GET => json_response(200, &doc),
                _ => no_such_resource(),
            };
        };
        let Some(served) = find(&r.group, &r.version, &r.resource) else {
            return no_such_resource();
        };
        let shape = match self.shape(&served, &query, &accept) {
            Ok(s) => s,
            Err(resp) => return resp,
        };
        let Some(route) = Route::of(r) else {
            let content_type = header(axum::http::header::CONTENT_TYPE);
            return crate::crd_routes::serve(
                &self.crds,
                &attrs,
                &body,
                &content_type,
                &ctx,
                &shape,
                self.watch_cap,
            )
            .await;
        };
        let objects = InStore {
            store: &self.store,
            route: &route,
            served: served.clone(),
            creations: &self.creations,
        };
        match (attrs.verb.as_str(), route.subresource.as_deref()) {
            (_, Some(s)) if s != "status" => no_such_resource(),
            ("get", _) if route.name.is_some() => self.get(&route, &shape).await,
            ("list", None) => self.list(&route, &query, &shape).await,
            ("watch", None) => {
                let pace = Pace {
                    bookmark_every: self.bookmark_every,
                    cap: self.watch_cap,
                };
                watch(&self.store, pace, &route, &query, shape).await
            }
            ("create", None) => writes::create(&objects, body_json, &ctx).await,
            ("update", None) if route.name.is_some() => {
                let name = route.name.as_deref().unwrap_or_default();
                writes::replace(&objects, name, body_json, &ctx).await
            }
            ("update", Some(_)) if route.name.is_some() => {
                self.replace_status(&route, &served, body_json).await
            }
            ("patch", None) if route.name.is_some() => {
                let name = route.name.as_deref().unwrap_or_default();
                let content_type = header(axum::http::header::CONTENT_TYPE);
                crate::patch_request::patch(&objects, name, &content_type, &body, &ctx).await
            }
            // A dry-run delete answers what it would delete.
            ("delete", None) if dry_run => self.get(&route, &Shape::default()).await,
            ("delete", None) => self.delete(&route, body_json).await,
            _ => status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                None,
            ),
        }
    }

    /// How objects go out: the field selector they must match, and
    /// whether as a Table (asked for in `accept`).
    fn shape(
        &self,
        served: &Served,
        query: &HashMap<String, String>,
        accept: &str,
    ) -> Result<Shape, Response> {
        let fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
            .map_err(|m| bad_request(&m))?;
        let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|m| bad_request(&m))?;
        let whole = query.get("includeObject").is_some_and(|i| i == "Object");
        Ok(Shape {
            fields,
            labels,
            table: wants_table(accept).then(|| (served.clone(), whole)),
            creations: self.creations.clone(),
        })
    }

    async fn get(&self, route: &Route, shape: &Shape) -> Response {
        let name = route.name.as_deref().unwrap_or_default();
        match self.store.get(&route.key(name)).await {
            Ok(o) => match &shape.table {
                Some((served, whole)) => {
                    let rv = o.metadata.resource_version.clone().unwrap_or_default();
                    json_response(
                        200,
                        &table(served, &[to_wire(&o)], &rv, crate::clock::now(), *whole),
                    )
                }
                None => json_response(200, &to_wire(&o)),
            },
            Err(e) => route.error(name, e),
        }
    }

    async fn list(
        &self,
        route: &Route,
        query: &HashMap<String, String>,
        shape: &Shape,
    ) -> Response {
        let listing = match self
            .store
            .list(route.kind, route.namespace.as_deref())
            .await
        {
            Ok(l) => l,
            Err(e) => return route.error("", e),
        };
        // A continue token is "<offset>/<revision>"; pages after the first
        // are served from the first page's revision, as the API server does.
        let (offset, revision) = match query.get("continue") {
            Some(t) => {
                let (o, r) = t.split_once('/').unwrap_or(("0", "0"));
                (o.parse::<usize>().unwrap_or(0), r.to_string())
            }
            None => (0, listing.revision.clone()),
        };
        let limit = query
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let mut items = listing.items;
        items.retain(|o| shape.labels.matches_labels(o.metadata.labels.as_ref()));
        items.retain(|o| shape.fields.matches(&to_wire(o)));
        items.sort_by_cached_key(|o| ObjectKey::of(o).ok());
        let page: Vec<Value> = items
            .iter()
            .skip(offset)
            .take(limit)
            .map(|o| item_wire(route.kind, o))
            .collect();
        let mut metadata = json!({"resourceVersion": revision});
        if offset.saturating_add(page.len()) < items.len() {
            metadata["continue"] = format!("{}/{}", offset + page.len(), revision).into();
            metadata["remainingItemCount"] = (items.len() - offset - page.len()).into();
        }
        if let Some((served, whole)) = &shape.table {
            let objects: Vec<Value> = items.iter().skip(offset).take(limit).map(to_wire).collect();
            let mut t = table(served, &objects, &revision, crate::clock::now(), *whole);
            t["metadata"] = metadata;
            return json_response(200, &t);
        }
        let info = route.kind.info();
        json_response(
            200,
            &json!({
                "kind": format!("{}List", info.name),
                "apiVersion": route.kind.api_version(),
                "metadata": metadata,
                "items": page,
            }),
        )
    }

    /// PUT of an object's `status` subresource: defaults and checks as
    /// for any write of a built-in kind; without a resourceVersion, the
    /// stored version replaced when the kind allows that.
    async fn replace_status(&self, route: &Route, served: &Served, mut body: Value) -> Response {
        let name = route.name.as_deref().unwrap_or_default();
        let rv = body
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        if rv.is_none_or(str::is_empty) {
            if !unconditional_update(served) {
                return status(
                    422,
                    "Invalid",
                    &format!(
                        "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                        route.resource()
                    ),
                    Some(route.details(name)),
                );
            }
            let stored = match self.store.get(&route.key(name)).await {
                Ok(o) => o.metadata.resource_version,
                Err(e) => return route.error(name, e),
            };
            if let Some(m) = body.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert("resourceVersion".into(), stored.into());
            }
        }
        if let Err(r) = admit(served, &mut body, Write::Status) {
            return r;
        }
        let obj: DynamicObject = match serde_json::from_value(body) {
            Ok(o) => o,
            Err(e) => return status(400, "BadRequest", &e.to_string(), None),
        };
        match self.store.update_status(obj).await {
            Ok(o) => json_response(200, &to_wire(&o)),
            Err(e) => route.error(name, e),
        }
    }

    async fn delete(&self, route: &Route, body: Value) -> Response {
        let name = route.name.as_deref().unwrap_or_default();
        let key = route.key(name);
        let precondition = body
            .pointer("/preconditions/resourceVersion")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let current = match self.store.get(&key).await {
            Ok(o) => o,
            Err(e) => return route.error(name, e),
        };
        if let Some(rv) = &precondition
            && current.metadata.resource_version.as_deref() != Some(rv)
        {
            return status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    route.resource(),
                    current.metadata.resource_version.unwrap_or_default()
                ),
                Some(route.details(name)),
            );
        }
        match self.store.delete(&key, precondition.as_deref()).await {
            Ok(()) => {
                if let Some(uid) = &current.metadata.uid {
                    self.creations.deleted(uid);
                }
                json_response(200, &to_wire(&current))
            }
            Err(e) => route.error(name, e),
        }
    }
}

impl ApiServer {
    /// Stream every request to `path` instead of keeping it in memory.
    pub fn with_request_file(mut self, path: &std::path::Path) -> std::io::Result<Self> {
        self.requests = RequestLog::to_file(path)?;
        Ok(self)
    }
}
