//! A stand-in for the Kubernetes API server, for testing the Kubernetes
//! backend where no real one can run. It answers the REST calls the backend
//! makes in the API server's shapes and words: lists with `resourceVersion`
//! and `continue`, watch streams of newline-separated JSON events with
//! BOOKMARKs and the `ERROR` event carrying `410 Expired`, and `Status`
//! bodies for 404, 409 AlreadyExists, 409 Conflict and failed delete
//! preconditions (messages as the API server words them). Its objects live
//! in a [`MemoryStore`], whose revisions and compaction behave like the
//! etcd behind a real API server. Every request is recorded.
//!
//! A second mode, [`Replay`], serves recorded responses verbatim for exact
//! byte-level checks.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey, RawEvent, StoreError, WatchScope};

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub query: HashMap<String, String>,
    pub body: Value,
}

#[derive(Clone)]
pub struct FakeApiServer {
    pub store: MemoryStore,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    /// Bookmark interval for watches that ask for bookmarks.
    pub bookmark_every: Duration,
    /// Watches end after this long (the API server's timeoutSeconds cap).
    pub watch_cap: Duration,
}

pub struct Running {
    pub url: String,
    pub server: FakeApiServer,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Running {
    pub fn client(&self) -> kube::Client {
        let config = kube::Config::new(self.url.parse().expect("server url"));
        kube::Client::try_from(config).expect("kube client")
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests.lock().unwrap().clone()
    }
}

impl FakeApiServer {
    pub fn new() -> Self {
        FakeApiServer {
            store: MemoryStore::new(),
            requests: Default::default(),
            bookmark_every: Duration::from_millis(200),
            watch_cap: Duration::from_secs(300),
        }
    }

    pub async fn start(self) -> Running {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = self.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let server = server.clone();
            async move { server.handle(method, uri, body).await }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Running {
            url,
            server: self,
            task,
        }
    }

