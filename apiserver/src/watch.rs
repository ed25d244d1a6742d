//! Watch streams as the API server sends them: newline-separated JSON
//! events from the requested revision (or the current objects first, see
//! [`Start`]), BOOKMARKs when asked for, the
//! in-band `ERROR` event carrying `410 Expired` when the revision is
//! compacted away, and an end after the server's cap.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{Datastore, DynamicObject, RawEvent, StoreError, WatchScope};

use crate::creations::Creations;
use crate::fieldsel::FieldSelector;
use crate::resources::Served;
use crate::route::Route;
use crate::table::table;
use crate::wire::{status_body, to_wire};
use tartan_api::label_selector::LabelSelector;

/// How a watch's objects go out: only those the field and label selectors
/// pick (see [`Picked`] for objects that start or stop matching), as JSON
/// or as one-row Tables (kubectl's `get -w`).
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub fields: FieldSelector,
    pub labels: LabelSelector,
    /// The resource, and whether rows carry whole objects.
    pub table: Option<(Served, bool)>,
    /// Creation versions, to tell ADDED from MODIFIED.
    pub creations: Creations,
}

impl Shape {
    /// An object as this watch sends it, if its field selector picks it.
    pub fn render_value(&self, v: &Value) -> Option<Value> {
        if !self.fields.matches(v) || !self.labels.matches(v) {
            return None;
        }
        let rv = v
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(match &self.table {
            Some((served, whole)) => table(
                served,
                std::slice::from_ref(v),
                rv,
                crate::clock::now(),
                *whole,
            ),
            None => v.clone(),
        })
    }
}

// Short-lived, one at a time: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Ev {
    Raw(Option<tartan_api::store::Result<RawEvent>>),
    Tick,
}

/// For objects written into the store directly (their creation unknown):
/// those not updated since (no revision label) go out as ADDED, others as
/// MODIFIED; clients map both alike.
fn is_first(o: &DynamicObject) -> bool {
    o.metadata
        .labels
        .as_ref()
        .is_none_or(|l| !l.contains_key("tartan.dev/revision"))
}

/// How a watch is served: bookmarks every `bookmark_every` (when the
/// client asks for them), the stream closed after `cap`.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    pub bookmark_every: Duration,
    pub cap: Duration,
}

/// What a watch has sent of the objects its selectors pick: for each one
/// it last sent as picked, its last version, so that an object that stops
/// matching goes out as DELETED (its last picked version at the event's
/// resourceVersion) and one that starts matching as ADDED, as the API
/// server's watch cache does. Only kept when the watch has a selector.
struct Picked(Option<HashMap<String, Value>>);

