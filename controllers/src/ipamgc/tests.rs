//! IPAM garbage collection against the in-memory store, with addresses
//! taken by the CNI's own IPAM: a deleted node's records go after the
//! grace period, a live node's stay (its addresses borrowed from the dead
//! node's block too), and `ipam check` finds nothing afterwards.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use tartan_api::resources::{
    BlockAffinity, IpPool, IpPoolSpec, IpamBlock, IpamHandle, WorkloadEndpoint, workload_name,
};
use tartan_api::store::Datastore;
use tartan_api::store::connect::Checked;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::typed::TypedStore;
use tartan_cni::ipam::report::check;
use tartan_cni::ipam::{Ipam, IpamConfig, NODE_LABEL};

use super::Collector;

fn store() -> Arc<dyn Datastore> {
    Arc::new(Checked(Box::new(MemoryStore::new())))
}

/// A pod on `node` with container `c`: its address from the node's IPAM
/// and its WorkloadEndpoint, as the CNI plugin writes them.
async fn pod(s: &Arc<dyn Datastore>, node: &str, c: &str) {
    let ipam = Ipam::new(s.clone(), IpamConfig::new(node));
    let secondary = BTreeMap::from([("node".to_string(), node.to_string())]);
    let addrs = ipam.assign(&format!("net.{c}"), &secondary).await.unwrap();
    let w: WorkloadEndpoint = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "WorkloadEndpoint",
        "metadata": {"name": workload_name(c, "eth0"), "namespace": "default"},
        "spec": {"node": node, "pod": c, "containerID": c, "endpoint": "eth0",
            "interfaceName": "tar0123456789a",
            "ipNetworks": addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>()}
    }))
    .unwrap();
    s.create_typed(&w).await.unwrap();
}

async fn node(s: &Arc<dyn Datastore>, name: &str) {
    let n: Node = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    s.create_typed(&n).await.unwrap();
}

async fn all<T: tartan_api::store::typed::Resource>(s: &Arc<dyn Datastore>) -> Vec<T> {
    s.list_typed::<T>(None).await.unwrap().0
}

#[tokio::test]
async fn a_deleted_nodes_records_go_and_a_live_nodes_stay() {
    let s = store();
    let mut pool = IpPoolSpec::new("10.10.0.0/28");
    pool.block_size = Some(30);
    s.create_typed(&IpPool::new("p", pool)).await.unwrap();
    for n in ["n1", "n2", "n3"] {
        node(&s, n).await;
    }
    pod(&s, "n2", "b").await;
    pod(&s, "n3", "c").await;
    // n1 fills the two free blocks and borrows from another node's.
    for c in ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"] {
        pod(&s, "n1", c).await;
    }
    assert!(check(&all(&s).await, &all(&s).await, &all(&s).await).is_empty());
    // An affinity of n1 from before the label.
    let mut aff: Vec<BlockAffinity> = all(&s).await;
    let a1 = aff.iter_mut().find(|a| a.spec.node == "n1").unwrap();
    a1.metadata.labels = None;
    s.update_typed(a1).await.unwrap();

    s.delete_typed::<Node>(None, "n2", None).await.unwrap();
    s.delete_typed::<Node>(None, "n3", None).await.unwrap();
    let mut gc = Collector::new(5);
    let r = gc.pass(&*s, 1000).await.unwrap();
    assert!(r.gone.is_empty(), "within the grace period nothing goes");
    assert_eq!(r.labelled, 1);
    assert_eq!(all::<IpamHandle>(&s).await.len(), 11);

    let r = gc.pass(&*s, 1005).await.unwrap();
    assert_eq!(
        r.gone.iter().map(String::as_str).collect::<Vec<_>>(),
        ["n2", "n3"]
    );
    assert_eq!((r.addresses, r.handles, r.endpoints), (2, 2, 2), "{r:?}");
    let blocks: Vec<IpamBlock> = all(&s).await;
    let handles: Vec<IpamHandle> = all(&s).await;
    let weps: Vec<WorkloadEndpoint> = all(&s).await;
    let affs: Vec<BlockAffinity> = all(&s).await;
    assert!(
        check(&blocks, &handles, &weps).is_empty(),
        "{:?}",
        check(&blocks, &handles, &weps)
    );
    let mut ids: Vec<&str> = handles.iter().map(|h| h.spec.handle_id.as_str()).collect();
    ids.sort();
    assert_eq!(
        ids,
        [
            "net.a1", "net.a2", "net.a3", "net.a4", "net.a5", "net.a6", "net.a7", "net.a8",
            "net.a9"
        ]
    );
    assert!(weps.iter().all(|w| w.spec.node == "n1"));
    assert!(affs.iter().all(|a| a.spec.node == "n1"), "{affs:?}");
    assert!(affs.iter().all(
        |a| a.metadata.labels.as_ref().and_then(|l| l.get(NODE_LABEL)) == Some(&"n1".to_string())
    ));
    // One dead node's block lent n1 an address: it stays until that is
    // released; the other's block is gone.
    let dead_blocks: Vec<&IpamBlock> = blocks
        .iter()
        .filter(|b| matches!(b.spec.affine_node(), Some("n2" | "n3")))
        .collect();
    assert_eq!(dead_blocks.len(), 1, "{blocks:?}");
    let lent = &dead_blocks[0].spec;
    assert!(tartan_cni::ipam::block::in_use(lent) >= 1);
    assert!(
        lent.attributes.iter().all(|a| a.secondary["node"] == "n1"),
        "{lent:?}"
    );
    assert_eq!(r.blocks, 1);

    // A further pass has nothing left to do.
    let again = gc.pass(&*s, 1010).await.unwrap();
    assert_eq!(
        (again.addresses, again.handles, again.blocks, again.labelled),
        (0, 0, 0, 0)
    );
}