    async fn handle(&self, method: Method, uri: Uri, body: Bytes) -> Response {
        let query: HashMap<String, String> = uri
            .query()
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.to_string(), decode(v))
            })
            .collect();
        let body_json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        self.requests.lock().unwrap().push(Recorded {
            method: method.clone(),
            path: uri.path().to_string(),
            query: query.clone(),
            body: body_json.clone(),
        });
        let Some(route) = Route::parse(uri.path()) else {
            return status(
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            );
        };
        match (method, route.name.as_deref()) {
            (Method::GET, Some(name)) => self.get(&route, name).await,
            (Method::GET, None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
                self.watch(&route, &query).await
            }
            (Method::GET, None) => self.list(&route, &query).await,
            (Method::POST, None) => self.create(&route, body_json).await,
            (Method::PUT, Some(name)) => self.replace(&route, name, body_json).await,
            (Method::DELETE, Some(name)) => self.delete(&route, name, body_json).await,
            _ => status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
                None,
            ),
        }
    }

    async fn get(&self, route: &Route, name: &str) -> Response {
        let key = route.key(name);
        match self.store.get(&key).await {
            Ok(o) => json_response(200, &to_wire(&o)),
            Err(e) => self.error(route, name, e),
        }
    }

    async fn list(&self, route: &Route, query: &HashMap<String, String>) -> Response {
        let listing = match self
            .store
            .list(route.kind, route.namespace.as_deref())
            .await
        {
            Ok(l) => l,
            Err(e) => return self.error(route, "", e),
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
            .unwrap_or(usize::MAX);
        let mut items = listing.items;
        // Equality label selectors (`k=v,k2=v2`), as the API server reads
        // them.
        if let Some(sel) = query.get("labelSelector").filter(|s| !s.is_empty()) {
            let wanted: Vec<(&str, &str)> = sel
                .split(',')
                .map(|p| p.split_once('=').unwrap_or((p, "")))
                .collect();
            items.retain(|o| {
                wanted.iter().all(|(k, v)| {
                    o.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(*k))
                        .is_some_and(|have| have == v)
                })
            });
        }
        items.sort_by(|a, b| ObjectKey::of(a).unwrap().cmp(&ObjectKey::of(b).unwrap()));
        let page: Vec<Value> = items
            .iter()
            .skip(offset)
            .take(limit)
            .map(|o| item_wire(route.kind, o))
            .collect();
        let mut metadata = json!({"resourceVersion": revision});
        if offset + page.len() < items.len() {
            metadata["continue"] = format!("{}/{}", offset + page.len(), revision).into();
            metadata["remainingItemCount"] = (items.len() - offset - page.len()).into();
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

    async fn watch(&self, route: &Route, query: &HashMap<String, String>) -> Response {
        let from = query
            .get("resourceVersion")
            .cloned()
            .unwrap_or_else(|| self.store.revision().to_string());
        let bookmarks = query
            .get("allowWatchBookmarks")
            .is_some_and(|b| b == "true");
        let scope = WatchScope {
            kind: route.kind,
            namespace: route.namespace.clone(),
        };
        let kind = route.kind;
        let raw = self.store.watch_raw(&scope, &from).await;
        let every = self.bookmark_every;
        let cap = self.watch_cap;
        let lines: futures::stream::BoxStream<'static, Value> = match raw {
            Err(StoreError::Expired(_)) => {
                // The API server answers 200 and then says it in-band.
                let current = self.store.revision();
                futures::stream::iter([json!({"type": "ERROR", "object": status_body(
                    410, "Expired", &format!("too old resource version: {from} ({current})"), None)})])
                .boxed()
            }
            Err(e) => return self.error(route, "", e),
            Ok(raw) => {
                let mut last = from.clone();
                let events = raw.map(Some).chain(futures::stream::iter([None]));
                let ticks = futures::stream::unfold((), move |()| async move {
                    tokio::time::sleep(every).await;
                    Some(((), ()))
                });
                let merged = futures::stream::select(events.map(Ev::Raw), ticks.map(|_| Ev::Tick));
                merged
                    .take_until(tokio::time::sleep(cap))
                    .scan(false, move |ended, ev| {
                        if *ended {
                            return futures::future::ready(None);
                        }
                        let out = match ev {
                            Ev::Raw(Some(Ok(RawEvent::Put(o)))) => {
                                last = o.metadata.resource_version.clone().unwrap_or_default();
                                // The first version of an object is an ADDED.
                                let t = if is_first(&o) { "ADDED" } else { "MODIFIED" };
                                Some(json!({"type": t, "object": to_wire(&o)}))
                            }
                            Ev::Raw(Some(Ok(RawEvent::Deleted(o)))) => {
                                last = o.metadata.resource_version.clone().unwrap_or_default();
                                Some(json!({"type": "DELETED", "object": to_wire(&o)}))
                            }
                            Ev::Raw(Some(Ok(RawEvent::Progress(rv)))) => {
                                last = rv;
                                None
                            }
                            Ev::Raw(Some(Err(StoreError::Expired(_)))) => {
                                *ended = true;
                                Some(json!({"type": "ERROR", "object": status_body(410, "Expired", "too old resource version", None)}))
                            }
                            Ev::Raw(Some(Err(_))) | Ev::Raw(None) => {
                                *ended = true;
                                None
                            }
                            Ev::Tick if bookmarks => Some(json!({"type": "BOOKMARK", "object": {
                                "kind": kind.info().name, "apiVersion": kind.api_version(),
                                "metadata": {"resourceVersion": last.clone()}
                            }})),
                            Ev::Tick => None,
                        };
                        futures::future::ready(Some(out))
                    })
                    .filter_map(futures::future::ready)
                    .boxed()
            }
        };
        let body = lines.map(|v| {
            let mut line = serde_json::to_vec(&v).unwrap();
            line.push(b'\n');
            Ok::<_, Infallible>(Bytes::from(line))
        });
        Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(Body::from_stream(body))
            .unwrap()
    }

    async fn create(&self, route: &Route, body: Value) -> Response {
        let obj: DynamicObject = match serde_json::from_value(body) {
            Ok(o) => o,
            Err(e) => return status(400, "BadRequest", &e.to_string(), None),
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        match self.store.create(obj).await {
            Ok(o) => json_response(201, &to_wire(&o)),
            Err(e) => self.error(route, &name, e),
        }
    }

    async fn replace(&self, route: &Route, name: &str, body: Value) -> Response {
        let obj: DynamicObject = match serde_json::from_value(body) {
            Ok(o) => o,
            Err(e) => return status(400, "BadRequest", &e.to_string(), None),
        };
        if obj
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
            .is_empty()
        {
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
        match self.store.update(obj).await {
            Ok(o) => json_response(200, &to_wire(&o)),
            Err(e) => self.error(route, name, e),
        }
    }

    async fn delete(&self, route: &Route, name: &str, body: Value) -> Response {
        let key = route.key(name);
        let precondition = body
            .pointer("/preconditions/resourceVersion")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let current = match self.store.get(&key).await {
            Ok(o) => o,
            Err(e) => return self.error(route, name, e),
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
            Ok(()) => json_response(200, &to_wire(&current)),
            Err(e) => self.error(route, name, e),
        }
    }

    fn error(&self, route: &Route, name: &str, e: StoreError) -> Response {
        let r = route.resource();
        match e {
            StoreError::NotFound(_) => status(
                404,
                "NotFound",
                &format!("{r} \"{name}\" not found"),
                Some(route.details(name)),
            ),
            StoreError::AlreadyExists(_) => status(
                409,
                "AlreadyExists",
                &format!("{r} \"{name}\" already exists"),
                Some(route.details(name)),
            ),
            StoreError::Conflict { .. } => status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {r} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                ),
                Some(route.details(name)),
            ),
            StoreError::Expired(_) => status(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                None,
            ),
            StoreError::Unavailable(m) => status(503, "ServiceUnavailable", &m, None),
            other => status(500, "InternalError", &other.to_string(), None),
        }
    }
}

