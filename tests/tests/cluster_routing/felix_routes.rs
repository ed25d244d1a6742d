//! tartan-felix keeps a node's local routes: the blackhole of each block
//! the node holds and each pod's route, both with protocol 202; it puts
//! back what is removed by hand, removes stale routes of its own after a
//! grace period, never touches routes of other protocols, and leaves the
//! dataplane in place when it stops.

use std::time::Duration;

use tartan_lab::Daemon;
use tartan_lab::cni::tartan_bin_dir;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::{Netns, wait_for};
use tartan_tests::felix_http_get;

fn routes(ns: &Netns) -> String {
    ns.ip(&["route", "show", "proto", "202"]).unwrap()
}

fn wait_route(ns: &Netns, what: &str, present: bool) {
    wait_for(what, Duration::from_secs(10), || {
        (routes(ns).contains(what) == present).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}; routes now:\n{}", routes(ns)));
}

/// felix on the lab's only node, comparing with the kernel every
/// `resync` seconds.
fn start_felix(lab: &CniLab, resync: &str, extra: &[&str]) -> Daemon {
    let node = &lab.underlay.node(0).netns;
    let mut cmd = node.command(tartan_bin_dir().join("tartan-felix").to_str().unwrap());
    cmd.args([
        "--datastore",
        &lab.etcd.datastore_spec(),
        "--node",
        "node-1",
        "--resync-seconds",
        resync,
    ])
    .args(extra);
    Daemon::start("felix", cmd).unwrap()
}

#[test]
fn felix_keeps_pod_routes_and_block_blackholes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.86.0.0/16");
    let node = &lab.underlay.node(0).netns;
    let felix = start_felix(&lab, "1", &["--grace-seconds", "2"]);
    let rt = lab.plain(0);
    let (_pod, call) = lab.pod("default", "p").unwrap();
    let r = rt.add(&call).unwrap();
    let addr = r["ips"][0]["address"].as_str().unwrap().to_string();
    let host = r["interfaces"][0]["name"].as_str().unwrap().to_string();
    wait_route(node, "blackhole 10.86.0.0/26", true);
    wait_route(
        node,
        &format!("{} dev {host}", addr.trim_end_matches("/32")),
        true,
    );

    // Health: live, ready after the first apply; metrics count the work.
    let ready = wait_for("felix ready", Duration::from_secs(10), || {
        let r = felix_http_get(node, "/readyz");
        r.starts_with("HTTP/1.0 200").then_some(r)
    });
    assert!(ready.is_ok(), "{:?}", felix_http_get(node, "/readyz"));
    assert!(felix_http_get(node, "/livez").starts_with("HTTP/1.0 200"));
    let installed = |m: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix("tartan_felix_routes_installed_total "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let counted = wait_for("routes counted", Duration::from_secs(10), || {
        (installed(&felix_http_get(node, "/metrics")) >= 1).then_some(())
    });
    assert!(counted.is_ok(), "{}", felix_http_get(node, "/metrics"));
    // Each check reads its own routes back, blackholes included, beside
    // routes of another protocol (bgpd's): none is written again.
    for i in 0..50 {
        node.ip(&[
            "route",
            "add",
            &format!("10.87.{i}.0/26"),
            "dev",
            "lo",
            "proto",
            "201",
        ])
        .unwrap();
    }
    let settled = installed(&felix_http_get(node, "/metrics"));
    std::thread::sleep(Duration::from_millis(3500));
    assert_eq!(
        installed(&felix_http_get(node, "/metrics")),
        settled,
        "a check wrote a route the kernel already had:\n{}",
        routes(node)
    );
    assert_eq!(
        node.ip(&["route", "show", "proto", "201"])
            .unwrap()
            .lines()
            .count(),
        50
    );
    // Services on (the default): the service table and kube-proxy's
    // health port are felix's (the contrast to `--services off` below).
    assert!(
        node.exec("nft", &["list", "table", "ip", "tartan-svc"])
            .is_ok()
    );
    assert!(
        listening(node, 10256),
        "{}",
        node.exec("ss", &["-ltn"]).unwrap_or_default()
    );

    // Removed by hand: back within the resync period.
    node.ip(&["route", "del", &addr]).unwrap();
    wait_route(
        node,
        &format!("{} dev {host}", addr.trim_end_matches("/32")),
        true,
    );
    node.ip(&["route", "del", "blackhole", "10.86.0.0/26"])
        .unwrap();
    wait_route(node, "blackhole 10.86.0.0/26", true);

    // A stale route of ours goes after the grace period; other protocols'
    // routes stay.
    node.ip(&[
        "route",
        "add",
        "10.86.200.1/32",
        "dev",
        "lo",
        "proto",
        "202",
    ])
    .unwrap();
    node.ip(&[
        "route",
        "add",
        "10.86.200.2/32",
        "dev",
        "lo",
        "proto",
        "201",
    ])
    .unwrap();
    node.ip(&["route", "add", "10.86.200.3/32", "dev", "lo"])
        .unwrap();
    wait_route(node, "10.86.200.1", false);
    let all = node.ip(&["route", "show"]).unwrap();
    assert!(
        all.contains("10.86.200.2") && all.contains("10.86.200.3"),
        "{all}"
    );

    // Stopping felix leaves the dataplane as it is.
    felix.stop();
    let before = routes(node);
    assert!(before.contains("blackhole 10.86.0.0/26"), "{before}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(routes(node), before);

    // With felix back, a pod's deletion takes its route away.
    let _felix = lab.start_felix(0).unwrap();
    rt.del(&call, Some(&r)).unwrap();
    wait_route(node, &host, false);
    assert!(routes(node).contains("blackhole 10.86.0.0/26"));
}

/// Whether something listens on TCP `port` in `ns`.
fn listening(ns: &Netns, port: u16) -> bool {
    ns.exec("ss", &["-Hltn"])
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.split_whitespace()
                .nth(3)
                .is_some_and(|a| a.ends_with(&format!(":{port}")))
        })
}

