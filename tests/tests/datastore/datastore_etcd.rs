//! The etcd backend against real etcd servers (Debian's etcd-server) on
//! loopback: every kind round-trips with compare-and-swap, a watch stays
//! exact through churn and compaction, and clients ride out a stopped
//! store and a killed cluster member.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tartan_api::examples::{example, modified};
use tartan_api::kind::Kind;
use tartan_api::store::conformance::{
    ViewChecker, narrow_listing, place, round_trip_every_kind, store_view, version,
};
use tartan_api::store::etcd::EtcdStore;
use tartan_api::store::watch::watch;
use tartan_api::store::{
    Datastore, DynamicObject, ObjectKey, RawEvent, StoreError, WatchScope, connect,
};
use tartan_lab::etcd::EtcdCluster;

/// Runs a watch in a task until told to stop, then hands back its consumer.
struct Watcher {
    stop: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<(ViewChecker, u64)>,
}

impl Watcher {
    fn start(store: Arc<dyn Datastore>, kind: Kind) -> Self {
        let (stop, mut stop_rx) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut w = watch(
                store,
                WatchScope {
                    kind,
                    namespace: None,
                    metadata_only: false,
                },
            );
            let mut c = ViewChecker::default();
            loop {
                // Stop once told to and caught up to the revision given.
                let target = *stop_rx.borrow();
                let at = w
                    .revision()
                    .and_then(|r| r.parse::<u64>().ok())
                    .unwrap_or(0);
                if target > 0 && at >= target {
                    break;
                }
                tokio::select! {
                    e = w.next() => c.apply(e),
                    _ = stop_rx.changed() => {}
                }
            }
            (c, w.lists())
        });
        Watcher { stop, task }
    }

    /// Wait until the watch has seen everything up to `revision`.
    async fn finish(self, revision: u64) -> (ViewChecker, u64) {
        self.stop.send_replace(revision);
        tokio::time::timeout(Duration::from_secs(120), self.task)
            .await
            .expect("the watch never caught up with the store")
            .expect("watch task")
    }
}

/// A client of `etcd` through `connect`, as daemons open one: giving up
/// after `give_up_after`, or retrying for ever (`None`).
async fn client(etcd: &EtcdCluster, give_up_after: Option<Duration>) -> Arc<dyn Datastore> {
    connect(&etcd.datastore_spec(), give_up_after)
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_round_trips_with_compare_and_swap() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = client(&etcd, Some(Duration::from_secs(20))).await;
    round_trip_every_kind(store.as_ref()).await;
    narrow_listing(store.as_ref()).await;
    // etcd has no API server to stamp objects: the backend does it.
    let created = store
        .create(example(Kind::IpPool, "stamped"))
        .await
        .unwrap();
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_refused_before_reaching_etcd() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = client(&etcd, Some(Duration::from_secs(20))).await;
    let mut bad = example(Kind::IpPool, "bad");
    bad.data["spec"]["blockSize"] = 40.into();
    match store.create(bad).await {
        Err(StoreError::Invalid(m)) => {
            assert!(m.contains("IPPool") && m.contains("spec.blockSize"), "{m}")
        }
        other => panic!("an invalid pool was not refused: {other:?}"),
    }
    let good = store.create(example(Kind::IpPool, "good")).await.unwrap();
    let mut worse = good.clone();
    worse.data["spec"]["ipipMode"] = "Sometimes".into();
    assert!(matches!(
        store.update(worse).await,
        Err(StoreError::Invalid(_))
    ));
    let l = store.list(Kind::IpPool, None).await.unwrap();
    assert_eq!(l.items.len(), 1, "only the valid pool is stored");
    assert_eq!(
        l.items[0].data, good.data,
        "the refused update changed nothing"
    );
}

