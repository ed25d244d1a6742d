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