/// `--services off` (kube-proxy implements Services): felix removes the
/// service table an earlier felix left, writes none, leaves kube-proxy's
/// health port (10256) alone, and still routes. With `--log-format json`
/// every line it logs is one JSON object.
#[test]
fn services_off_leaves_services_to_kube_proxy() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.84.0.0/16");
    let node = &lab.underlay.node(0).netns;
    // As a felix with Services on leaves it.
    node.exec("nft", &["add", "table", "ip", "tartan-svc"])
        .unwrap();
    let felix = start_felix(&lab, "1", &["--services", "off", "--log-format", "json"]);
    let (_pod, call) = lab.pod("default", "p").unwrap();
    let r = lab.plain(0).add(&call).unwrap();
    let addr = r["ips"][0]["address"].as_str().unwrap().to_string();
    wait_route(node, &format!("{} dev", addr.trim_end_matches("/32")), true);
    wait_for("felix ready", Duration::from_secs(10), || {
        felix_http_get(node, "/readyz")
            .starts_with("HTTP/1.0 200")
            .then_some(())
    })
    .unwrap();
    let svc_table = || {
        node.exec("nft", &["list", "table", "ip", "tartan-svc"])
            .is_ok()
    };
    wait_for("service table removed", Duration::from_secs(10), || {
        (!svc_table()).then_some(())
    })
    .unwrap();
    // Two periodic checks later it is still not written.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        !svc_table(),
        "{}",
        node.exec("nft", &["list", "ruleset"]).unwrap_or_default()
    );
    assert!(
        !listening(node, 10256),
        "{}",
        node.exec("ss", &["-ltn"]).unwrap_or_default()
    );
    let log = felix.log();
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(lines.len() >= 2, "{log}");
    for l in &lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["level"].is_string() && v["fields"].is_object(), "{l}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("removed the service table")),
        "{log}"
    );
    lab.plain(0).del(&call, Some(&r)).unwrap();
}