/// How many objects of `kind` `store` lists, in every namespace.
async fn count(store: &dyn Datastore, kind: Kind) -> usize {
    store.list(kind, None).await.unwrap().items.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_scope_lists_and_keys() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    for ns in ["a", "ab", "b"] {
        let mut o = example(Kind::NetworkPolicy, "p");
        o.metadata.namespace = Some(ns.into());
        store.create(o).await.unwrap();
    }
    // "a" must not match "ab": keys end the namespace with a separator.
    let l = store.list(Kind::NetworkPolicy, Some("a")).await.unwrap();
    assert_eq!(l.items.len(), 1);
    assert_eq!(l.items[0].metadata.namespace.as_deref(), Some("a"));
    assert_eq!(count(&store, Kind::NetworkPolicy).await, 3);
    assert_eq!(count(&store, Kind::GlobalNetworkPolicy).await, 0);
}

/// A listing larger than the client's 4 MiB reply limit arrives whole, and
/// is one snapshot although it is read in pages: objects rewritten while
/// the listing runs appear at the listing's revision, never newer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_larger_than_a_reply_are_read_whole_at_one_revision() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = Arc::new(EtcdStore::connect(&etcd.client_endpoints()).await.unwrap());
    // 400 objects of about 24 KB: 9.6 MB, over twice the reply limit, and
    // pages of 500 keys would not fit, so smaller pages must be chosen.
    let filler = "x".repeat(24 * 1024);
    let count = 400;
    for i in 0..count {
        let mut o = example(Kind::NetworkPolicy, &format!("p{i:03}"));
        o.metadata.namespace = Some("big".into());
        o.metadata.annotations = Some([("filler".to_string(), filler.clone())].into());
        store.create(o).await.unwrap();
    }
    // Rewrite objects continuously while listing.
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut n = 0u64;
            loop {
                let key = ObjectKey {
                    kind: Kind::NetworkPolicy,
                    namespace: Some("big".into()),
                    name: format!("p{:03}", (n * 7) % 400),
                };
                let mut o = store.get(&key).await.unwrap();
                o.metadata.labels = Some([("n".to_string(), n.to_string())].into());
                store.update(o).await.unwrap();
                n += 1;
            }
        })
    };
    for _ in 0..5 {
        let l = store.list(Kind::NetworkPolicy, None).await.expect("list");
        assert_eq!(l.items.len(), count, "every object listed once");
        let at: u64 = l.revision.parse().unwrap();
        let newest = l.items.iter().map(version).max().unwrap();
        assert!(
            newest <= at,
            "an object at revision {newest} in a listing at {at}: pages were not one snapshot"
        );
        let mut names: Vec<_> = l.items.iter().map(|o| o.metadata.name.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), count, "no object listed twice");
    }
    // The same read a page at a time (as the watch lists): every page at
    // the first page's revision, each object once.
    for _ in 0..3 {
        let mut items = Vec::new();
        let mut from: Option<String> = None;
        let mut revisions = Vec::new();
        loop {
            let page = store
                .list_page(Kind::NetworkPolicy, None, from.as_deref(), 60)
                .await
                .expect("list a page");
            assert!(page.items.len() <= 60, "a page of {}", page.items.len());
            revisions.push(page.revision.clone());
            items.extend(page.items);
            match page.next {
                Some(n) => from = Some(n),
                None => break,
            }
        }
        assert!(revisions.len() >= 7, "{} pages", revisions.len());
        revisions.dedup();
        assert_eq!(revisions.len(), 1, "pages at several revisions");
        let at: u64 = revisions[0].parse().unwrap();
        let newest = items.iter().map(version).max().unwrap();
        assert!(
            newest <= at,
            "an object at {newest} in a paged listing at {at}"
        );
        let mut names: Vec<_> = items.iter().map(|o| o.metadata.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "each object once over the pages");
    }
    writer.abort();
    assert!(
        store
            .list_page(Kind::NetworkPolicy, None, Some("not a continuation"), 10)
            .await
            .is_err(),
        "a malformed continuation is refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_watch_from_a_compacted_revision_is_expired() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let mut o = store.create(example(Kind::IpPool, "p")).await.unwrap();
    let first = version(&o);
    for i in 0..5 {
        o = store.update(modified(&o, i)).await.unwrap();
    }
    let scope = WatchScope {
        kind: Kind::IpPool,
        namespace: None,
        metadata_only: false,
    };
    // Before compaction, the history is there: five puts after `first`.
    let mut raw = store.watch_raw(&scope, &first.to_string()).await.unwrap();
    let mut puts = 0;
    while puts < 5 {
        match tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut raw))
            .await
        {
            Ok(Some(Ok(RawEvent::Put(_)))) => puts += 1,
            Ok(Some(Ok(RawEvent::Progress(_)))) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    drop(raw);

    etcd.compact(version(&o) as i64).unwrap();
    let r = match store.watch_raw(&scope, &first.to_string()).await {
        Err(e) => Err(e),
        Ok(mut s) => {
            tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut s))
                .await
                .expect("no answer")
                .expect("stream ended without a word")
        }
    };
    assert!(matches!(r, Err(StoreError::Expired(_))), "got {r:?}");
}

