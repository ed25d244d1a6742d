//! The Kubernetes backend against the API server stand-in
//! (`tartan-apiserver`): every kind round-trips with compare-and-swap, lists
//! page, watches follow bookmarks and recover from 410 Gone, and the
//! requests it sends are the ones the API server expects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use futures::StreamExt;
use tartan_api::examples::{example, modified};
use tartan_api::kind::Kind;
use tartan_api::store::conformance::{
    ViewChecker, narrow_listing, place, round_trip_every_kind, version,
};
use tartan_api::store::kube::KubeStore;
use tartan_api::store::watch::watch;
use tartan_api::store::{Datastore, ObjectKey, RawEvent, StoreError, WatchScope};
use tartan_apiserver::{ApiServer, Replay};

#[tokio::test]
async fn every_kind_round_trips_with_compare_and_swap() {
    let api = ApiServer::new().start().await.unwrap();
    let store = KubeStore::from_client(api.client());
    round_trip_every_kind(&store).await;

    // The requests were shaped as the API server wants them.
    let reqs = api.requests();
    let put = reqs.iter().find(|r| r.method == Method::PUT).unwrap();
    assert_eq!(put.path, "/apis/tartan.dev/v1/ippools/round-trip");
    assert!(
        put.body.pointer("/metadata/resourceVersion").is_some(),
        "PUT carries the version it replaces"
    );
    let del = reqs
        .iter()
        .find(|r| r.method == Method::DELETE && r.body.get("preconditions").is_some())
        .unwrap();
    assert!(del.body.pointer("/preconditions/resourceVersion").is_some());
    assert!(
        reqs.iter().any(|r| r.method == Method::POST
            && r.path == "/apis/tartan.dev/v1/namespaces/default/networkpolicies"),
        "namespaced kinds go to their namespace's path"
    );
    assert!(reqs.iter().any(|r| r.path == "/api/v1/nodes/round-trip"));
    assert!(
        reqs.iter()
            .any(|r| r.path == "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices")
    );
}

#[tokio::test]
async fn a_narrowed_listing_is_selected_by_label_on_the_server() {
    let api = ApiServer::new().start().await.unwrap();
    let store = KubeStore::from_client(api.client());
    narrow_listing(&store).await;
    let reqs = api.requests();
    let list = reqs
        .iter()
        .find(|r| r.method == Method::GET && r.path == "/apis/tartan.dev/v1/blockaffinities")
        .expect("a list of BlockAffinities");
    assert_eq!(
        list.query.get("labelSelector").map(String::as_str),
        Some("tartan.dev/node=narrow-a")
    );
}

#[tokio::test]
async fn lists_follow_continue_tokens_at_one_revision() {
    let api = ApiServer::new().start().await.unwrap();
    let store = KubeStore::from_client(api.client());
    for i in 0..1_234 {
        api.server
            .store
            .create(example(Kind::IpamHandle, &format!("h{i:04}")))
            .await
            .unwrap();
    }
    let l = store.list(Kind::IpamHandle, None).await.unwrap();
    assert_eq!(l.items.len(), 1_234);
    assert_eq!(l.revision, api.server.store.revision().to_string());
    let lists: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.path == "/apis/tartan.dev/v1/ipamhandles")
        .collect();
    assert_eq!(lists.len(), 3, "500 + 500 + 234");
    assert!(
        lists
            .iter()
            .all(|r| r.query.get("limit").map(String::as_str) == Some("500"))
    );
    assert!(!lists[0].query.contains_key("continue"));
    assert!(lists[1].query.contains_key("continue"));
}

