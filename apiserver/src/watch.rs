//! Watch streams as the API server sends them: newline-separated JSON
//! events from the requested revision, BOOKMARKs when asked for, the
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
/// pick (an object that stops matching is not sent as DELETED), as
/// JSON or as one-row Tables (kubectl's `get -w`).
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
    fn render(&self, o: &DynamicObject) -> Option<Value> {
        self.render_value(&to_wire(o))
    }

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

/// The watch `route` and `query` ask for, over `store`.
pub async fn watch(
    store: &MemoryStore,
    pace: Pace,
    route: &Route,
    query: &HashMap<String, String>,
    shape: Shape,
) -> Response {
    let from = query
        .get("resourceVersion")
        .cloned()
        .unwrap_or_else(|| store.revision().to_string());
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let scope = WatchScope {
        kind: route.kind,
        namespace: route.namespace.clone(),
        metadata_only: false,
    };
    let kind = route.kind;
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
            merged
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
                            let t = if added { "ADDED" } else { "MODIFIED" };
                            shape.render(&o).map(|v| json!({"type": t, "object": v}))
                        }
                        Ev::Raw(Some(Ok(RawEvent::Deleted(o)))) => {
                            last = o.metadata.resource_version.clone().unwrap_or_default();
                            shape.render(&o).map(|v| json!({"type": "DELETED", "object": v}))
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