/// 10,000 creates, updates and deletes over 400 names from two writers
/// while a watch follows. Half way, the watch's connection is cut and, while
/// it is away, the history is compacted past the revision it had reached:
/// it must relist. Its consumer's view must end equal to the store, and the
/// consumer's checks catch any duplicate or lost event on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_stays_exact_through_churn_and_compaction() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let etcd_store: Arc<dyn Datastore> =
        Arc::new(EtcdStore::connect(&etcd.client_endpoints()).await.unwrap());
    let link = Arc::new(Link::new(etcd_store.clone()));
    let watcher = Watcher::start(link.clone(), Kind::NetworkPolicy);

    let started = Instant::now();
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let store = etcd_store.clone();
            tokio::spawn(async move { churn(store, w, 5_000, 200).await })
        })
        .collect();
    let compacted = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if etcd.revision().unwrap() > 4_000 {
            link.cut();
            tokio::time::sleep(Duration::from_millis(500)).await;
            let rev = etcd.revision().unwrap();
            etcd.compact(rev).unwrap();
            link.restore();
            break rev;
        }
    };
    for w in writers {
        w.await.unwrap();
    }
    let (want, revision) = store_view(etcd_store.as_ref(), Kind::NetworkPolicy).await;
    let (consumer, lists) = watcher.finish(revision).await;
    eprintln!(
        "10k ops in {:?}; compacted at {compacted}; watch saw {} events, listed {lists} times",
        started.elapsed(),
        consumer.events
    );
    assert!(lists >= 2, "the compaction should have forced a relist");
    assert_eq!(
        consumer.view, want,
        "the watch's view differs from the store"
    );
    assert!(consumer.synced >= 2);
}

/// A store whose watch connections can be cut and kept down, as a network
/// blip would; everything else passes through.
struct Link {
    inner: Arc<dyn Datastore>,
    up: tokio::sync::watch::Sender<bool>,
}

impl Link {
    fn new(inner: Arc<dyn Datastore>) -> Self {
        Link {
            inner,
            up: tokio::sync::watch::channel(true).0,
        }
    }

    fn cut(&self) {
        self.up.send_replace(false);
    }

    fn restore(&self) {
        self.up.send_replace(true);
    }
}