// Short-lived, one at a time: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Ev {
    Raw(Option<tartan_api::store::Result<RawEvent>>),
    Tick,
}

/// Objects the tests have not updated yet (no revision label) go out as
/// ADDED, others as MODIFIED; the backend maps both alike.
fn is_first(o: &DynamicObject) -> bool {
    o.metadata
        .labels
        .as_ref()
        .is_none_or(|l| !l.contains_key("tartan.dev/revision"))
}

/// Parsed `/api/v1/...` or `/apis/GROUP/VERSION/...` path.
pub struct Route {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Route {
    fn parse(path: &str) -> Option<Route> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segs.as_slice() {
            ["api", v, rest @ ..] => ("", *v, rest),
            ["apis", g, v, rest @ ..] => (*g, *v, rest),
            _ => return None,
        };
        let (namespace, plural, name) = match rest {
            ["namespaces", ns, plural] => (Some(ns.to_string()), *plural, None),
            ["namespaces", ns, plural, name] => {
                (Some(ns.to_string()), *plural, Some(name.to_string()))
            }
            [plural] => (None, *plural, None),
            [plural, name] => (None, *plural, Some(name.to_string())),
            _ => return None,
        };
        let kind = Kind::all().find(|k| {
            let i = k.info();
            i.group == group && i.version == version && i.plural == plural
        })?;
        Some(Route {
            kind,
            namespace,
            name,
        })
    }

    fn key(&self, name: &str) -> ObjectKey {
        ObjectKey::new(self.kind, self.namespace.as_deref(), name)
    }

    /// `ippools.tartan.dev` or `pods`, as API server messages name it.
    fn resource(&self) -> String {
        let i = self.kind.info();
        if i.group.is_empty() {
            i.plural.to_string()
        } else {
            format!("{}.{}", i.plural, i.group)
        }
    }

    fn details(&self, name: &str) -> Value {
        let i = self.kind.info();
        json!({"name": name, "group": i.group, "kind": i.plural})
    }
}

fn decode(v: &str) -> String {
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                if let Ok(x) = u8::from_str_radix(hex, 16) {
                    out.push(x);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn to_wire(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap()
}

/// List items of built-in kinds come without apiVersion and kind, as the
/// API server sends them; custom resources carry theirs.
fn item_wire(kind: Kind, o: &DynamicObject) -> Value {
    let mut v = to_wire(o);
    if kind.info().group.is_empty()
        && let Some(m) = v.as_object_mut()
    {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}

pub fn status_body(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut v = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    json_response(code, &status_body(code, reason, message, details))
}

fn json_response(code: u16, v: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(v).unwrap()))
        .unwrap()
}

/// Serves recorded responses verbatim: each request whose method and path
/// (with query) starts with a rule's prefix gets that rule's status and
/// body chunks, the chunks sent with a pause between them.
#[derive(Clone, Default)]
pub struct Replay {
    pub rules: Vec<(Method, String, u16, Vec<String>)>,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Replay {
    pub fn on(mut self, method: Method, path_prefix: &str, code: u16, chunks: &[&str]) -> Self {
        self.rules.push((
            method,
            path_prefix.to_string(),
            code,
            chunks.iter().map(|c| c.to_string()).collect(),
        ));
        self
    }

    pub async fn start(
        self,
    ) -> (
        String,
        Arc<Mutex<Vec<Recorded>>>,
        tokio::task::JoinHandle<()>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = self.requests.clone();
        let rules = Arc::new(self.rules);
        let rec = requests.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let rules = rules.clone();
            let rec = rec.clone();
            async move {
                let full = uri
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_default();
                rec.lock().unwrap().push(Recorded {
                    method: method.clone(),
                    path: full.clone(),
                    query: HashMap::new(),
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                let Some((_, _, code, chunks)) = rules
                    .iter()
                    .find(|(m, p, _, _)| *m == method && full.starts_with(p.as_str()))
                else {
                    return status(
                        404,
                        "NotFound",
                        &format!("no recorded answer for {method} {full}"),
                        None,
                    );
                };
                let chunks = chunks.clone();
                let body = futures::stream::iter(chunks).then(|c| async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, Infallible>(Bytes::from(c))
                });
                Response::builder()
                    .status(*code)
                    .header("content-type", "application/json")
                    .body(Body::from_stream(body))
                    .unwrap()
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, requests, task)
    }
}
