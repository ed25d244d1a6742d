//! Five nodes, mesh off, node-1 and node-2 as route reflectors: sessions
//! only client-reflector and reflector-reflector, every pod reaches every
//! other, and killing a reflector loses no reachability.

use std::process::Command;

use std::time::Duration;
use tartan_lab::cluster::client::LabCli;

#[test]
fn route_reflectors_carry_the_cluster_and_survive_losing_one() {
    let lab = LabCli::new(env!("CARGO_BIN_EXE_tartan-lab"), "rr");
    let out = lab.ok(&["up", "--nodes", "5", "--topology", "rr"]);
    // 1 reflector-reflector session + 3 clients x 2 reflectors.
    assert!(
        out.contains("5 nodes, 7 BGP sessions (route reflectors"),
        "{out}"
    );
    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    let sessions: Vec<u64> = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["bgpSessionsEstablished"].as_u64().unwrap())
        .collect();
    assert_eq!(sessions, [4, 4, 2, 2, 2]);

    let pods = ["default/p1", "default/p3", "default/p4", "default/p5"];
    for (p, node) in pods.iter().zip(["node-1", "node-3", "node-4", "node-5"]) {
        lab.ok(&["pod", "add", p, "--node", node]);
    }
    let bad = wait_all(&lab, &pods);
    assert!(bad.is_empty(), "unreachable pairs: {bad:?}");

    // Kill node-1's speaker outright: node-2 still reflects everything.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("/run/tartan-lab/{}/state.json", lab.name)).unwrap(),
    )
    .unwrap();
    let pid = state["nodes"][0]["bgpd"]["pid"].as_u64().unwrap();
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    // Past the 9 s hold time, the clients have dropped node-1's session.
    std::thread::sleep(Duration::from_secs(11));
    let clients = ["default/p3", "default/p4", "default/p5"];
    let bad = lab.all_pairs(&clients);
    assert!(bad.is_empty(), "lost with one reflector gone: {bad:?}");
}

/// Reachability settles within seconds of the pods' creation.
fn wait_all(lab: &LabCli, pods: &[&str]) -> Vec<(String, String)> {
    let mut bad = Vec::new();
    for _ in 0..10 {
        bad = lab.all_pairs(pods);
        if bad.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    bad
}