#[async_trait::async_trait]
impl Datastore for Link {
    async fn get(&self, key: &ObjectKey) -> tartan_api::store::Result<DynamicObject> {
        self.inner.get(key).await
    }
    async fn list(
        &self,
        kind: Kind,
        namespace: Option<&str>,
    ) -> tartan_api::store::Result<tartan_api::store::Listing> {
        if !*self.up.borrow() {
            return Err(StoreError::Unavailable("link cut by the test".into()));
        }
        self.inner.list(kind, namespace).await
    }
    async fn create(&self, obj: DynamicObject) -> tartan_api::store::Result<DynamicObject> {
        self.inner.create(obj).await
    }
    async fn update(&self, obj: DynamicObject) -> tartan_api::store::Result<DynamicObject> {
        self.inner.update(obj).await
    }
    async fn delete(&self, key: &ObjectKey, rv: Option<&str>) -> tartan_api::store::Result<()> {
        self.inner.delete(key, rv).await
    }
    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> tartan_api::store::Result<
        futures::stream::BoxStream<'static, tartan_api::store::Result<RawEvent>>,
    > {
        if !*self.up.borrow() {
            return Err(StoreError::Unavailable("link cut by the test".into()));
        }
        let raw = self.inner.watch_raw(scope, revision).await?;
        let mut up = self.up.subscribe();
        let cut = async move {
            let _ = up.wait_for(|u| !*u).await;
        };
        Ok(futures::StreamExt::boxed(futures::StreamExt::take_until(
            raw,
            Box::pin(cut),
        )))
    }
    fn describe(&self) -> String {
        "link".into()
    }
}

/// `ops` writes by writer `w` over `names` names of its own, choosing
/// create, update or delete by what it knows exists; returns what it
/// believes is stored.
async fn churn(store: Arc<dyn Datastore>, w: u64, ops: u32, names: u64) -> HashMap<String, u64> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (w + 1);
    let mut rng = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut live: HashMap<String, DynamicObject> = HashMap::new();
    for i in 0..ops {
        let name = format!("w{w}-p{}", rng() % names);
        let ns = if rng() % 2 == 0 { "even" } else { "odd" };
        match live.remove(&name) {
            None => {
                let mut o = example(Kind::NetworkPolicy, &name);
                o.metadata.namespace = Some(ns.into());
                let o = store.create(o).await.expect("create");
                live.insert(name, o);
            }
            Some(o) if rng() % 3 == 0 => {
                let key = ObjectKey::of(&o).unwrap();
                store
                    .delete(&key, o.metadata.resource_version.as_deref())
                    .await
                    .expect("delete");
            }
            Some(o) => {
                let o = store.update(modified(&o, i)).await.expect("update");
                live.insert(name, o);
            }
        }
    }
    live.into_iter().map(|(k, o)| (k, version(&o))).collect()
}

