//! What an ADD and a DEL read, through a store that records every call:
//! with room in the node's own block, neither lists IPAM blocks nor reads
//! another node's.

use std::sync::Arc;

use tartan_api::Kind;
use tartan_api::resources::IpPool;
use tartan_api::resources::IpPoolSpec;
use tartan_api::store::Datastore;
use tartan_api::store::recording::{Call, Recording};
use tartan_api::store::typed::TypedStore;

use super::{Ipam, IpamConfig};

/// Three nodes with a block each (n2 with two), the store recording.
async fn cluster() -> Arc<Recording> {
    cluster_in(Recording::new(false)).await
}

async fn cluster_in(rec: Recording) -> Arc<Recording> {
    let rec = Arc::new(rec);
    let mut spec = IpPoolSpec::new("10.10.0.0/16");
    spec.block_size = Some(30);
    rec.create_typed(&IpPool::new("p", spec)).await.unwrap();
    let s: Arc<dyn Datastore> = rec.clone();
    for (node, pods) in [("n1", 1), ("n2", 4), ("n3", 1), ("n10", 1)] {
        let i = Ipam::new(s.clone(), IpamConfig::new(node));
        for p in 0..pods {
            i.assign(&format!("net.{node}-{p}"), &Default::default())
                .await
                .unwrap();
        }
    }
    rec.take_reads();
    rec
}

/// The IPAM block reads among `reads`: none may be a listing of them all,
/// and every block read must be one of `allowed`.
fn assert_block_reads(reads: &[Call], allowed: &[&str]) {
    for r in reads {
        assert!(
            !(r.call == "list" && matches!(r.kind, Kind::IpamBlock | Kind::BlockAffinity)),
            "listed every {}: {reads:#?}",
            r.kind
        );
        if r.kind == Kind::IpamBlock {
            for n in &r.names {
                assert!(allowed.contains(&n.as_str()), "read block {n}: {reads:#?}");
            }
        }
        if r.kind == Kind::BlockAffinity {
            for n in &r.names {
                assert!(n.starts_with("n1."), "read another node's affinity {n}");
            }
        }
    }
}

#[tokio::test]
async fn an_add_with_room_reads_only_its_nodes_blocks_and_a_del_only_the_handles() {
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let i = Ipam::new(s.clone(), IpamConfig::new("n1"));
    // n1's block 10.10.0.0/30 holds .1 (the pool's first address is never
    // given): .2 is free.
    let got = i.assign("net.new", &Default::default()).await.unwrap();
    assert_eq!(got[0].to_string(), "10.10.0.2/32");
    let reads = rec.take_reads();
    assert_block_reads(&reads, &["10-10-0-0-30"]);
    assert!(
        reads.iter().any(|r| r.call == "list_narrow"),
        "the affinities were read narrowed: {reads:#?}"
    );
    // A retried ADD gets the same address, reading no more.
    assert_eq!(i.assign("net.new", &Default::default()).await.unwrap(), got);
    assert_block_reads(&rec.take_reads(), &["10-10-0-0-30"]);
    // DEL: the handle, then its one block.
    let released = i.release("net.new").await.unwrap();
    assert_eq!(released, vec![got[0].addr()]);
    let reads = rec.take_reads();
    assert_block_reads(&reads, &["10-10-0-0-30"]);
    assert!(
        reads
            .iter()
            .any(|r| r.kind == Kind::IpamHandle && r.call == "get")
    );
}

#[tokio::test]
async fn a_full_block_still_leads_to_a_new_one() {
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let i = Ipam::new(s.clone(), IpamConfig::new("n1"));
    i.assign("net.a", &Default::default()).await.unwrap();
    i.assign("net.b", &Default::default()).await.unwrap();
    // n1's block is full now: the next ADD claims another.
    let got = i.assign("net.c", &Default::default()).await.unwrap();
    let blocks: Vec<String> = s
        .list_typed::<tartan_api::resources::IpamBlock>(None)
        .await
        .unwrap()
        .0
        .into_iter()
        .filter(|b| b.spec.affine_node() == Some("n1"))
        .map(|b| b.spec.cidr)
        .collect();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    assert!(
        blocks
            .iter()
            .any(|c| c.parse::<ipnet::IpNet>().unwrap().contains(&got[0].addr()))
    );
    // And the ADD after that reads only n1's two blocks.
    rec.take_reads();
    i.release("net.a").await.unwrap();
    rec.take_reads();
    let mut cfg = IpamConfig::new("n1");
    cfg.cooldown = std::time::Duration::ZERO;
    let i = Ipam::new(s.clone(), cfg);
    i.assign("net.d", &Default::default()).await.unwrap();
    let names: Vec<String> = blocks
        .iter()
        .map(|c| tartan_api::resources::block_name(&c.parse().unwrap()))
        .collect();
    let allowed: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_block_reads(&rec.take_reads(), &allowed);
}