/// Churn through the API server's watch, with compaction while the watch is
/// away (its request capped short, as API servers do): the watch resumes,
/// gets 410 in-band, relists, and its consumer's view equals the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_recovers_from_410_and_stays_exact() {
    let mut server = ApiServer::new();
    server.watch_cap = Duration::from_millis(300);
    let api = server.start().await.unwrap();
    let mem = api.server.store.clone();
    let store: Arc<dyn Datastore> = Arc::new(KubeStore::from_client(api.client()));
    let mut w = watch(
        store,
        WatchScope {
            kind: Kind::NetworkPolicy,
            namespace: None,
            metadata_only: false,
        },
    );

    let consumer = tokio::spawn(async move {
        let mut c = ViewChecker::default();
        loop {
            tokio::select! {
                e = w.next() => c.apply(e),
                _ = tokio::time::sleep(Duration::from_secs(3)) => break,
            }
        }
        (c.view, c.synced, w.lists())
    });

    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..2_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let name = format!("p{}", x % 100);
        let k = ObjectKey::new(Kind::NetworkPolicy, Some("default"), &name);
        match mem.get(&k).await {
            Err(_) => {
                mem.create(example(Kind::NetworkPolicy, &name))
                    .await
                    .unwrap();
            }
            Ok(o) if x.is_multiple_of(3) => mem
                .delete(&k, o.metadata.resource_version.as_deref())
                .await
                .unwrap(),
            Ok(o) => {
                mem.update(modified(&o, i)).await.unwrap();
            }
        }
        if i % 400 == 399 {
            mem.compact(mem.revision());
        }
        if i % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let (view, synced, lists) = consumer.await.unwrap();
    let want: BTreeMap<_, _> = mem
        .list(Kind::NetworkPolicy, None)
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (place(o), version(o)))
        .collect();
    assert_eq!(view, want);
    assert!(synced >= 1);
    let watches: Vec<_> = api
        .requests()
        .into_iter()
        .filter(|r| r.query.contains_key("watch"))
        .collect();
    assert!(watches.len() >= 2, "the capped watch was reopened");
    for w in &watches {
        assert_eq!(
            w.query.get("allowWatchBookmarks").map(String::as_str),
            Some("true")
        );
        assert!(
            w.query
                .get("resourceVersion")
                .is_some_and(|r| !r.is_empty()),
            "watch resumes from a revision"
        );
    }
    eprintln!("watch requests {}, lists {lists}", watches.len());
    assert!(
        lists >= 2,
        "compaction while the watch was away should have forced a relist"
    );
}