/// How long the outage test keeps etcd down (the 60 s; shorter
/// with TARTAN_ETCD_OUTAGE_SECS for a quick local run).
fn outage() -> Duration {
    let secs = std::env::var("TARTAN_ETCD_OUTAGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_survive_etcd_stopped_and_restarted() {
    let mut etcd = EtcdCluster::single().expect("start etcd");
    // Clients as daemons open it: retrying for ever.
    let store = client(&etcd, None).await;
    for i in 0..20 {
        store
            .create(example(Kind::IpPool, &format!("before-{i}")))
            .await
            .unwrap();
    }
    let watcher = Watcher::start(store.clone(), Kind::IpPool);
    tokio::time::sleep(Duration::from_millis(500)).await;

    etcd.stop(0).unwrap();
    let down = Instant::now();
    // Writes issued while the store is down wait and complete after.
    let writes: Vec<_> = (0..10)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create(example(Kind::IpPool, &format!("during-{i}")))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(outage()).await;
    assert!(
        writes.iter().all(|w| !w.is_finished()),
        "a write finished while etcd was down"
    );
    etcd.start(0).unwrap();
    eprintln!("etcd was down {:?}", down.elapsed());
    for w in writes {
        tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .expect("a write never completed after etcd came back")
            .unwrap()
            .expect("a write failed after etcd came back");
    }
    store.create(example(Kind::IpPool, "after")).await.unwrap();

    let (want, revision) = store_view(store.as_ref(), Kind::IpPool).await;
    assert_eq!(want.len(), 31);
    let (consumer, _) = watcher.finish(revision).await;
    assert_eq!(
        consumer.view, want,
        "the watch missed changes across the outage"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_member_cluster_keeps_working_with_a_member_killed() {
    let mut etcd = EtcdCluster::three().expect("start three etcd members");
    let store = client(&etcd, None).await;
    let watcher = Watcher::start(store.clone(), Kind::BgpPeer);

    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut written = Vec::new();
            for i in 0..300 {
                let name = format!("peer-{i}");
                let o = store
                    .create(example(Kind::BgpPeer, &name))
                    .await
                    .expect("create");
                written.push(o);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            written
        })
    };
    tokio::time::sleep(Duration::from_millis(800)).await;
    // Kill the leader: the hardest member to lose.
    let leader = etcd.leader().unwrap();
    etcd.kill(leader).unwrap();
    eprintln!("killed member {leader} (the leader)");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = tokio::time::timeout(Duration::from_secs(120), writer)
        .await
        .expect("writes stalled with one member down")
        .unwrap();
    etcd.start(leader).unwrap();

    assert_eq!(written.len(), 300);
    the_watch_saw_every_write(store.as_ref(), Kind::BgpPeer, &written, watcher).await;
}

/// The store holds every object in `written` (and nothing else) as
/// written, and `watcher`'s consumer saw the store as it is.
async fn the_watch_saw_every_write(
    store: &dyn Datastore,
    kind: Kind,
    written: &[DynamicObject],
    watcher: Watcher,
) {
    let (want, revision) = store_view(store, kind).await;
    assert_eq!(
        want.len(),
        written.len(),
        "a write that succeeded is missing"
    );
    for o in written {
        assert_eq!(want.get(&place(o)), Some(&version(o)), "{:?}", place(o));
    }
    let (consumer, _) = watcher.finish(revision).await;
    assert_eq!(consumer.view, want, "the watch missed changes");
}

/// The raw events of `scope` after `from` up to the first deletion.
async fn raw_until_deleted(store: &EtcdStore, scope: &WatchScope, from: u64) -> Vec<RawEvent> {
    let mut raw = store.watch_raw(scope, &from.to_string()).await.unwrap();
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut raw))
            .await
        {
            Ok(Some(Ok(RawEvent::Progress(_)))) => {}
            Ok(Some(Ok(ev @ RawEvent::Deleted(_)))) => {
                got.push(ev);
                return got;
            }
            Ok(Some(Ok(ev))) => got.push(ev),
            other => panic!("unexpected {other:?} after {got:?}"),
        }
    }
}

fn scope_of_nodes(metadata_only: bool) -> WatchScope {
    WatchScope {
        kind: Kind::Node,
        namespace: None,
        metadata_only,
    }
}

