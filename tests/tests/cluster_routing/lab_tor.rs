//! `tartan-lab up --topology tor`: the node-to-node mesh off, an AS per
//! node, every node in eBGP with a BIRD top-of-rack router. The ToR learns
//! every block from its node, the nodes learn each other's blocks from the
//! ToR, every pod reaches every other, and `down` leaves nothing behind.

use std::process::Command;

#[test]
fn nodes_reach_each_other_through_a_tor_router() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::lab_up_with_sessions(
        "tor",
        &["--nodes", "3", "--topology", "tor"],
        "3 nodes, 3 BGP sessions (eBGP to the top-of-rack router)",
        &[1, 1, 1],
        "one session each, to the ToR",
    );
    let bad = lab.pods_on_nodes_reach_all(&["default/p1", "default/p2", "default/p3"], 25);
    assert!(bad.is_empty(), "unreachable pairs: {bad:?}");

    // The ToR holds one block per node, each from the node's own AS.
    let tor = format!("{}-tor", lab.name);
    let sock = format!("/run/tartan-lab/{}/bird-tor.ctl", lab.name);
    let routes = Command::new("ip")
        .args(["netns", "exec", &tor, "birdc", "-s", &sock, "show", "route"])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout);
    for asn in ["AS64513i", "AS64514i", "AS64515i"] {
        assert!(routes.contains(asn), "no block from {asn}:\n{routes}");
    }
    assert_eq!(routes.matches("10.244.").count(), 3, "{routes}");

    lab.ok(&["down"]);
    let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&left.stdout).contains(&lab.name),
        "namespaces left"
    );
    let birds = Command::new("pgrep")
        .args(["-f", &format!("/run/tartan-lab/{}/", lab.name)])
        .output()
        .unwrap();
    assert!(birds.stdout.is_empty(), "processes left after down");
}
