//! Five nodes, mesh off, node-1 and node-2 as route reflectors: sessions
//! only client-reflector and reflector-reflector, every pod reaches every
//! other, and killing a reflector loses no reachability.

use std::process::Command;

use std::time::Duration;

#[test]
fn route_reflectors_carry_the_cluster_and_survive_losing_one() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    // 1 reflector-reflector session + 3 clients x 2 reflectors.
    let lab = tartan_tests::lab_up_with_sessions(
        "rr",
        &["--nodes", "5", "--topology", "rr"],
        "5 nodes, 7 BGP sessions (route reflectors",
        &[4, 4, 2, 2, 2],
        "reflectors: each other and the 3 clients; clients: the 2 reflectors",
    );

    let pods = ["default/p1", "default/p3", "default/p4", "default/p5"];
    for (p, node) in pods.iter().zip(["node-1", "node-3", "node-4", "node-5"]) {
        lab.ok(&["pod", "add", p, "--node", node]);
    }
    let bad = lab.wait_all(&pods, 10);
    assert!(bad.is_empty(), "unreachable pairs: {bad:?}");

    // Kill node-1's speaker outright: node-2 still reflects everything.
    let state = tartan_tests::state_json(&lab);
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