fn object_key(v: &Value) -> String {
    let part = |f: &str| {
        v.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    format!("{}/{}", part("namespace"), part("name"))
}

fn with_version(mut v: Value, rv: &str) -> Value {
    if let Some(m) = v.pointer_mut("/metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    v
}

impl Picked {
    fn new(shape: &Shape) -> Picked {
        let selects =
            shape.fields != FieldSelector::default() || shape.labels != LabelSelector::default();
        Picked(selects.then(HashMap::new))
    }

    /// The event for a new version `o` (wire shape) at `rv`, given whether
    /// its creation makes it ADDED.
    fn put(&mut self, shape: &Shape, o: Value, rv: &str, created: bool) -> Option<Value> {
        let Some(picked) = &mut self.0 else {
            let t = if created { "ADDED" } else { "MODIFIED" };
            return shape
                .render_value(&o)
                .map(|v| json!({"type": t, "object": v}));
        };
        let key = object_key(&o);
        match shape.render_value(&o) {
            Some(v) => {
                let before = picked.insert(key, o);
                let t = if created || before.is_none() {
                    "ADDED"
                } else {
                    "MODIFIED"
                };
                Some(json!({"type": t, "object": v}))
            }
            None => {
                let before = picked.remove(&key)?;
                let v = shape.render_value(&with_version(before, rv))?;
                Some(json!({"type": "DELETED", "object": v}))
            }
        }
    }

    fn deleted(&mut self, shape: &Shape, o: Value) -> Option<Value> {
        if let Some(picked) = &mut self.0 {
            picked.remove(&object_key(&o));
        }
        shape
            .render_value(&o)
            .map(|v| json!({"type": "DELETED", "object": v}))
    }
}

/// Where a watch starts, as the API server reads `resourceVersion`: a
/// version given (other than "0") starts after it; none, or "0", starts
/// with the current objects sent as ADDED events, as does
/// `sendInitialEvents=true` (which then marks their end with a BOOKMARK
/// annotated `k8s.io/initial-events-end`); `sendInitialEvents=false`
/// without a version starts at the latest.
enum Start {
    After(String),
    Latest,
    Current { initial_end: bool },
}

fn start_of(query: &HashMap<String, String>) -> Result<Start, String> {
    let rv = query
        .get("resourceVersion")
        .map(String::as_str)
        .filter(|v| !v.is_empty());
    let send_initial = query.get("sendInitialEvents").map(String::as_str);
    match send_initial {
        None => {}
        Some("true") | Some("false") => {
            if query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
                return Err("sendInitialEvents: Forbidden: sendInitialEvents is allowed with resourceVersionMatch set to NotOlderThan".into());
            }
            if query.get("allowWatchBookmarks").map(String::as_str) != Some("true") {
                return Err("allowWatchBookmarks: Forbidden: allowWatchBookmarks must be set to true when sendInitialEvents is set".into());
            }
        }
        Some(other) => {
            return Err(format!(
                "sendInitialEvents: Invalid value: {other:?}: must be true or false"
            ));
        }
    }
    Ok(match (send_initial, rv) {
        (Some("true"), _) => Start::Current { initial_end: true },
        (Some(_), None | Some("0")) => Start::Latest,
        (None, None | Some("0")) => Start::Current { initial_end: false },
        (_, Some(v)) => Start::After(v.to_string()),
    })
}

/// The watch `route` and `query` ask for, over `store`.
pub async fn watch(
    store: &MemoryStore,
    pace: Pace,
    route: &Route,
    query: &HashMap<String, String>,
    shape: Shape,
) -> Response {
    let start = match start_of(query) {
        Ok(s) => s,
        Err(m) => return crate::wire::status(422, "Invalid", &m, None),
    };
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let scope = WatchScope {
        kind: route.kind,
        namespace: route.namespace.clone(),
        metadata_only: false,
    };
    let kind = route.kind;
    let mut picked = Picked::new(&shape);
    let mut initial = Vec::new();
    let listed = matches!(start, Start::Current { .. });
    let from = match start {
        Start::After(v) => v,
        Start::Latest => store.revision().to_string(),
        Start::Current { initial_end } => {
            let listing = match store.list(route.kind, route.namespace.as_deref()).await {
                Ok(l) => l,
                Err(e) => return route.error("", e),
            };
            for o in &listing.items {
                let rv = o.metadata.resource_version.clone().unwrap_or_default();
                initial.extend(picked.put(&shape, to_wire(o), &rv, true));
            }
            if initial_end {
                initial.push(json!({"type": "BOOKMARK", "object": {
                    "kind": kind.info().name, "apiVersion": kind.api_version(),
                    "metadata": {"resourceVersion": listing.revision.clone(),
                        "annotations": {"k8s.io/initial-events-end": "true"}}
                }}));
            }
            listing.revision
        }
    };
    if picked.0.is_some() && !listed {
        // Started after a version: what the selectors pick now stands for
        // what they picked then (exact when nothing changed in between, as
        // when a client watches from the version it has just listed; an
        // object that stopped matching in between is not sent as DELETED).
        if let Ok(listing) = store.list(route.kind, route.namespace.as_deref()).await {
            for o in &listing.items {
                picked.put(&shape, to_wire(o), "", false);
            }
        }
    }
    let raw = store.watch_raw(&scope, &from).await;
    let every = pace.bookmark_every;
    let cap = pace.cap;
    let lines: futures::stream::BoxStream<'static, Value> = match raw {
        Err(StoreError::Expired(_)) => {
            // The API server answers 200 and then says it in-band.
            let current = store.revision();
            futures::stream::iter([json!({"type": "ERROR", "object": status_body(
                410, "Expired", &format!("too old resource version: {from} ({current})"), None)})])
            .boxed()
        }
        Err(e) => return route.error("", e),
        Ok(raw) => {
            let mut last = from.clone();
            let events = raw.map(Some).chain(futures::stream::iter([None]));
            let ticks = futures::stream::unfold((), move |()| async move {
                tokio::time::sleep(every).await;
                Some(((), ()))
            });
            let merged = futures::stream::select(events.map(Ev::Raw), ticks.map(|_| Ev::Tick));
            let changes = merged
                .take_until(tokio::time::sleep(cap))
                .scan(false, move |ended, ev| {
                    if *ended {
                        return futures::future::ready(None);
                    }
                    let out = match ev {
                        Ev::Raw(Some(Ok(RawEvent::Put(o)))) => {
                            last = o.metadata.resource_version.clone().unwrap_or_default();
                            let uid = o.metadata.uid.as_deref().unwrap_or_default();
                            let added = shape
                                .creations
                                .is_creation(uid, &last)
                                .unwrap_or_else(|| is_first(&o));
                            picked.put(&shape, to_wire(&o), &last, added)
                        }
                        Ev::Raw(Some(Ok(RawEvent::Deleted(o)))) => {
                            last = o.metadata.resource_version.clone().unwrap_or_default();
                            picked.deleted(&shape, to_wire(&o))
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
                .filter_map(futures::future::ready);
            futures::stream::iter(initial).chain(changes).boxed()
        }
    };
    ndjson(lines)
}

/// A watch's response: each event a JSON line, as they come.
pub fn ndjson(lines: impl futures::Stream<Item = Value> + Send + 'static) -> Response {
    let body = lines.map(|v| {
        let mut line = serde_json::to_vec(&v).unwrap_or_default();
        line.push(b'\n');
        Ok::<_, Infallible>(Bytes::from(line))
    });
    let mut r = Response::new(Body::from_stream(body));
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod label_tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels}})
    }

    #[test]
    fn a_watch_sends_only_what_its_label_selector_picks() {
        let shape = Shape {
            labels: LabelSelector::parse("app in (web)").unwrap(),
            ..Default::default()
        };
        assert!(shape.render_value(&obj(json!({"app": "web"}))).is_some());
        assert!(shape.render_value(&obj(json!({"app": "db"}))).is_none());
    }
}