/// A Node as a kubelet posts it, its Ready condition's heartbeat at `at`.
fn beating(o: &DynamicObject, at: &str) -> DynamicObject {
    let mut o = o.clone();
    o.data["status"] = serde_json::json!({"conditions": [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": at}]});
    o
}

/// A watch for a consumer that reads metadata only (felix's and bgpd's of
/// Nodes) gets each change of a Node's metadata, its spec and status as
/// their shape, and nothing at all for a write that changes only the
/// status (a kubelet's heartbeat): etcd sends it nothing. The same watch
/// without the wish gets every write whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_only_watch_of_nodes_gets_each_metadata_change_and_no_heartbeat() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let mut node = example(Kind::Node, "n1");
    node.data["spec"] = serde_json::json!({"podCIDR": "10.0.0.0/24"});
    let o = store
        .create(beating(&node, "2026-01-01T00:00:00Z"))
        .await
        .unwrap();
    let first = version(&o);
    let beat = store
        .update(beating(&o, "2026-01-01T00:00:10Z"))
        .await
        .unwrap();
    let relabeled = store.update(modified(&beat, 1)).await.unwrap();
    let beat2 = store
        .update(beating(&relabeled, "2026-01-01T00:00:20Z"))
        .await
        .unwrap();
    store
        .delete(&ObjectKey::of(&beat2).unwrap(), None)
        .await
        .unwrap();

    let whole = raw_until_deleted(&store, &scope_of_nodes(false), first).await;
    let puts: Vec<&DynamicObject> = whole
        .iter()
        .filter_map(|e| match e {
            RawEvent::Put(o) => Some(o),
            _ => None,
        })
        .collect();
    assert_eq!(puts, vec![&beat, &relabeled, &beat2], "{whole:?}");

    let outline = raw_until_deleted(&store, &scope_of_nodes(true), first).await;
    match outline.as_slice() {
        [RawEvent::Put(got), RawEvent::Deleted(gone)] => {
            assert_eq!(got.metadata, relabeled.metadata);
            assert_eq!(got.data["spec"], serde_json::json!({}));
            assert_eq!(got.data["status"], serde_json::json!({}));
            assert_eq!(gone.metadata.name.as_deref(), Some("n1"));
        }
        other => panic!("a metadata-only watch got {other:?}"),
    }
}

/// A Node put into etcd by hand, past the store, has no outline: the
/// store's next write of it, a heartbeat included, writes one, and from
/// then on a metadata-only watch tells of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_an_outline_gets_one_at_its_next_write() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let node = beating(&example(Kind::Node, "n2"), "2026-01-01T00:00:00Z");
    let key = "/tartan/k8s/nodes/n2";
    let put = store
        .client()
        .kv_client()
        .put(key, serde_json::to_vec(&node).unwrap(), None)
        .await
        .unwrap();
    let first = put.header().unwrap().revision() as u64;
    let k = ObjectKey::of(&node).unwrap();
    let stored = store.get(&k).await.unwrap();
    let beat = store
        .update(beating(&stored, "2026-01-01T00:00:10Z"))
        .await
        .unwrap();
    // A second heartbeat: its outline is the one just written.
    store
        .update(beating(&beat, "2026-01-01T00:00:20Z"))
        .await
        .unwrap();
    store.delete(&k, None).await.unwrap();
    let outline = raw_until_deleted(&store, &scope_of_nodes(true), first).await;
    match outline.as_slice() {
        [RawEvent::Put(got), RawEvent::Deleted(_)] => {
            assert_eq!(got.metadata, beat.metadata);
        }
        other => panic!("a metadata-only watch got {other:?}"),
    }
    // Deleting the Node deleted its outline.
    let left = store
        .client()
        .kv_client()
        .get("/tartan/outlines/k8s/nodes/n2", None)
        .await
        .unwrap();
    assert_eq!(left.count(), 0, "{left:?}");
}

/// The Range calls etcd has answered, from its metrics.
fn ranges(etcd: &EtcdCluster) -> u64 {
    etcd.handled("Range").expect("etcd metrics")
}

/// A Node watch runs over a paced connection of its own, to one member:
/// with each member stopped in turn (so the watch's own among them), the
/// watch resumes on another and its consumer misses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_watch_follows_each_member_stopped_in_turn() {
    let mut etcd = EtcdCluster::three().expect("start three etcd members");
    let store = client(&etcd, None).await;
    let watcher = Watcher::start(store.clone(), Kind::Node);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let mut written = Vec::new();
            let mut i = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let o = store
                    .create(example(Kind::Node, &format!("node-{i}")))
                    .await
                    .expect("create");
                written.push(o);
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            written
        })
    };
    for m in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        etcd.stop(m).unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        etcd.start(m).unwrap();
        etcd.wait_healthy(m, Duration::from_secs(30)).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = tokio::time::timeout(Duration::from_secs(120), writer)
        .await
        .expect("writes stalled")
        .unwrap();
    the_watch_saw_every_write(store.as_ref(), Kind::Node, &written, watcher).await;
}

