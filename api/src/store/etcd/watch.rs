//! etcd's watch as the raw event stream the generic watch layer resumes:
//! puts and deletes under one kind's (or one namespace's) prefix (or that
//! of their outlines, see [`super::outline`]), progress
//! notifications as [`RawEvent::Progress`], compaction as
//! [`StoreError::Expired`], and a broken connection as an error that ends
//! the stream.

use std::collections::VecDeque;

use etcd_client::{Client, EventType, WatchOptions, WatchResponse};
use futures::StreamExt;
use futures::stream::BoxStream;

use super::{Read, decode_or_placeholder, keys, map_err, parse_key, prefix_for};
use crate::kind::Kind;
use crate::store::{DynamicObject, RawEvent, Result, StoreError, WatchScope};

pub(super) async fn open(
    mut client: Client,
    scope: WatchScope,
    revision: &str,
    read: Read,
) -> Result<BoxStream<'static, Result<RawEvent>>> {
    let from: i64 = revision.parse().map_err(|_| {
        StoreError::BadObject(format!("etcd revision {revision:?} is not a number"))
    })?;
    let prefix = prefix_for(read, scope.kind, scope.namespace.as_deref());
    let opts = WatchOptions::new()
        .with_range(keys::range_end(&prefix))
        .with_start_revision(from + 1)
        // No previous values: etcd would send one with every put too (a
        // kubelet's heartbeat twice over), and a deletion is told by its
        // key alone (see `WatchEvent::Deleted`).
        .with_progress_notify();
    let stream = client.watch(prefix, Some(opts)).await.map_err(map_err)?;
    // The client is kept with the stream: a watch's own connection
    // ([`super::paced`]) lives as long as the watch, and no longer.
    let state = (
        (stream, client),
        VecDeque::<Result<RawEvent>>::new(),
        false,
        (scope.kind, read),
    );
    Ok(futures::stream::unfold(
        state,
        |((mut stream, client), mut ready, mut done, read)| async move {
            loop {
                if let Some(item) = ready.pop_front() {
                    return Some((item, ((stream, client), ready, done, read)));
                }
                if done {
                    return None;
                }
                match stream.message().await {
                    Ok(Some(resp)) => done = translate(read, &resp, &mut ready),
                    Ok(None) => {
                        ready.push_back(Err(StoreError::Unavailable(
                            "etcd closed the watch".into(),
                        )));
                        done = true;
                    }
                    Err(e) => {
                        ready.push_back(Err(map_err(e)));
                        done = true;
                    }
                }
            }
        },
    )
    .boxed())
}

/// Turn one watch response into events; true when the watch is over.
fn translate(
    (kind, read): (Kind, Read),
    resp: &WatchResponse,
    out: &mut VecDeque<Result<RawEvent>>,
) -> bool {
    if resp.canceled() {
        if resp.compact_revision() > 0 {
            out.push_back(Err(StoreError::Expired(
                resp.compact_revision().to_string(),
            )));
        } else {
            out.push_back(Err(StoreError::Unavailable(format!(
                "etcd cancelled the watch: {}",
                resp.cancel_reason()
            ))));
        }
        return true;
    }
    if resp.events().is_empty() {
        if !resp.created()
            && let Some(h) = resp.header()
        {
            out.push_back(Ok(RawEvent::Progress(h.revision().to_string())));
        }
        return false;
    }
    for ev in resp.events() {
        let Some(kv) = ev.kv() else { continue };
        match ev.event_type() {
            EventType::Put => {
                if let Some(o) = decode_or_placeholder(kind, kv, read) {
                    out.push_back(Ok(RawEvent::Put(o)));
                }
            }
            EventType::Delete => {
                let Some((namespace, name)) = parse_key(kind, kv.key(), read) else {
                    continue;
                };
                let mut obj = DynamicObject::new(&name, &kind.api_resource());
                obj.metadata.namespace = namespace;
                obj.metadata.resource_version = Some(kv.mod_revision().to_string());
                out.push_back(Ok(RawEvent::Deleted(obj)));
            }
        }
    }
    false
}
