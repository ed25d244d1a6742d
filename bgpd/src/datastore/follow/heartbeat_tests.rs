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
    // Gone, then an unreadable version: both count as absent.
    assert!(seen.apply(Kind::Node, WatchEvent::Deleted(node(4, "10.0.0.9", &[]))));
    assert!(seen.inputs("n1").nodes.is_empty());
    let mut bad = node(5, "10.0.0.1", &[]);
    bad.data["spec"] = serde_json::json!({"podCIDRs": "not a list"});
    assert!(!seen.apply(Kind::Node, WatchEvent::Added(bad)));
    assert_eq!(seen.bad.count(Kind::Node), 1);
    assert!(seen.inputs("n1").nodes.is_empty());
}