#[tokio::test]
async fn an_affinity_written_before_the_label_is_labelled_by_gc() {
    use tartan_api::resources::BlockAffinity;
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    // n1's affinity as an older version wrote it: no label.
    let mut a: BlockAffinity = s.get_typed(None, "n1.10-10-0-0-30").await.unwrap();
    a.metadata.labels = None;
    s.update_typed(&a).await.unwrap();
    let i = Ipam::new(s.clone(), IpamConfig::new("n1"));
    i.gc("net.", |_| true).await.unwrap();
    let a: BlockAffinity = s.get_typed(None, "n1.10-10-0-0-30").await.unwrap();
    assert_eq!(
        a.metadata
            .labels
            .unwrap()
            .get(super::local::NODE_LABEL)
            .map(String::as_str),
        Some("n1")
    );
    rec.take_reads();
    i.assign("net.new", &Default::default()).await.unwrap();
    assert_block_reads(&rec.take_reads(), &["10-10-0-0-30"]);
}

/// An ADD with room in the node's block waits for three round trips to
/// the datastore one after another: its reads (the node's affinities, the
/// handle, the pools and reservations) together, then the blocks they
/// name together, then the block's write; the IPAMHandle's write is the
/// fourth (the plugin makes it beside the interface and the record). A
/// DEL waits for the handle, its block, the block's write and the
/// handle's deletion. Each read made after another is datastore latency
/// that every pod start pays, and more exposure to a loaded store's tail.
#[tokio::test(start_paused = true)]
async fn an_add_with_room_waits_for_three_round_trips_before_its_handle() {
    const RTT: std::time::Duration = std::time::Duration::from_millis(10);
    let rec = cluster_in(Recording::with_latency(RTT)).await;
    let s: Arc<dyn Datastore> = rec.clone();
    let i = Ipam::new(s.clone(), IpamConfig::new("n1"));
    let rounds = |t: tokio::time::Instant| t.elapsed().as_millis() / RTT.as_millis();
    let t = tokio::time::Instant::now();
    let a = i.allocate("net.new", &Default::default()).await.unwrap();
    assert_eq!(rounds(t), 3, "{:#?}", rec.take());
    let t = tokio::time::Instant::now();
    i.record(&a).await.unwrap();
    assert_eq!(rounds(t), 1, "{:#?}", rec.take());
    rec.take();
    let t = tokio::time::Instant::now();
    i.release("net.new").await.unwrap();
    assert!(rounds(t) <= 4, "{} rounds: {:#?}", rounds(t), rec.take());
}

/// A file for the block names IPAM keeps, removed when dropped.
struct Kept(std::path::PathBuf);

impl Kept {
    fn new() -> Kept {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        Kept(std::env::temp_dir().join(format!("tartan-ipam-kept-{}-{n}", std::process::id())))
    }

    /// n1's IPAM, keeping its block names here.
    fn ipam(&self, s: &Arc<dyn Datastore>, cooldown: std::time::Duration) -> Ipam {
        let mut c = IpamConfig::new("n1");
        c.remember = Some(self.0.clone());
        c.cooldown = cooldown;
        Ipam::new(s.clone(), c)
    }

