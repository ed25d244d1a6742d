//! The watch against the in-memory store: churn, compaction and outages
//! while a consumer follows, checking that the consumer's view ends equal
//! to the store and that no event is repeated or out of order.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::kind::Kind;
use crate::store::conformance::{self, View, ViewChecker};
use crate::store::memory::MemoryStore;

fn policy(ns: &str, name: &str, generation: u32) -> DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"order": generation}
    }))
    .unwrap()
}

fn scope() -> WatchScope {
    WatchScope {
        kind: Kind::NetworkPolicy,
        namespace: None,
        metadata_only: false,
    }
}

async fn store_view(store: &MemoryStore) -> (View, u64) {
    conformance::store_view(store, Kind::NetworkPolicy).await
}

/// Drain events until the consumer's revision reaches `rev`.
async fn catch_up(w: &mut Watch, c: &mut ViewChecker, rev: u64) {
    while w
        .revision()
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or(0)
        < rev
        || !w.pending.is_empty()
    {
        let e = tokio::time::timeout(Duration::from_secs(30), w.next())
            .await
            .expect("watch stalled");
        c.apply(e);
    }
}

#[tokio::test]
async fn initial_list_then_changes() {
    let mem = MemoryStore::new();
    mem.create(policy("a", "p1", 1)).await.unwrap();
    let mut w = watch(Arc::new(mem.clone()), scope());
    assert!(matches!(w.next().await, WatchEvent::Added(_)));
    assert!(matches!(w.next().await, WatchEvent::Synced { .. }));
    let p2 = mem.create(policy("b", "p2", 1)).await.unwrap();
    match w.next().await {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("p2")),
        e => panic!("{e:?}"),
    }
    mem.update(p2.clone()).await.unwrap();
    assert!(matches!(w.next().await, WatchEvent::Modified(_)));
    mem.delete(&ObjectKey::of(&p2).unwrap(), None)
        .await
        .unwrap();
    match w.next().await {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.name.as_deref(), Some("p2")),
        e => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn compaction_while_behind_relists_with_only_the_difference() {
    let mem = MemoryStore::new();
    let keep = mem.create(policy("a", "keep", 1)).await.unwrap();
    let change = mem.create(policy("a", "change", 1)).await.unwrap();
    let gone = mem.create(policy("a", "gone", 1)).await.unwrap();
    let mut w = watch(Arc::new(mem.clone()), scope());
    let mut c = ViewChecker::default();
    catch_up(&mut w, &mut c, mem.revision()).await;
    assert_eq!(c.view.len(), 3);

    // While the consumer is not reading: change, delete, add, then compact
    // everything away so the watch must relist.
    mem.update(change).await.unwrap();
    mem.delete(&ObjectKey::of(&gone).unwrap(), None)
        .await
        .unwrap();
    mem.create(policy("a", "new", 1)).await.unwrap();
    mem.compact(mem.revision());
    // The watch had started its raw stream; it must notice the compaction.
    let mut events = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .unwrap();
        let done = matches!(e, WatchEvent::Synced { .. });
        events.push(e.clone());
        c.apply(e);
        if done {
            break;
        }
    }
    let names: Vec<String> = events.iter().map(label).collect();
    // Either the raw watch delivered the changes before the compaction was
    // noticed, or the relist did: in both cases each change once.
    let mut sorted = names.clone();
    sorted.sort();
    assert!(sorted.contains(&"~change".to_string()), "{names:?}");
    assert!(sorted.contains(&"-gone".to_string()), "{names:?}");
    assert!(sorted.contains(&"+new".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.ends_with("keep")), "{names:?}");
    assert_eq!(c.view, store_view(&mem).await.0);
    let _ = keep;
}

