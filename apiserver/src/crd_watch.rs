//! Watches of CustomResourceDefinitions (`kubectl get crds -w`, `kubectl
//! wait --for=condition=Established`): from a resourceVersion, the kept
//! changes after it and then each new one; without one (or `0`), every
//! CRD as ADDED first; `410 Expired` in-band when the version is older
//! than what is kept; the stream ends after the server's cap.

use std::collections::VecDeque;
use std::time::Duration;

use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::crds::{Crds, Since};
use crate::watch::Shape;
use crate::wire::status_body;

struct Follow {
    crds: Crds,
    wake: tokio::sync::watch::Receiver<u64>,
    last: u64,
    pending: VecDeque<Value>,
    ended: bool,
}

fn event(kind: &str, obj: &Value, shape: &Shape) -> Option<Value> {
    shape
        .render_value(obj)
        .map(|o| json!({"type": kind, "object": o}))
}

/// The watch stream of `crds` from `from` (a resourceVersion, if any).
pub fn watch(crds: &Crds, from: Option<&str>, shape: Shape, cap: Duration) -> Response {
    let wake = crds.subscribe();
    let mut pending = VecDeque::new();
    let last = match from.filter(|f| !f.is_empty() && *f != "0") {
        Some(f) => match f.parse::<u64>() {
            Ok(rv) => rv,
            Err(_) => {
                return crate::objects::bad_request(&format!(
                    "resourceVersion: Invalid value: \"{f}\": must be a number"
                ));
            }
        },
        None => {
            let (items, rv) = crds.list();
            pending.extend(items.iter().filter_map(|o| event("ADDED", o, &shape)));
            rv.parse().unwrap_or(0)
        }
    };
    let state = Follow {
        crds: crds.clone(),
        wake,
        last,
        pending,
        ended: false,
    };
    let lines = futures::stream::unfold(state, move |mut st| {
        let shape = shape.clone();
        async move {
            loop {
                if let Some(v) = st.pending.pop_front() {
                    return Some((v, st));
                }
                if st.ended {
                    return None;
                }
                match st.crds.since(st.last) {
                    Since::Expired(oldest) => {
                        st.ended = true;
                        let msg = format!("too old resource version: {} ({oldest})", st.last);
                        let e = json!({"type": "ERROR", "object": status_body(410, "Expired", &msg, None)});
                        st.pending.push_back(e);
                    }
                    Since::Changes(changes) if !changes.is_empty() => {
                        for (rev, kind, obj) in changes {
                            st.last = rev;
                            st.pending.extend(event(kind, &obj, &shape));
                        }
                    }
                    Since::Changes(_) => {
                        if st.wake.changed().await.is_err() {
                            return None;
                        }
                    }
                }
            }
        }
    })
    .take_until(tokio::time::sleep(cap));
    crate::watch::ndjson(lines)
}
