//! `two-subnets`: node-1 and node-2 on one subnet, node-3 behind a router
//! that knows no pod routes. With vxlanMode CrossSubnet, traffic to node-3
//! is VXLAN on the wire and traffic between node-1 and node-2 native;
//! with Always everything is VXLAN; with Never the router drops what
//! crosses it. The VXLAN device and a route removed by hand come back.
//!
//! The wire is read with nftables counters: on node-1's underlay
//! interface (egress) and in the router (forwarded packets), each
//! counting VXLAN (UDP 4789) and plain pod-addressed packets.

use std::time::Duration;

use tartan_api::resources::IpPool;
use tartan_api::resources::ippool::EncapMode;
use tartan_api::store::typed::TypedStore;
use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::up::runtime;
use tartan_lab::netns::{ip, wait_for};
use tartan_lab::wire::{Seen, WireCounters};

const POOL: &str = "10.244.0.0/16";

/// `ip -n NETNS ARGS…`'s output; empty when it fails.
fn ip_in(netns: &str, args: &[&str]) -> String {
    let mut a = vec!["-n", netns];
    a.extend_from_slice(args);
    ip(&a).unwrap_or_default()
}

/// Pings from `from` to `to`; what node-1 sent and the router forwarded
/// meanwhile.
fn ping_and_count(
    lab: &LabCli,
    node1: &WireCounters,
    router: &WireCounters,
    from: &str,
    to: &str,
) -> (Seen, Seen) {
    let ip = lab.ok(&["pod", "ip", to]).trim().to_string();
    let (n0, r0) = (node1.read().unwrap(), router.read().unwrap());
    let (code, out, err) = lab.run(&["exec", from, "--", "ping", "-c5", "-i0.2", "-W2", &ip]);
    assert_eq!(code, 0, "{from} -> {to} ({ip}):\n{out}{err}");
    (node1.read().unwrap() - n0, router.read().unwrap() - r0)
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    wait_for(what, timeout, || f().then_some(())).unwrap();
}

/// Waits up to `secs` seconds (failing with `what`) until `netns`'s
/// routing table has a route containing `route`.
fn wait_route(netns: &str, route: &str, what: &str, secs: u64) {
    wait_until(what, Duration::from_secs(secs), || {
        ip_in(netns, &["route"]).contains(route)
    });
}

fn set_mode(datastore: &str, mode: EncapMode) {
    let rt = runtime().unwrap();
    rt.block_on(async {
        let store = tartan_api::store::connect(datastore, Some(Duration::from_secs(5)))
            .await
            .unwrap();
        let mut p: IpPool = store.get_typed(None, "default-ipv4").await.unwrap();
        p.spec.vxlan_mode = mode;
        store.update_typed(&p).await.unwrap();
    });
}

#[test]
fn cross_subnet_vxlan_always_never_and_drift_repair() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let (lab, out) = tartan_tests::lab_up("vxl", &["--nodes", "3", "--topology", "two-subnets"]);
    assert!(out.contains("vxlanMode CrossSubnet"), "{out}");
    let state = tartan_tests::state_json(&lab);
    let datastore = state["datastore"].as_str().unwrap().to_string();
    let node_ns = |i: usize| state["nodes"][i]["netns"].as_str().unwrap().to_string();
    let node_ip = |i: usize| state["nodes"][i]["address"].as_str().unwrap().to_string();
    let n1 = node_ns(0);
    let router_ns = format!("{}-router", lab.name);

    let bad = lab.pods_on_nodes_reach_all(&["default/p1", "default/p2", "default/p3"], 25);
    assert!(
        bad.is_empty(),
        "unreachable pairs: {bad:?}\nnode-1 routes:\n{}",
        ip_in(&n1, &["route"])
    );

    // Routes on node-1: felix's (protocol 202) for the pool, none of bgpd's.
    let felix_routes = ip_in(&n1, &["route", "show", "proto", "202"]);
    let bgpd_routes = ip_in(&n1, &["route", "show", "proto", "201"]);
    assert!(
        !bgpd_routes.contains("10.244."),
        "bgpd installed routes felix owns:\n{bgpd_routes}"
    );
    assert!(
        felix_routes.contains(&format!("via {} dev eth0", node_ip(1))),
        "node-2 natively:\n{felix_routes}"
    );
    assert!(
        felix_routes.contains(&format!("via {} dev tartan.vxlan", node_ip(2))),
        "node-3 through the tunnel:\n{felix_routes}"
    );

    let node1 = WireCounters::install(&n1, "postrouting", Some("eth0"), POOL).unwrap();
    let router = WireCounters::install(&router_ns, "forward", None, POOL).unwrap();

    // CrossSubnet: same subnet native, the other subnet encapsulated.
    let (n, r) = ping_and_count(&lab, &node1, &router, "default/p1", "default/p2");
    assert!(
        n.vxlan == 0 && n.plain >= 5,
        "p1->p2 should be native: node-1 {n:?}"
    );
    assert_eq!(r, Seen::default(), "p1->p2 does not cross the router");
    let (n, r) = ping_and_count(&lab, &node1, &router, "default/p1", "default/p3");
    assert!(
        n.vxlan >= 5 && n.plain == 0,
        "p1->p3 should be VXLAN: node-1 {n:?}"
    );
    assert!(
        r.vxlan >= 10 && r.plain == 0,
        "the router forwards VXLAN both ways and no bare pod packet: {r:?}"
    );

    // Always: node-1 to node-2 goes through the tunnel too.
    set_mode(&datastore, EncapMode::Always);
    let to_node2 = format!("via {} dev tartan.vxlan", node_ip(1));
    wait_route(&n1, &to_node2, "node-2's block through tartan.vxlan", 15);
    let (n, _) = ping_and_count(&lab, &node1, &router, "default/p1", "default/p2");
    assert!(
        n.vxlan >= 5 && n.plain == 0,
        "p1->p2 should be VXLAN under Always: {n:?}"
    );

    // Drift: the device and a route removed by hand come back.
    // felix re-creates it at once (a netlink event): a new interface index
    // tells the new device from the old.
    let index = |s: String| s.split(':').next().unwrap_or("").trim().to_string();
    let before = index(ip_in(&n1, &["-o", "link", "show", "tartan.vxlan"]));
    ip_in(&n1, &["link", "del", "tartan.vxlan"]);
    wait_until(
        "tartan.vxlan and its routes back",
        Duration::from_secs(15),
        || {
            let r = ip_in(&n1, &["route"]);
            r.contains(&to_node2) && r.contains(&format!("via {} dev tartan.vxlan", node_ip(2)))
        },
    );
    let after = index(ip_in(&n1, &["-o", "link", "show", "tartan.vxlan"]));
    assert!(
        !before.is_empty() && before != after,
        "the device was not re-created ({before} -> {after})"
    );
    assert!(
        lab.wait_reach("default/p1", "default/p3", Duration::from_secs(5)),
        "p1->p3 after the device came back"
    );

    // Never: bgpd routes the pool again; nothing crosses the router.
    set_mode(&datastore, EncapMode::Never);
    let native = format!("via {} dev eth0 proto 201", node_ip(1));
    wait_route(&n1, &native, "bgpd's route to node-2's block", 20);
    wait_until("no tunnel device", Duration::from_secs(10), || {
        !ip_in(&n1, &["link", "show"]).contains("tartan.vxlan")
    });
    assert!(lab.wait_reach("default/p1", "default/p2", Duration::from_secs(5)));
    assert!(
        !lab.reach("default/p1", "default/p3"),
        "the router knows no pod routes: p1->p3 must fail without VXLAN"
    );
}