#[tokio::test]
async fn watch_from_compacted_revision_relists() {
    let mem = MemoryStore::new();
    let a = mem.create(policy("a", "x", 1)).await.unwrap();
    let mut w = watch(Arc::new(mem.clone()), scope());
    let mut c = ViewChecker::default();
    catch_up(&mut w, &mut c, mem.revision()).await;
    assert_eq!(w.lists(), 1);
    // The raw stream has not been opened yet (no next() since the list):
    // compact past the list revision first, so opening it fails Expired.
    mem.update(a).await.unwrap();
    mem.compact(mem.revision());
    catch_up(&mut w, &mut c, mem.revision()).await;
    assert_eq!(w.lists(), 2, "the watch should have relisted");
    assert_eq!(c.view, store_view(&mem).await.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn churn_with_compactions_and_outages_ends_equal() {
    let mem = MemoryStore::new();
    let store: Arc<dyn Datastore> = Arc::new(mem.clone());
    let mut w = watch(store, scope());
    let consumer = tokio::spawn(async move {
        let mut c = ViewChecker::default();
        loop {
            tokio::select! {
                e = w.next() => c.apply(e),
                _ = tokio::time::sleep(Duration::from_secs(2)) => break,
            }
        }
        (c, w.lists())
    });

    // Deterministic pseudo-random churn over 300 names.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rng = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..10_000u32 {
        let n = rng() % 300;
        let ns = if n % 2 == 0 { "even" } else { "odd" };
        let name = format!("p{n}");
        let key = ObjectKey::new(Kind::NetworkPolicy, Some(ns), &name);
        match mem.get(&key).await {
            Err(_) => {
                mem.create(policy(ns, &name, i)).await.unwrap();
            }
            Ok(o) if rng() % 3 == 0 => mem.delete(&ObjectKey::of(&o).unwrap(), None).await.unwrap(),
            Ok(mut o) => {
                o.data["spec"]["order"] = i.into();
                mem.update(o).await.unwrap();
            }
        }
        if i == 5_000 || i == 7_500 {
            mem.compact(mem.revision());
        }
        if i == 8_000 {
            mem.set_unavailable(true);
            tokio::time::sleep(Duration::from_millis(300)).await;
            mem.set_unavailable(false);
        }
        if i % 500 == 0 {
            tokio::task::yield_now().await;
        }
    }
    let (c, lists) = consumer.await.unwrap();
    assert_eq!(
        c.view,
        store_view(&mem).await.0,
        "the consumer's view differs from the store"
    );
    assert!(c.synced >= 1);
    assert!(lists >= 1);
}

/// The memory store listed `per_page` objects at a time, at one revision
/// (a continuation names its revision; one the store has moved past is
/// `Expired`), failing the read number `fail_at` once.
struct Paged {
    mem: MemoryStore,
    per_page: usize,
    reads: std::sync::atomic::AtomicUsize,
    fail_at: usize,
}

#[async_trait::async_trait]
impl Datastore for Paged {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        self.mem.get(key).await
    }
    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<crate::store::Listing> {
        self.mem.list(kind, namespace).await
    }
    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        _limit: usize,
    ) -> Result<ListPage> {
        let read = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if read == self.fail_at {
            return Err(StoreError::Unavailable("a dropped page".into()));
        }
        let mut l = self.mem.list(kind, namespace).await?;
        let start = match from {
            None => 0,
            Some(f) => {
                let (i, rev) = f.split_once('@').unwrap();
                if rev != l.revision {
                    return Err(StoreError::Expired(rev.into()));
                }
                i.parse().unwrap()
            }
        };
        l.items.sort_by_key(local_key);
        let end = (start + self.per_page).min(l.items.len());
        let next = (end < l.items.len()).then(|| format!("{end}@{}", l.revision));
        Ok(ListPage {
            items: l.items.drain(start..end).collect(),
            revision: l.revision,
            next,
        })
    }
    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.mem.create(obj).await
    }
    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.mem.update(obj).await
    }
    async fn delete(&self, key: &ObjectKey, rv: Option<&str>) -> Result<()> {
        self.mem.delete(key, rv).await
    }
    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        self.mem.watch_raw(scope, revision).await
    }
    fn describe(&self) -> String {
        "paged memory".into()
    }
}

fn label(e: &WatchEvent) -> String {
    match e {
        WatchEvent::Added(o) => format!("+{}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Modified(o) => format!("~{}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Deleted(o) => format!("-{}", o.metadata.name.as_deref().unwrap()),
        WatchEvent::Synced { .. } => "synced".into(),
        WatchEvent::Relisting => "relisting".into(),
    }
}

/// Read events until `Synced`, checking that no more than a page of them
/// is ever held.
async fn until_synced(w: &mut Watch, c: &mut ViewChecker, per_page: usize) -> Vec<String> {
    let mut out = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .expect("watch stalled");
        assert!(
            w.pending.len() < per_page + 1,
            "{} events held at once",
            w.pending.len()
        );
        out.push(label(&e));
        let done = matches!(e, WatchEvent::Synced { .. });
        c.apply(e);
        if done {
            return out;
        }
    }
}

