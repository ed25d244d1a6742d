//! Where a watch starts and what a selector watch sends, as the API server
//! does: no `resourceVersion` (or "0") begins with the current objects as
//! ADDED; `sendInitialEvents=true` (a streaming list) does too and ends
//! them with a BOOKMARK annotated `k8s.io/initial-events-end`; a version
//! begins after it; an object that stops matching a label selector goes
//! out as DELETED and one that starts matching as ADDED.

mod common;

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tartan_apiserver::{ApiServer, Running};

fn map(name: &str, app: &str) -> ConfigMap {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"app": app}}}))
    .unwrap()
}

/// A stand-in serving the ConfigMaps `name: app` in `default`.
async fn serving(maps: &[(&str, &str)]) -> (Running, Api<ConfigMap>) {
    let r = ApiServer::new().start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(r.client(), "default");
    for (n, app) in maps {
        api.create(&PostParams::default(), &map(n, app))
            .await
            .unwrap();
    }
    (r, api)
}

/// The event's type and object name (the BOOKMARK's: its annotation).
fn seen(e: &WatchEvent<ConfigMap>) -> (String, String) {
    match e {
        WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.clone().unwrap()),
        WatchEvent::Bookmark(b) => (
            "BOOKMARK".into(),
            b.metadata
                .annotations
                .get("k8s.io/initial-events-end")
                .cloned()
                .unwrap_or_default(),
        ),
        WatchEvent::Error(e) => ("ERROR".into(), e.message.clone()),
    }
}

async fn next<S>(stream: &mut S) -> (String, String)
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    let e = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event within 10 s")
        .expect("the watch goes on")
        .expect("a decodable event");
    seen(&e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_without_a_version_begins_with_the_current_objects() {
    let (_r, maps) = serving(&[("a", "web"), ("b", "db")]).await;
    for version in ["", "0"] {
        let mut w = maps
            .watch(&WatchParams::default(), version)
            .await
            .unwrap()
            .boxed();
        let mut first = vec![next(&mut w).await, next(&mut w).await];
        first.sort();
        assert_eq!(
            first,
            [("ADDED".into(), "a".into()), ("ADDED".into(), "b".into())],
            "resourceVersion {version:?}"
        );
        maps.create(
            &PostParams::default(),
            &map(&format!("c{}", version.len()), "web"),
        )
        .await
        .unwrap();
        assert_eq!(next(&mut w).await.0, "ADDED", "then the changes");
    }
    // From a listed version: only what changes after it.
    let rv = maps
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut w = maps
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    maps.create(&PostParams::default(), &map("d", "web"))
        .await
        .unwrap();
    assert_eq!(next(&mut w).await, ("ADDED".into(), "d".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_ends_its_initial_events_with_a_bookmark() {
    let (r, maps) = serving(&[("a", "web"), ("b", "db")]).await;
    let wp = WatchParams::streaming_lists().labels("app=web");
    let mut w = maps.watch(&wp, "").await.unwrap().boxed();
    assert_eq!(next(&mut w).await, ("ADDED".into(), "a".into()));
    assert_eq!(next(&mut w).await, ("BOOKMARK".into(), "true".into()));
    // Without bookmarks, or without NotOlderThan, it is refused, as the
    // API server refuses it.
    for query in [
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        "sendInitialEvents=true&allowWatchBookmarks=true",
        "sendInitialEvents=yes&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
    ] {
        let (code, out) = common::request(
            &r.url,
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?watch=true&{query}"),
            &[],
            "",
        )
        .await;
        assert_eq!(code, 422, "{query}: {out}");
        assert_eq!(common::body_json(&out)["reason"], "Invalid", "{out}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_stops_matching_goes_out_as_deleted_and_back_as_added() {
    let (_r, maps) = serving(&[("a", "web")]).await;
    let list = maps
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();
    let mut w = maps
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    let relabel = |app: &str| {
        let patch = json!({"metadata": {"labels": {"app": app}}});
        let maps = maps.clone();
        async move {
            maps.patch(
                "a",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
            .unwrap()
        }
    };
    let moved = relabel("db").await;
    let e = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match e {
        WatchEvent::Deleted(o) => {
            // The version it last matched in, at the change's version.
            assert_eq!(o.metadata.labels.unwrap()["app"], "web");
            assert_eq!(o.metadata.resource_version, moved.metadata.resource_version);
        }
        other => panic!("DELETED, not {other:?}"),
    }
    relabel("web").await;
    assert_eq!(next(&mut w).await, ("ADDED".into(), "a".into()));
    relabel("web2").await;
    assert_eq!(next(&mut w).await, ("DELETED".into(), "a".into()));
    // Not matching before nor after: nothing; the next one that matches is.
    relabel("db").await;
    maps.create(&PostParams::default(), &map("b", "web"))
        .await
        .unwrap();
    assert_eq!(next(&mut w).await, ("ADDED".into(), "b".into()));
}