/// Recorded answers, byte for byte as an API server sends them: a watch
/// stream with ADDED, BOOKMARK, MODIFIED, DELETED and then the in-band 410.
#[tokio::test]
async fn recorded_watch_stream_maps_to_raw_events() {
    let pool = r#"{"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"creationTimestamp":"2026-11-20T10:00:00Z","generation":1,"name":"pool-a","resourceVersion":"1201","uid":"6f1c2f4e-1d7e-4a0c-9b1e-3d2f6b9e8a10"},"spec":{"blockSize":26,"cidr":"10.244.0.0/16"}}"#;
    let stream = [
        format!("{{\"type\":\"ADDED\",\"object\":{pool}}}\n"),
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"IPPool\",\"apiVersion\":\"tartan.dev/v1\",\"metadata\":{\"resourceVersion\":\"1250\",\"creationTimestamp\":null,\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}},\"spec\":null}}\n".to_string(),
        format!("{{\"type\":\"MODIFIED\",\"object\":{}}}\n", pool.replace("\"1201\"", "\"1260\"")),
        // One event split over two chunks, as HTTP may deliver it.
        format!("{{\"type\":\"DELETED\",\"object\":{}", pool.replace("\"1201\"", "\"1270\"")),
        "}\n".to_string(),
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1270 (1300)\",\"reason\":\"Expired\",\"code\":410}}\n".to_string(),
    ];
    let chunks: Vec<&str> = stream.iter().map(String::as_str).collect();
    let (url, requests, task) = Replay::default()
        .on(Method::GET, "/apis/tartan.dev/v1/ippools?", 200, &chunks)
        .start()
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let store = KubeStore::from_client(client);
    let mut raw = store
        .watch_raw(
            &WatchScope {
                kind: Kind::IpPool,
                namespace: None,
                metadata_only: false,
            },
            "1200",
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    while let Some(ev) = raw.next().await {
        let done = ev.is_err();
        got.push(match ev {
            Ok(RawEvent::Put(o)) => format!("put {}", o.metadata.resource_version.unwrap()),
            Ok(RawEvent::Deleted(o)) => format!("deleted {}", o.metadata.resource_version.unwrap()),
            Ok(RawEvent::Progress(r)) => format!("progress {r}"),
            Err(StoreError::Expired(m)) => format!("expired: {m}"),
            Err(e) => format!("error {e}"),
        });
        if done {
            break;
        }
    }
    assert_eq!(
        got,
        [
            "put 1201",
            "progress 1250",
            "put 1260",
            "deleted 1270",
            "expired: too old resource version: 1270 (1300)"
        ]
    );
    let req = requests.lock().unwrap()[0].path.clone();
    assert!(req.contains("watch=true"), "{req}");
    assert!(req.contains("resourceVersion=1200"), "{req}");
    assert!(req.contains("allowWatchBookmarks=true"), "{req}");
    task.abort();
}

/// Recorded error answers map to the store's errors.
#[tokio::test]
async fn recorded_errors_map_to_store_errors() {
    let conflict = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on ippools.tartan.dev \"pool-a\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"pool-a","group":"tartan.dev","kind":"ippools"},"code":409}"#;
    let exists = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.tartan.dev \"pool-a\" already exists","reason":"AlreadyExists","details":{"name":"pool-a","group":"tartan.dev","kind":"ippools"},"code":409}"#;
    let missing = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ippools.tartan.dev \"pool-b\" not found","reason":"NotFound","details":{"name":"pool-b","group":"tartan.dev","kind":"ippools"},"code":404}"#;
    let invalid = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"IPPool.tartan.dev \"pool-c\" is invalid: spec.blockSize: Invalid value: 40: spec.blockSize in body should be less than or equal to 32","reason":"Invalid","details":{"name":"pool-c","group":"tartan.dev","kind":"IPPool","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 40: spec.blockSize in body should be less than or equal to 32","field":"spec.blockSize"}]},"code":422}"#;
    let gone = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.","reason":"Expired","code":410}"#;
    let (url, _requests, task) = Replay::default()
        .on(
            Method::PUT,
            "/apis/tartan.dev/v1/ippools/pool-a",
            409,
            &[conflict],
        )
        .on(Method::POST, "/apis/tartan.dev/v1/ippools", 409, &[exists])
        .on(
            Method::GET,
            "/apis/tartan.dev/v1/ippools/pool-b",
            404,
            &[missing],
        )
        .on(
            Method::PUT,
            "/apis/tartan.dev/v1/ippools/pool-c",
            422,
            &[invalid],
        )
        .on(Method::GET, "/apis/tartan.dev/v1/ippools?", 410, &[gone])
        .start()
        .await
        .unwrap();
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let store = KubeStore::from_client(client);
    let mut a = example(Kind::IpPool, "pool-a");
    a.metadata.resource_version = Some("7".into());
    match store.update(a.clone()).await {
        Err(StoreError::Conflict { expected, .. }) => assert_eq!(expected, "7"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.create(a).await,
        Err(StoreError::AlreadyExists(_))
    ));
    assert!(matches!(
        store
            .get(&ObjectKey::new(Kind::IpPool, None, "pool-b"))
            .await,
        Err(StoreError::NotFound(_))
    ));
    let mut c = example(Kind::IpPool, "pool-c");
    c.metadata.resource_version = Some("9".into());
    match store.update(c).await {
        Err(StoreError::Invalid(m)) => assert!(m.contains("spec.blockSize"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.list(Kind::IpPool, None).await,
        Err(StoreError::Expired(_))
    ));
    task.abort();
}

#[tokio::test]
async fn unreachable_api_server_is_unavailable() {
    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = kube::Client::try_from(kube::Config::new(
        format!("http://127.0.0.1:{port}").parse().unwrap(),
    ))
    .unwrap();
    let store = KubeStore::from_client(client);
    let e = store.list(Kind::IpPool, None).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
}