#[tokio::test]
async fn a_paged_listing_is_held_a_page_at_a_time_and_restarts_whole() {
    let mem = MemoryStore::new();
    for i in 0..7 {
        mem.create(policy("a", &format!("p{i}"), 1)).await.unwrap();
    }
    let paged = Paged {
        mem: mem.clone(),
        per_page: 2,
        reads: Default::default(),
        // The third page read fails: the listing starts again.
        fail_at: 2,
    };
    let mut w = watch(Arc::new(paged), scope());
    let mut c = ViewChecker::default();
    let first = until_synced(&mut w, &mut c, 2).await;
    let want: Vec<String> = (0..7)
        .map(|i| format!("+p{i}"))
        .chain(["synced".to_string()])
        .collect();
    assert_eq!(first, want, "each object once, in key order, then synced");
    assert_eq!(w.lists(), 1);

    // Change, delete and add behind the watch's back, then compact so that
    // it must list again: in pages, telling only the differences.
    let mut o = mem
        .get(&ObjectKey::new(Kind::NetworkPolicy, Some("a"), "p3"))
        .await
        .unwrap();
    o.data["spec"]["order"] = 9.into();
    mem.update(o).await.unwrap();
    mem.delete(&ObjectKey::new(Kind::NetworkPolicy, Some("a"), "p5"), None)
        .await
        .unwrap();
    mem.create(policy("b", "q", 1)).await.unwrap();
    mem.compact(mem.revision());
    let mut events = Vec::new();
    while !events.contains(&"synced".to_string()) || w.lists() < 2 {
        events = until_synced(&mut w, &mut c, 2).await;
    }
    let mut changes: Vec<_> = events.iter().filter(|e| *e != "synced").cloned().collect();
    changes.sort();
    assert_eq!(changes, vec!["+q", "-p5", "~p3"], "{events:?}");
    assert_eq!(c.view, store_view(&mem).await.0);
}

/// A memory store whose pages take a while, counting the pages asked for.
struct SlowPages {
    inner: MemoryStore,
    pages: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl Datastore for SlowPages {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        self.inner.get(key).await
    }
    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<crate::store::Listing> {
        self.inner.list(kind, namespace).await
    }
    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        self.pages.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(40)).await;
        self.inner.list_page(kind, namespace, from, limit).await
    }
    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.inner.create(obj).await
    }
    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        self.inner.update(obj).await
    }
    async fn delete(&self, key: &ObjectKey, rv: Option<&str>) -> Result<()> {
        self.inner.delete(key, rv).await
    }
    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<futures::stream::BoxStream<'static, Result<RawEvent>>> {
        self.inner.watch_raw(scope, revision).await
    }
    fn describe(&self) -> String {
        "slow pages".into()
    }
}

