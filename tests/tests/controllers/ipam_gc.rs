//! A deleted Node's IPAM records (blocks, affinities, handles,
//! WorkloadEndpoints) are released by tartan-controllers within 30 s, a
//! live node's stay, and `tartanctl ipam check` is clean afterwards.

use std::time::{Duration, Instant};

use serde_json::Value;
use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::detached;
use tartan_lab::cluster::svcprobe::poll;
use tartan_tests::services::*;

/// The stored objects of `kind` (cluster-wide) as JSON.
fn items(lab: &LabCli, kind: &str) -> Vec<Value> {
    let mut args = vec!["ctl", "get", kind, "-o", "json"];
    if kind == "workloadendpoints" {
        args.push("--all-namespaces");
    }
    let out = lab.ok(&args);
    let v: Value = serde_json::from_str(&out).unwrap();
    match v.get("items") {
        Some(Value::Array(a)) => a.clone(),
        _ if v.get("kind").is_some() => vec![v],
        _ => vec![],
    }
}

/// How many records of each kind name `node`.
fn records_of(lab: &LabCli, node: &str) -> [usize; 4] {
    let blocks = items(lab, "ipamblocks")
        .iter()
        .filter(|b| b["spec"]["affinity"] == format!("host:{node}"))
        .count();
    let affinities = items(lab, "blockaffinities")
        .iter()
        .filter(|a| a["spec"]["node"] == node)
        .count();
    let weps = items(lab, "workloadendpoints")
        .iter()
        .filter(|w| w["spec"]["node"] == node)
        .count();
    let held = items(lab, "ipamblocks")
        .iter()
        .flat_map(|b| {
            b["spec"]["attributes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|a| a["secondary"]["node"] == node)
        .count();
    [blocks, affinities, weps, held]
}

#[test]
fn a_deleted_nodes_ipam_records_are_released_within_30_s() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let (lab, _) = tartan_tests::lab_up("cgc", &["--nodes", "3"]);
    for (pod, node) in [
        ("default/a", "node-1"),
        ("default/c1", "node-3"),
        ("default/c2", "node-3"),
    ] {
        lab.ok(&["pod", "add", pod, "--node", node]);
    }
    let before = records_of(&lab, "node-3");
    assert_eq!(before, [1, 1, 2, 2], "node-3's block, affinity, 2 pods");
    let handles_before = items(&lab, "ipamhandles").len();
    assert_eq!(handles_before, 3);
    let out = lab.ok(&["ctl", "ipam", "check"]);
    assert!(out.starts_with("ok:"), "{out}");

    // node-3 dies: its daemons stop and its Node is deleted.
    let st = lab_state(&lab);
    for p in [&st.nodes[2].bgpd, &st.nodes[2].felix]
        .into_iter()
        .flatten()
    {
        detached::stop(p, Duration::ZERO);
    }
    let t = Instant::now();
    lab.ok(&["ctl", "delete", "node", "node-3"]);
    let gone = poll(Duration::from_secs(30), || {
        (records_of(&lab, "node-3") == [0, 0, 0, 0]).then_some(t.elapsed())
    });
    let took = gone.unwrap_or_else(|| {
        panic!(
            "node-3's records left after 30 s: {:?} (blocks, affinities, endpoints, addresses)",
            records_of(&lab, "node-3")
        )
    });
    eprintln!("node-3's IPAM records released {took:?} after its Node was deleted");
    assert_eq!(items(&lab, "ipamhandles").len(), 1, "node-1's handle stays");
    assert_eq!(records_of(&lab, "node-1"), [1, 1, 1, 1]);
    let out = lab.ok(&["ctl", "ipam", "check"]);
    assert!(out.starts_with("ok:"), "{out}");
    // The leader said what it released.
    let logs: String = st
        .controllers
        .iter()
        .map(|p| std::fs::read_to_string(&p.log).unwrap_or_default())
        .collect();
    assert_eq!(
        logs.matches("released the address of a deleted node")
            .count(),
        2,
        "{logs}"
    );
}