#[tokio::test]
async fn nothing_goes_without_any_node_or_when_the_node_returns() {
    let s = store();
    s.create_typed(&IpPool::new("p", IpPoolSpec::new("10.10.0.0/24")))
        .await
        .unwrap();
    node(&s, "n1").await;
    pod(&s, "n1", "a").await;
    s.delete_typed::<Node>(None, "n1", None).await.unwrap();
    let mut gc = Collector::new(0);
    let r = gc.pass(&*s, 0).await.unwrap();
    assert_eq!(
        r,
        Default::default(),
        "no Nodes at all: nothing is released"
    );
    // Another node appears; n1 is missing, then back before the grace.
    node(&s, "n2").await;
    let mut gc = Collector::new(10);
    assert!(gc.pass(&*s, 0).await.unwrap().gone.is_empty());
    node(&s, "n1").await;
    assert!(gc.pass(&*s, 20).await.unwrap().gone.is_empty());
    assert_eq!(all::<IpamHandle>(&s).await.len(), 1);
}

#[tokio::test]
async fn the_bgp_status_reports_of_deleted_nodes_go_and_live_ones_stay() {
    use tartan_api::resources::{BgpNodeStatus, BgpNodeStatusSpec};
    let s = store();
    for n in ["n1", "n2"] {
        node(&s, n).await;
    }
    for n in ["n1", "n2", "n3"] {
        let spec = BgpNodeStatusSpec {
            node: n.into(),
            updated: 1,
            refresh_seconds: 30,
            router_id: "192.0.2.1".into(),
            asn: 64512,
            sessions: vec![],
        };
        s.create_typed(&BgpNodeStatus::new(n, spec)).await.unwrap();
    }
    let mut gc = Collector::new(5);
    let r = gc.pass(&*s, 1000).await.unwrap();
    assert_eq!(r.reports, 1, "{r:?}");
    let mut left: Vec<String> = all::<BgpNodeStatus>(&s)
        .await
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    left.sort();
    assert_eq!(left, ["n1", "n2"]);
    assert_eq!(gc.pass(&*s, 1001).await.unwrap().reports, 0);
}