/// natOutgoing: a pod reaches an address outside every pool (the
/// underlay's gateway, which knows no pod routes) only while its pool
/// masquerades; the NAT table comes back if flushed by hand.
#[test]
fn nat_outgoing_masquerades_traffic_leaving_the_pools() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    use tartan_api::resources::{IpPool, IpPoolSpec};
    use tartan_api::store::typed::TypedStore;
    let lab = CniLab::new(1).unwrap();
    let mut spec = IpPoolSpec::new("10.89.0.0/16");
    spec.nat_outgoing = true;
    let pool = lab
        .rt
        .block_on(lab.store.create_typed(&IpPool::new("nat", spec)))
        .unwrap();
    let node = &lab.underlay.node(0).netns;
    let _felix = lab.start_felix(0).unwrap();
    let (pod, call) = lab.pod("default", "p").unwrap();
    let r = lab.plain(0).add(&call).unwrap();
    let outside = lab.underlay.gateway.to_string();
    let ping = || pod.exec("ping", &["-c1", "-W1", &outside]).is_ok();
    wait_for("masqueraded ping", Duration::from_secs(10), || {
        ping().then_some(())
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            node.exec("nft", &["list", "ruleset"]).unwrap_or_default()
        )
    });
    // Flushed by hand: back at the next check.
    node.exec("nft", &["delete", "table", "ip", "tartan-nat"])
        .unwrap();
    wait_for("NAT table restored", Duration::from_secs(10), || {
        node.exec("nft", &["list", "table", "ip", "tartan-nat"])
            .ok()
    })
    .unwrap();
    // natOutgoing off: the outside no longer answers the pod.
    let mut off = pool.clone();
    off.spec.nat_outgoing = false;
    lab.rt.block_on(lab.store.update_typed(&off)).unwrap();
    wait_for("masquerade gone", Duration::from_secs(10), || {
        (!ping()).then_some(())
    })
    .unwrap();
    lab.plain(0).del(&call, Some(&r)).unwrap();
}

/// With the periodic check an hour away, only netlink events can bring
/// back what is removed by hand: a pod's route and a block's blackhole
/// return within two seconds.
#[test]
fn netlink_events_repair_drift_between_checks() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.85.0.0/16");
    let node = &lab.underlay.node(0).netns;
    let _felix = start_felix(&lab, "3600", &[]);
    let rt = lab.plain(0);
    let (_pod, call) = lab.pod("default", "p").unwrap();
    let r = rt.add(&call).unwrap();
    let addr = r["ips"][0]["address"].as_str().unwrap().to_string();
    let host = r["interfaces"][0]["name"].as_str().unwrap().to_string();
    let pod_route = format!("{} dev {host}", addr.trim_end_matches("/32"));
    wait_route(node, "blackhole 10.85.0.0/26", true);
    wait_route(node, &pod_route, true);
    for (del, want) in [
        (vec!["route", "del", addr.as_str()], pod_route.as_str()),
        (
            vec!["route", "del", "blackhole", "10.85.0.0/26"],
            "blackhole 10.85.0.0/26",
        ),
    ] {
        node.ip(&del).unwrap();
        let back = wait_for(want, Duration::from_secs(2), || {
            routes(node).contains(want).then_some(())
        });
        assert!(
            back.is_ok(),
            "{want} not back within 2 s:\n{}",
            routes(node)
        );
    }
    rt.del(&call, Some(&r)).unwrap();
}

/// felix's counter `name` (its `_total` for a counter), which must be there.
fn metric(ns: &Netns, name: &str) -> u64 {
    let m = felix_http_get(ns, "/metrics");
    m.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{m}"))
}

