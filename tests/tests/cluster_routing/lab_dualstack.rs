//! `tartan-lab up --dual-stack`: nodes with IPv4 and IPv6 addresses peer
//! over both, each family's blocks travel on their own sessions, and every
//! pod reaches every other over IPv4 and IPv6.

use std::time::Duration;

#[test]
fn pods_reach_each_other_over_both_families() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::lab_up_with_sessions(
        "dst",
        &["--nodes", "3", "--dual-stack"],
        "3 nodes, 6 BGP sessions",
        &[4, 4, 4],
        "two peers, two families each",
    );
    let pods = ["default/p1", "default/p2", "default/p3"];
    let bad = lab.pods_on_nodes_reach_all(&pods, 25);
    assert!(bad.is_empty(), "IPv4: unreachable pairs: {bad:?}");
    for a in pods {
        for b in pods.iter().filter(|b| **b != a) {
            let ok = (0..20).any(|_| {
                lab.reach6(a, b) || {
                    std::thread::sleep(Duration::from_millis(300));
                    false
                }
            });
            assert!(ok, "IPv6: {a} does not reach {b}");
        }
    }
    // The IPv6 route to another node's block is bgpd's, via its IPv6
    // address.
    let routes = std::process::Command::new("ip")
        .args([
            "-n",
            &format!("{}-node-1", lab.name),
            "-6",
            "route",
            "show",
            "proto",
            "201",
        ])
        .output()
        .unwrap();
    let routes = String::from_utf8_lossy(&routes.stdout);
    assert_eq!(routes.matches("fd00:10:244:").count(), 2, "{routes}");
    assert!(routes.contains("via fd00:213:"), "{routes}");
}
