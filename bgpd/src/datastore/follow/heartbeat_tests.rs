//! A kubelet's heartbeat (a Node write that changes its status and
//! resourceVersion only) must not make bgpd rebuild its configuration;
//! a change to what bgpd uses of a Node must.

use super::*;
use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tartan_api::store::typed::to_dynamic;

/// Node `n1` as its kubelet writes it at heartbeat `beat`.
fn node(beat: u32, ip: &str, labels: &[(&str, &str)]) -> DynamicObject {
    let mut n = super::super::tests::node("n1", ip, None, labels);
    n.metadata.resource_version = Some(format!("{}", 1000 + beat));
    n.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("node.alpha.kubernetes.io/ttl".into(), "0".into());
    let at = heartbeat_time(beat);
    n.status = Some(NodeStatus {
        conditions: Some(
            ["Ready", "MemoryPressure", "DiskPressure"]
                .iter()
                .map(|t| NodeCondition {
                    type_: t.to_string(),
                    status: if *t == "Ready" { "True" } else { "False" }.into(),
                    last_heartbeat_time: Some(at.clone()),
                    ..Default::default()
                })
                .collect(),
        ),
        ..Default::default()
    });
    to_dynamic(&n).unwrap()
}

/// A distinct time per heartbeat, 10 s apart.
fn heartbeat_time(beat: u32) -> Time {
    serde_json::from_value(serde_json::json!(format!(
        "2026-01-01T00:{:02}:{:02}Z",
        (beat * 10) / 60 % 60,
        (beat * 10) % 60
    )))
    .unwrap()
}

/// Every watched kind synced, with node `n1` in it; the rebuild that
/// completes the sync is due.
fn synced() -> Seen {
    let mut seen = Seen::new("n1");
    assert!(seen.apply(Kind::Node, WatchEvent::Added(node(0, "10.0.0.1", &[]))));
    let mut due = false;
    for kind in WATCHED {
        due |= seen.apply(
            kind,
            WatchEvent::Synced {
                revision: "1".into(),
            },
        );
    }
    assert!(due, "the end of the initial sync makes a rebuild due");
    seen
}

#[test]
fn heartbeats_cause_no_rebuild() {
    let mut seen = synced();
    let before = build(&seen.inputs("n1")).unwrap();
    let rebuilds = (1..=30)
        .filter(|beat| {
            seen.apply(
                Kind::Node,
                WatchEvent::Modified(node(*beat, "10.0.0.1", &[])),
            )
        })
        .count();
    assert_eq!(rebuilds, 0, "a heartbeat made bgpd rebuild");
    assert_eq!(build(&seen.inputs("n1")).unwrap(), before);
}

#[test]
fn a_change_bgpd_uses_rebuilds_and_reaches_the_configuration() {
    let mut seen = synced();
    let before = build(&seen.inputs("n1")).unwrap();
    assert!(seen.apply(
        Kind::Node,
        WatchEvent::Modified(node(1, "10.0.0.1", &[("rack", "a")]))
    ));
    assert!(!seen.apply(
        Kind::Node,
        WatchEvent::Modified(node(2, "10.0.0.1", &[("rack", "a")]))
    ));
    assert!(seen.apply(
        Kind::Node,
        WatchEvent::Modified(node(3, "10.0.0.9", &[("rack", "a")]))
    ));
    let after = build(&seen.inputs("n1")).unwrap();
    assert_ne!(after, before, "the new address reaches the configuration");
    // Each rebuild's inputs share the view's Nodes: 5,000 Nodes are not
    // copied per rebuild.
    let (x, y) = (seen.inputs("n1"), seen.inputs("n1"));
    assert!(std::sync::Arc::ptr_eq(&x.nodes[0], &y.nodes[0]));
    // Gone, then an unreadable version: both count as absent.
    assert!(seen.apply(Kind::Node, WatchEvent::Deleted(node(4, "10.0.0.9", &[]))));
    assert!(seen.inputs("n1").nodes.is_empty());
    let mut bad = node(5, "10.0.0.1", &[]);
    bad.data["spec"] = serde_json::json!("not an object");
    assert!(!seen.apply(Kind::Node, WatchEvent::Added(bad)));
    assert_eq!(seen.bad.count(Kind::Node), 1);
    assert!(seen.inputs("n1").nodes.is_empty());
}

/// A block or WorkloadEndpoint of the test's namespace `default`.
fn own_kind(kind: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    let ns = (kind == "WorkloadEndpoint").then_some("default");
    serde_json::from_value(serde_json::json!({
        "apiVersion": "tartan.dev/v1", "kind": kind,
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "7"},
        "spec": spec
    }))
    .unwrap()
}