/// A consumer that gives up on `next` more often than a page takes (one
/// branch of a `select!` whose other branches are busy) still gets the
/// whole listing, and each page is asked for once.
#[tokio::test(start_paused = true)]
async fn next_dropped_mid_listing_resumes_the_same_call() {
    let mem = MemoryStore::new();
    for i in 0..3 {
        mem.create(policy("a", &format!("p{i}"), 1)).await.unwrap();
    }
    let store = Arc::new(SlowPages {
        inner: mem,
        pages: Default::default(),
    });
    let mut w = watch(store.clone(), scope());
    let mut events = Vec::new();
    let mut dropped = 0;
    while !matches!(events.last(), Some(WatchEvent::Synced { .. })) {
        match tokio::time::timeout(Duration::from_millis(10), w.next()).await {
            Ok(e) => events.push(e),
            Err(_) => dropped += 1,
        }
        assert!(dropped < 100, "the listing never finished");
    }
    assert!(dropped >= 3, "next was never dropped mid-call ({dropped})");
    let added = events
        .iter()
        .filter(|e| matches!(e, WatchEvent::Added(_)))
        .count();
    assert_eq!(added, 3);
    assert_eq!(store.pages.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// What a narrowed watch shows, as `+name`, `~name`, `-name`, `synced`.
async fn next_labels(w: &mut Watch, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let e = tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .expect("watch stalled");
        out.push(label(&e));
    }
    out
}

/// The test policies' `spec.order`, which the narrowed watches select by.
fn order(o: &DynamicObject) -> u64 {
    o.data["spec"]["order"].as_u64().unwrap_or(0)
}

fn set_order(mut o: DynamicObject, n: u32) -> DynamicObject {
    o.data["spec"]["order"] = n.into();
    o
}

#[tokio::test]
async fn a_narrowed_watch_shows_and_remembers_only_what_passes() {
    let mem = MemoryStore::new();
    let inside = mem.create(policy("a", "in", 1)).await.unwrap();
    let out = mem.create(policy("a", "out", 2)).await.unwrap();
    let leaves = mem.create(policy("a", "leaves", 1)).await.unwrap();
    let mut w = watch(Arc::new(mem.clone()), scope()).keeping(move |o| order(o) == 1);
    assert_eq!(next_labels(&mut w, 3).await, ["+in", "+leaves", "synced"]);
    assert_eq!(w.remembered(), 2, "no record of what does not pass");

    // Found outside at a relist (the raw watch is not open yet, and its
    // revision is compacted away): gone.
    mem.update(set_order(leaves, 3)).await.unwrap();
    mem.create(policy("b", "also-out", 2)).await.unwrap();
    mem.compact(mem.revision());
    assert_eq!(next_labels(&mut w, 2).await, ["-leaves", "synced"]);
    assert_eq!(w.lists(), 2);
    assert_eq!(w.remembered(), 1);

    // On the raw watch: a change outside is not shown; one into the
    // subset is an addition, one out of it a deletion.
    let out = mem.update(out).await.unwrap();
    let out = mem.update(set_order(out, 1)).await.unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["+out"]);
    mem.update(set_order(inside, 4)).await.unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["-in"]);
    mem.update(out).await.unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["~out"]);
    assert_eq!(w.remembered(), 1);
}

#[tokio::test]
async fn an_unrecorded_watch_holds_nothing_and_tells_every_listing_whole() {
    let mem = MemoryStore::new();
    let a = mem.create(policy("a", "a", 1)).await.unwrap();
    let b = mem.create(policy("a", "b", 1)).await.unwrap();
    mem.create(policy("a", "out", 2)).await.unwrap();
    let mut w = watch(Arc::new(mem.clone()), scope())
        .keeping(move |o| order(o) == 1)
        .unrecorded();
    assert_eq!(
        next_labels(&mut w, 4).await,
        ["relisting", "~a", "~b", "synced"]
    );
    assert_eq!(w.remembered(), 0, "the consumer keeps the record");

    // A relist tells everything again, unchanged objects too; what the
    // consumer holds and is not told of (b, deleted meanwhile) is gone.
    mem.delete(&ObjectKey::of(&b).unwrap(), None).await.unwrap();
    mem.compact(mem.revision());
    assert_eq!(next_labels(&mut w, 3).await, ["relisting", "~a", "synced"]);
    assert_eq!(w.lists(), 2);

    // On the raw watch: every change as it comes, one leaving the subset
    // as a deletion, deletions of objects never shown too.
    let a = mem.update(a).await.unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["~a"]);
    mem.update(set_order(a, 3)).await.unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["-a"]);
    mem.delete(&ObjectKey::new(Kind::NetworkPolicy, Some("a"), "out"), None)
        .await
        .unwrap();
    assert_eq!(next_labels(&mut w, 1).await, ["-out"]);
    assert_eq!(w.remembered(), 0);
}

#[test]
fn the_record_key_reads_back_as_the_objects_namespace_and_name() {
    let namespaced = policy("team-a", "p", 1);
    let mut cluster_wide = policy("", "q", 1);
    cluster_wide.metadata.namespace = None;
    for o in [namespaced, cluster_wide] {
        let k = record_key(&o);
        assert_eq!(split_key(&k), local_key(&o));
    }
}