    fn names(&self) -> Vec<String> {
        std::fs::read_to_string(&self.0)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Assign each of `handles` in turn.
async fn assign_all(i: &Ipam, handles: &[&str]) {
    for h in handles {
        i.assign(h, &Default::default()).await.unwrap();
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// With the node's block names kept from the last call, an ADD reads its
/// blocks together with its other reads: two round trips before the
/// handle's write instead of three, and no listing of affinities.
#[tokio::test(start_paused = true)]
async fn an_add_with_its_blocks_remembered_waits_for_two_round_trips() {
    const RTT: std::time::Duration = std::time::Duration::from_millis(10);
    let rec = cluster_in(Recording::with_latency(RTT)).await;
    let s: Arc<dyn Datastore> = rec.clone();
    let kept = Kept::new();
    let i = kept.ipam(&s, super::DEFAULT_COOLDOWN);
    let rounds = |t: tokio::time::Instant| t.elapsed().as_millis() / RTT.as_millis();
    // Nothing kept yet: the affinities are listed, and their blocks kept.
    let t = tokio::time::Instant::now();
    i.assign("net.a", &Default::default()).await.unwrap();
    assert_eq!(rounds(t), 4, "{:#?}", rec.take());
    assert_eq!(kept.names(), vec!["10-10-0-0-30"]);
    rec.take_reads();
    let t = tokio::time::Instant::now();
    let a = i.allocate("net.b", &Default::default()).await.unwrap();
    assert_eq!(rounds(t), 2, "{:#?}", rec.take());
    assert_eq!(a.addresses[0].to_string(), "10.10.0.3/32");
    let reads = rec.take_reads();
    assert_block_reads(&reads, &["10-10-0-0-30"]);
    assert!(
        !reads.iter().any(|r| r.kind == Kind::BlockAffinity),
        "read affinities: {reads:#?}"
    );
}

/// A name kept that is not (or no longer) one of the node's blocks is
/// not taken from; the affinities are listed and the names kept again.
#[tokio::test]
async fn a_remembered_block_of_another_node_is_not_taken_from() {
    use tartan_api::resources::IpamBlock;
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let n2_blocks = || async {
        let (all, _) = s.list_typed::<IpamBlock>(None).await.unwrap();
        all.into_iter()
            .filter(|b| b.spec.affine_node() == Some("n2"))
            .collect::<Vec<_>>()
    };
    let before = n2_blocks().await;
    let names: Vec<String> = before
        .iter()
        .filter_map(|b| b.metadata.name.clone())
        .collect();
    let kept = Kept::new();
    std::fs::write(&kept.0, format!("{}\nnot/a name\n", names.join("\n"))).unwrap();
    let i = kept.ipam(&s, super::DEFAULT_COOLDOWN);
    let got = i.assign("net.new", &Default::default()).await.unwrap();
    assert_eq!(got[0].to_string(), "10.10.0.2/32");
    let after = n2_blocks().await;
    assert_eq!(
        before.iter().map(|b| &b.spec).collect::<Vec<_>>(),
        after.iter().map(|b| &b.spec).collect::<Vec<_>>()
    );
    assert_eq!(kept.names(), vec!["10-10-0-0-30"]);
}

/// A block the node claims is kept at once, so the ADD after it reads it
/// without listing anything.
#[tokio::test]
async fn a_claimed_block_is_remembered() {
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let kept = Kept::new();
    let i = kept.ipam(&s, super::DEFAULT_COOLDOWN);
    assign_all(&i, &["net.a", "net.b"]).await;
    // n1's block is full: this ADD claims another.
    let c = i.assign("net.c", &Default::default()).await.unwrap();
    let names = kept.names();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"10-10-0-0-30".to_string()));
    rec.take_reads();
    let d = i.assign("net.d", &Default::default()).await.unwrap();
    let reads = rec.take_reads();
    assert!(
        !reads.iter().any(|r| matches!(r.kind, Kind::BlockAffinity)
            || r.call == "list" && r.kind == Kind::IpamBlock),
        "{reads:#?}"
    );
    let allowed: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_block_reads(&reads, &allowed);
    assert_ne!(c, d);
}

/// When the kept blocks have no room, the affinities are listed; a kept
/// block that is still the node's stays kept even when no affinity names
/// it (claimed, its affinity not yet written), so what an earlier try
/// took there is found again.
#[tokio::test]
async fn the_listing_keeps_the_kept_blocks_still_the_nodes() {
    use tartan_api::resources::BlockAffinity;
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let kept = Kept::new();
    let i = kept.ipam(&s, std::time::Duration::ZERO);
    // n1's first block full (.1 is taken already), then a second claimed
    // and filled.
    let handles = ["net.a", "net.b", "net.c", "net.d", "net.e", "net.f"];
    assign_all(&i, &handles).await;
    let names = kept.names();
    assert_eq!(names.len(), 2, "{names:?}");
    let second = names.iter().find(|n| *n != "10-10-0-0-30").unwrap().clone();
    let (mine, _) = s.list_typed::<BlockAffinity>(None).await.unwrap();
    let gone = mine
        .iter()
        .find(|a| a.spec.node == "n1" && a.metadata.name.as_deref() != Some("n1.10-10-0-0-30"))
        .unwrap();
    s.delete_typed::<BlockAffinity>(None, gone.metadata.name.as_deref().unwrap(), None)
        .await
        .unwrap();
    // Room in the first block again; only the second (full) is kept.
    i.release("net.a").await.unwrap();
    std::fs::write(&kept.0, format!("{second}\n")).unwrap();
    let got = i.assign("net.g", &Default::default()).await.unwrap();
    assert_eq!(got[0].to_string(), "10.10.0.2/32");
    let mut now = kept.names();
    now.sort();
    let mut want = vec!["10-10-0-0-30".to_string(), second];
    want.sort();
    assert_eq!(now, want);
}

/// When the affinities name just the blocks kept, which had no room, the
/// ADD goes straight to claiming: it does not read them all again.
#[tokio::test]
async fn a_listing_that_finds_only_the_kept_blocks_goes_on_to_claim() {
    let rec = cluster().await;
    let s: Arc<dyn Datastore> = rec.clone();
    let kept = Kept::new();
    let i = kept.ipam(&s, super::DEFAULT_COOLDOWN);
    assign_all(&i, &["net.a", "net.b"]).await;
    rec.take_reads();
    i.assign("net.c", &Default::default()).await.unwrap();
    let reads = rec.take_reads();
    let handle_reads = reads
        .iter()
        .filter(|r| r.kind == Kind::IpamHandle && r.call == "get")
        .count();
    assert_eq!(handle_reads, 1, "{reads:#?}");
    assert_eq!(kept.names().len(), 2);
}