fn block(name: &str, cidr: &str, node: &str, allocated: u32) -> DynamicObject {
    let mut spec = tartan_api::resources::IpamBlockSpec::empty(&cidr.parse().unwrap());
    spec.affinity = Some(format!("host:{node}"));
    for i in 0..allocated as usize {
        spec.allocations[i] = Some(0);
        spec.unallocated.retain(|u| *u as usize != i);
    }
    spec.attributes = vec![tartan_api::resources::AllocationAttributes {
        handle_id: Some("h".into()),
        secondary: Default::default(),
    }];
    own_kind("IPAMBlock", name, serde_json::to_value(spec).unwrap())
}

fn endpoint(name: &str, node: &str, ip: &str) -> DynamicObject {
    own_kind(
        "WorkloadEndpoint",
        name,
        serde_json::json!({"node": node, "pod": name, "containerID": "c", "endpoint": "eth0",
                           "interfaceName": "tar0", "ipNetworks": [ip]}),
    )
}

#[test]
fn other_nodes_blocks_and_pods_are_neither_kept_nor_rebuilt_for() {
    let mut seen = synced();
    let before = build(&seen.inputs("n1")).unwrap();
    // Another node's block and pods, then their changes and deletion.
    let mut due = seen.apply(
        Kind::IpamBlock,
        WatchEvent::Added(block("b2", "10.244.1.0/26", "n2", 0)),
    );
    for i in 0..50 {
        let w = endpoint(&format!("p{i}"), "n2", &format!("10.244.1.{}/32", i + 1));
        due |= seen.apply(Kind::WorkloadEndpoint, WatchEvent::Added(w));
    }
    due |= seen.apply(
        Kind::IpamBlock,
        WatchEvent::Modified(block("b2", "10.244.1.0/26", "n2", 50)),
    );
    due |= seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Deleted(endpoint("p0", "n2", "10.244.1.1/32")),
    );
    assert!(!due, "another node's block or pod made bgpd rebuild");
    let kept: usize = seen.objects.values().map(|m| m.len()).sum();
    assert_eq!(kept, 0, "another node's objects were kept");
    assert_eq!(build(&seen.inputs("n1")).unwrap(), before);
}

#[test]
fn own_blocks_and_pods_are_kept_and_only_what_is_announced_rebuilds() {
    let mut seen = synced();
    assert!(seen.apply(
        Kind::IpamBlock,
        WatchEvent::Added(block("b1", "10.244.0.0/26", "n1", 0))
    ));
    // An allocation in the node's own block changes nothing announced.
    assert!(!seen.apply(
        Kind::IpamBlock,
        WatchEvent::Modified(block("b1", "10.244.0.0/26", "n1", 3))
    ));
    let announced = build(&seen.inputs("n1")).unwrap().announce;
    // Pods wired with addresses of the node's own block, and gone again:
    // kept, but nothing announced changes, so no rebuild.
    for i in 1..=3 {
        let w = endpoint(&format!("own{i}"), "n1", &format!("10.244.0.{i}/32"));
        assert!(!seen.apply(Kind::WorkloadEndpoint, WatchEvent::Added(w)));
    }
    assert!(!seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Deleted(endpoint("own3", "n1", "10.244.0.3/32"))
    ));
    assert_eq!(seen.inputs("n1").endpoints.len(), 2);
    assert_eq!(build(&seen.inputs("n1")).unwrap().announce, announced);
    // A pod here with an address borrowed from another node's block.
    assert!(seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Added(endpoint("p", "n1", "10.244.1.9/32"))
    ));
    let inputs = seen.inputs("n1");
    assert_eq!((inputs.blocks.len(), inputs.endpoints.len()), (1, 3));
    assert_ne!(build(&seen.inputs("n1")).unwrap().announce, announced);
    // Moved into the node's block: its /32 is withdrawn, a rebuild.
    assert!(seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Modified(endpoint("p", "n1", "10.244.0.9/32"))
    ));
    assert_eq!(build(&seen.inputs("n1")).unwrap().announce, announced);
    // Back out, then deleted: each a rebuild.
    assert!(seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Modified(endpoint("p", "n1", "10.244.1.9/32"))
    ));
    assert!(seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Deleted(endpoint("p", "n1", "10.244.1.9/32"))
    ));
    // The block handed to another node leaves this node's view: its pods'
    // addresses are borrowed from then on, announced one by one.
    assert!(seen.apply(
        Kind::IpamBlock,
        WatchEvent::Modified(block("b1", "10.244.0.0/26", "n2", 3))
    ));
    assert!(seen.inputs("n1").blocks.is_empty());
    let hosts: Vec<String> = build(&seen.inputs("n1"))
        .unwrap()
        .announce
        .iter()
        .map(|a| a.prefix.to_string())
        .collect();
    assert_eq!(hosts, ["10.244.0.1/32", "10.244.0.2/32"]);
    // And a pod's change in what was the node's block now rebuilds.
    assert!(seen.apply(
        Kind::WorkloadEndpoint,
        WatchEvent::Deleted(endpoint("own2", "n1", "10.244.0.2/32"))
    ));
}