/// Between checks felix compares with the routes it last read and has
/// written since, corrected by what the kernel's events say: pods come
/// and go without their passes reading the kernel's table (with bgpd's
/// thousands of routes in it, that read was most of a pass). A route
/// removed by hand comes back from its deletion event; a pod interface
/// made again under the same name, or taken down and up, gets its route
/// back at the next pass, though the kernel dropped it without a word;
/// an IPv4 address removed (after which the kernel drops routes without
/// naming them) makes felix read the table.
#[test]
fn passes_between_checks_do_not_read_the_route_table() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.82.0.0/16");
    let node = &lab.underlay.node(0).netns;
    // No periodic check during the test.
    let _felix = start_felix(&lab, "3600", &[]);
    let rt = lab.plain(0);
    let mut pods = Vec::new();
    // A pod added, its route in: its address and host interface, and
    // what deletes it.
    let add = |name: &str| {
        let (pod, call) = lab.pod("default", name).unwrap();
        let r = rt.add(&call).unwrap();
        let addr = r["ips"][0]["address"].as_str().unwrap();
        let addr = addr.trim_end_matches("/32").to_string();
        let host = r["interfaces"][0]["name"].as_str().unwrap().to_string();
        wait_route(node, &format!("{addr} dev {host}"), true);
        (addr, host, (pod, call, r))
    };
    let reads = || metric(node, "tartan_felix_route_reads_total");
    let installed = || metric(node, "tartan_felix_routes_installed_total");
    // Waits for felix to have put `addr`'s route back through `host` (the
    // count of installs moves after the pass has counted its reads).
    let restored = |addr: &str, host: &str, before: u64| {
        wait_route(node, &format!("{addr} dev {host}"), true);
        wait_for("the install counted", Duration::from_secs(10), || {
            (installed() > before).then_some(())
        })
        .unwrap();
    };
    let (a, host_a, pod) = add("a");
    pods.push(pod);
    wait_for("felix ready", Duration::from_secs(10), || {
        felix_http_get(node, "/readyz")
            .starts_with("HTTP/1.0 200")
            .then_some(())
    })
    .unwrap();
    let first = reads();
    assert!(first >= 1);
    let (b, _, (_pod_b, call_b, r_b)) = add("b");
    let (c, host_c, pod) = add("c");
    pods.push(pod);
    let (d, _, (_pod_d, call_d, r_d)) = add("d");
    // felix has seen d: its block's blackhole and a, b, c, d.
    let desired = |n: u64| {
        wait_for("felix's pass", Duration::from_secs(10), || {
            (metric(node, "tartan_felix_routes_desired") == n).then_some(())
        })
        .unwrap()
    };
    desired(5);
    rt.del(&call_b, Some(&r_b)).unwrap();
    wait_route(node, &format!("{b} "), false);
    // felix has seen b's endpoint go.
    desired(4);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(reads(), first, "a pass for a pod read the route table");

    // a's interface deleted and made again by hand: the kernel dropped
    // its route silently; the next pass (for d's deletion) puts it back
    // through the new interface.
    node.ip(&["link", "del", &host_a]).unwrap();
    node.ip(&[
        "link", "add", &host_a, "type", "veth", "peer", "name", "tmp82a",
    ])
    .unwrap();
    node.ip(&["link", "set", &host_a, "up"]).unwrap();
    assert!(!routes(node).contains(&format!("{a} dev")));
    let before = installed();
    rt.del(&call_d, Some(&r_d)).unwrap();
    wait_route(node, &format!("{d} "), false);
    restored(&a, &host_a, before);
    assert_eq!(reads(), first);

    // c's interface down and up again: same interface, route gone; the
    // next pass (for e's addition) puts it back.
    node.ip(&["link", "set", &host_c, "down"]).unwrap();
    node.ip(&["link", "set", &host_c, "up"]).unwrap();
    assert!(!routes(node).contains(&format!("{c} dev")));
    let before = installed();
    let (_, _, pod) = add("e");
    pods.push(pod);
    restored(&c, &host_c, before);
    assert_eq!(reads(), first);

    // Removed by hand: the kernel's event says which; felix puts it back
    // without reading.
    let before = installed();
    node.ip(&["route", "del", &c]).unwrap();
    restored(&c, &host_c, before);
    assert_eq!(reads(), first);

    // An IPv4 address removed: felix reads its routes back.
    node.ip(&["addr", "add", "192.0.2.82/32", "dev", "lo"])
        .unwrap();
    node.ip(&["addr", "del", "192.0.2.82/32", "dev", "lo"])
        .unwrap();
    wait_for(
        "a read after the address went",
        Duration::from_secs(10),
        || (reads() == first + 1).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}: {} reads", reads()));
    for (_, call, r) in &pods {
        rt.del(call, Some(r)).unwrap();
    }
}