/// A store told to keep more values (the scale bench's kubelets, standing
/// in for an API server's watch cache) updates each of many objects in
/// one transaction; the default few would have let the first ones go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_keeping_more_updates_many_objects_reading_nothing() {
    const N: usize = 200;
    let etcd = EtcdCluster::single().expect("start etcd");
    let wide = EtcdStore::connect(&etcd.client_endpoints())
        .await
        .unwrap()
        .keeping(N + 10, 4 << 20);
    let narrow = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let mut made = Vec::new();
    for i in 0..N {
        made.push(
            wide.create(example(Kind::IpPool, &format!("w{i}")))
                .await
                .unwrap(),
        );
        narrow
            .create(example(Kind::IpPool, &format!("n{i}")))
            .await
            .unwrap();
    }
    let before = ranges(&etcd);
    for m in &made {
        wide.update(modified(m, 1)).await.unwrap();
    }
    assert_eq!(
        ranges(&etcd),
        before,
        "an update of one of {N} kept read the store"
    );

    // The default bounds let the first go: its update reads the value.
    let first = narrow
        .get(&ObjectKey::new(Kind::IpPool, None, "n0"))
        .await
        .unwrap();
    for i in 1..N {
        narrow
            .get(&ObjectKey::new(Kind::IpPool, None, &format!("n{i}")))
            .await
            .unwrap();
    }
    let before = ranges(&etcd);
    narrow.update(modified(&first, 1)).await.unwrap();
    assert_eq!(
        ranges(&etcd),
        before + 1,
        "the default bounds kept {N} values"
    );
}

/// An update of an object this client has just read or written is one
/// transaction, with no read of the stored value first (a CNI ADD's
/// compare-and-swap of the block it has just read). The identity fields
/// stay the stored ones all the same, and a value kept from before another
/// writer's change is read again and refused as a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_after_a_read_reads_nothing_more() {
    let etcd = EtcdCluster::single().expect("start etcd");
    let store = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let other = EtcdStore::connect(&etcd.client_endpoints()).await.unwrap();
    let created = store.create(example(Kind::IpPool, "p")).await.unwrap();
    let before = ranges(&etcd);
    let after_create = store.update(modified(&created, 1)).await.unwrap();
    let mut forged = modified(&after_create, 2);
    forged.metadata.uid = Some("forged".into());
    forged.metadata.generation = Some(40);
    let after_update = store.update(forged).await.unwrap();
    assert_eq!(
        ranges(&etcd),
        before,
        "an update after a create or an update read the store"
    );
    assert_eq!(after_update.metadata.uid, created.metadata.uid);
    assert_eq!(
        after_update.metadata.generation,
        created.metadata.generation
    );
    let key = ObjectKey::of(&created).unwrap();
    let stored = other.get(&key).await.unwrap();
    assert_eq!(stored.metadata.uid, created.metadata.uid);
    assert_eq!(stored.metadata.generation, created.metadata.generation);

    // Another client: its read, then its update, which reads nothing more.
    let read = ranges(&etcd);
    let mut respecced = modified(&stored, 3);
    respecced.data["spec"]["natOutgoing"] = serde_json::json!(false);
    let by_other = other.update(respecced).await.unwrap();
    assert_eq!(ranges(&etcd), read, "an update after a get read the store");
    assert_eq!(
        by_other.metadata.generation,
        Some(created.metadata.generation.unwrap() + 1)
    );

    // The first client's value is now stale: its update is refused, from
    // what its transaction found instead, with no read more.
    let read = ranges(&etcd);
    let stale = store.update(modified(&after_update, 4)).await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(ranges(&etcd), read, "a conflict read the store again");
    assert_eq!(
        other.get(&key).await.unwrap().metadata.resource_version,
        by_other.metadata.resource_version
    );
}