#[tokio::test]
async fn the_watches_of_blocks_and_pods_pass_on_and_remember_only_this_nodes() {
    use tartan_api::store::memory::MemoryStore;
    let mem = MemoryStore::new();
    for i in 0..20 {
        let node = format!("n{}", 2 + i % 4);
        let w = endpoint(&format!("p{i}"), &node, &format!("10.244.1.{}/32", i + 1));
        mem.create(w).await.unwrap();
    }
    mem.create(endpoint("mine", "n1", "10.244.0.5/32"))
        .await
        .unwrap();
    // Names no node bgpd can read: passed on, to be reported unreadable.
    let mut odd = endpoint("odd", "n1", "10.244.0.6/32");
    odd.data["spec"]["node"] = serde_json::json!(7);
    mem.create(odd).await.unwrap();
    mem.create(block("b1", "10.244.0.0/26", "n1", 0))
        .await
        .unwrap();
    mem.create(block("b2", "10.244.1.0/26", "n2", 0))
        .await
        .unwrap();
    let store: Arc<dyn Datastore> = Arc::new(mem);
    for (kind, shown) in [
        (Kind::WorkloadEndpoint, vec!["mine", "odd"]),
        (Kind::IpamBlock, vec!["b1"]),
    ] {
        let mut w = watch_of(store.clone(), kind, "n1");
        let mut names = Vec::new();
        loop {
            match w.next().await {
                WatchEvent::Added(o) => names.push(o.metadata.name.unwrap()),
                WatchEvent::Synced { .. } => break,
                e => panic!("{e:?}"),
            }
        }
        assert_eq!(names, shown, "{kind}");
        assert_eq!(w.remembered(), shown.len(), "{kind}");
    }
    // Every other kind is watched whole.
    let mut nodes = watch_of(store, Kind::BgpPeer, "n1");
    assert!(matches!(nodes.next().await, WatchEvent::Synced { .. }));
}

/// A change that arrives amid a steady stream of heartbeats (one every
/// millisecond, faster than the 2 ms a burst waits to go quiet) is built
/// a quiet spell after it: heartbeats do not put the rebuild off. And a
/// stream of changes that never goes quiet is built within the burst's
/// limit.
#[tokio::test(start_paused = true)]
async fn heartbeats_do_not_put_a_rebuild_off_and_changes_wait_at_most_the_limit() {
    use tartan_api::store::memory::MemoryStore;
    let unversioned = |beat: u32, ip: &str| {
        let mut n = node(beat, ip, &[]);
        n.metadata.resource_version = None;
        n
    };
    let mem = Arc::new(MemoryStore::new());
    let mut written = mem.create(unversioned(0, "10.0.0.1")).await.unwrap();
    let store: Arc<dyn Datastore> = mem.clone();
    let (tx, mut rx) = mpsc::channel(64);
    let follower = tokio::spawn(follow(store, "n1".into(), tx));
    let first = rx.recv().await.expect("the first configuration");
    // The address each write gives the node: the same for a heartbeat, a
    // new one for a change.
    let ip = Arc::new(std::sync::Mutex::new(String::from("10.0.0.1")));
    let beats = {
        let (mem, ip) = (mem.clone(), ip.clone());
        tokio::spawn(async move {
            for beat in 1.. {
                let at = ip.lock().unwrap().clone();
                let mut n = unversioned(beat, &at);
                n.metadata.resource_version = written.metadata.resource_version.take();
                written = mem.update(n).await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let changed = tokio::time::Instant::now();
    *ip.lock().unwrap() = "10.0.0.9".into();
    let next = tokio::time::timeout(Duration::from_secs(1), rx.recv())
        .await
        .expect("heartbeats kept the change from being built")
        .expect("a configuration");
    let waited = changed.elapsed();
    assert_ne!(next, first);
    assert!(
        waited <= BURST_QUIET + Duration::from_millis(5),
        "built {waited:?} after the change, amid heartbeats"
    );
    // Now a new address every millisecond: never quiet.
    let churn = {
        let ip = ip.clone();
        tokio::spawn(async move {
            for i in 0u32.. {
                *ip.lock().unwrap() = format!("10.0.{}.{}", 1 + i / 200 % 200, 1 + i % 200);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    let started = tokio::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(1), rx.recv())
        .await
        .expect("a stream of changes kept them from being built")
        .expect("a configuration");
    let waited = started.elapsed();
    assert!(
        waited <= BURST_LIMIT + Duration::from_millis(5),
        "built {waited:?} after the changes began"
    );
    churn.abort();
    beats.abort();
    follower.abort();
}
