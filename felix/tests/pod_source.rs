//! A pod may send only from its own addresses: felix's policy table drops
//! a packet from a pod's interface whose source is not routed back
//! through that interface, IPv4 and IPv6, forwarded or to the node, with
//! the host's `rp_filter` off. Real kernel: a node and two pods, each a
//! named network namespace, joined by veths as the CNI plugin joins them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tartan_felix::dataplane::nft::{NftDriver, Written};
use tartan_policy::compile::{Endpoint, compile};

mod common;
use common::{ok, run};

/// Named namespaces, deleted when dropped (also when the test fails).
struct Namespaces(Vec<String>);

impl Drop for Namespaces {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = run(&["ip", "netns", "del", n]);
        }
    }
}

fn inside(ns: &str, args: &[&str]) -> Vec<String> {
    ["ip", "netns", "exec", ns]
        .iter()
        .chain(args)
        .map(|s| s.to_string())
        .collect()
}

fn ok_in(ns: &str, args: &[&str]) {
    let v = inside(ns, args);
    ok(&v.iter().map(String::as_str).collect::<Vec<_>>());
}

fn ping_in(ns: &str, args: &[&str]) -> bool {
    let mut v = inside(ns, &["ping", "-c1", "-W1"]);
    v.extend(args.iter().map(|s| s.to_string()));
    run(&v.iter().map(String::as_str).collect::<Vec<_>>())
        .status
        .success()
}

/// Echo requests `ns` has received: `IcmpInEchos` (IPv4) or
/// `Icmp6InEchos` (IPv6).
fn echoes_in(ns: &str, v6: bool) -> u64 {
    let (file, key) = if v6 {
        ("/proc/net/snmp6", "Icmp6InEchos")
    } else {
        ("/proc/net/snmp", "IcmpInEchos")
    };
    let out = run(&inside(ns, &["cat", file])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    if v6 {
        return text
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().parse().unwrap()))
            .unwrap();
    }
    let mut icmp = text.lines().filter(|l| l.starts_with("Icmp:"));
    let (names, values) = (icmp.next().unwrap(), icmp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InEchos")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

fn endpoint(pod: &str, addrs: &[&str], iface: &str) -> Endpoint {
    Endpoint {
        namespace: "x".into(),
        labels: Arc::new([("pod".to_string(), pod.to_string())].into()),
        addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        ports: Arc::new([]),
        interface: Some(iface.to_string()),
    }
}

/// Write the policy table (two pods, no policy: everything allowed) in
/// the named namespace, from a thread that enters it.
fn write_policy_table(node: &str, a: &str, b: &str) {
    let path = format!("/run/netns/{node}");
    let (a, b) = (a.to_string(), b.to_string());
    std::thread::spawn(move || {
        let f = std::fs::File::open(&path).unwrap();
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let eps = vec![
            endpoint("a", &["10.0.0.1", "fd00::1"], &a),
            endpoint("b", &["10.0.0.2", "fd00::2"], &b),
        ];
        let rs = compile(&[], &eps, &[], &BTreeMap::new());
        let mut d: NftDriver<tartan_policy::compile::Ruleset> = NftDriver::default();
        assert!(matches!(
            d.apply(&rs, false, &|_| false).unwrap(),
            Written::Full(_)
        ));
        assert_eq!(d.apply(&rs, true, &|_| false).unwrap(), Written::Nothing);
    })
    .join()
    .unwrap();
}

#[test]
fn a_pod_cannot_send_from_an_address_that_is_not_its_own() {
    use std::os::unix::fs::MetadataExt;
    if !std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let tag = format!(
        "{}{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let (node, pa, pb) = (
        format!("tsrcn{tag}"),
        format!("tsrca{tag}"),
        format!("tsrcb{tag}"),
    );
    // Pod interfaces start with "tar" as the CNI plugin names them.
    let (ia, ib) = (format!("tar{tag}a"), format!("tar{tag}b"));
    let _guard = Namespaces(vec![node.clone(), pa.clone(), pb.clone()]);
    for n in [&node, &pa, &pb] {
        ok(&["ip", "netns", "add", n]);
    }
    for (iface, pod) in [(&ia, &pa), (&ib, &pb)] {
        ok(&[
            "ip", "link", "add", iface, "netns", &node, "type", "veth", "peer", "name", "eth0",
            "netns", pod,
        ]);
    }
    // The node: routes to each pod through its veth, forwarding on, and
    // the kernel's reverse-path filter off, so only the table can drop.
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv6.conf.all.forwarding", "1"),
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ] {
        ok_in(&node, &["sysctl", "-qw", &format!("{k}={v}")]);
    }
    for (iface, v4, v6) in [(&ia, "10.0.0.1", "fd00::1"), (&ib, "10.0.0.2", "fd00::2")] {
        ok_in(
            &node,
            &[
                "sysctl",
                "-qw",
                &format!("net.ipv4.conf.{iface}.rp_filter=0"),
            ],
        );
        ok_in(&node, &["ip", "link", "set", iface, "up"]);
        ok_in(&node, &["ip", "addr", "add", "10.200.0.1/32", "dev", iface]);
        ok_in(
            &node,
            &["ip", "addr", "add", "fe80::1/64", "dev", iface, "nodad"],
        );
        ok_in(&node, &["ip", "route", "add", v4, "dev", iface]);
        ok_in(&node, &["ip", "route", "add", v6, "dev", iface]);
    }
    ok_in(&node, &["ip", "addr", "add", "fd00:ff::1/128", "dev", "lo"]);
    ok_in(&node, &["ip", "link", "set", "lo", "up"]);
    for (pod, v4, v6) in [(&pa, "10.0.0.1", "fd00::1"), (&pb, "10.0.0.2", "fd00::2")] {
        ok_in(pod, &["ip", "link", "set", "eth0", "up"]);
        ok_in(pod, &["ip", "link", "set", "lo", "up"]);
        ok_in(
            pod,
            &["ip", "addr", "add", &format!("{v4}/32"), "dev", "eth0"],
        );
        ok_in(
            pod,
            &[
                "ip",
                "addr",
                "add",
                &format!("{v6}/128"),
                "dev",
                "eth0",
                "nodad",
            ],
        );
        ok_in(pod, &["ip", "route", "add", "10.200.0.1", "dev", "eth0"]);
        ok_in(pod, &["ip", "route", "add", "default", "via", "10.200.0.1"]);
        ok_in(
            pod,
            &[
                "ip", "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0",
            ],
        );
    }
    write_policy_table(&node, &ia, &ib);

    // Pod a from its own addresses: through, both families (the first
    // tries wait for neighbour discovery).
    let deadline = Instant::now() + Duration::from_secs(20);
    for (dst, src) in [("10.0.0.2", "10.0.0.1"), ("fd00::2", "fd00::1")] {
        while !ping_in(&pa, &["-I", src, dst]) {
            assert!(
                Instant::now() < deadline,
                "pod a cannot reach {dst} from {src}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    assert!(ping_in(&pa, &["-I", "10.0.0.1", "10.200.0.1"]));
    assert!(ping_in(&pa, &["-I", "fd00::1", "fd00:ff::1"]));

    // Addresses that are not pod a's: a made-up one, and pod b's own.
    ok_in(&pa, &["ip", "addr", "add", "10.0.0.99/32", "dev", "eth0"]);
    ok_in(
        &pa,
        &["ip", "addr", "add", "fd00::99/128", "dev", "eth0", "nodad"],
    );
    for (dst, src, v6, to) in [
        ("10.0.0.2", "10.0.0.99", false, &pb),
        ("fd00::2", "fd00::99", true, &pb),
        ("10.200.0.1", "10.0.0.99", false, &node),
        ("fd00:ff::1", "fd00::99", true, &node),
        // Pod b's own address, sent to the node (sent to pod b it
        // would stay in pod a, which now holds it too).
        ("10.200.0.1", "10.0.0.2", false, &node),
    ] {
        if src == "10.0.0.2" {
            ok_in(&pa, &["ip", "addr", "add", "10.0.0.2/32", "dev", "eth0"]);
        }
        let before = echoes_in(to, v6);
        // Three requests; the replies (none) waited for one second.
        let v = inside(&pa, &["ping", "-c3", "-i0.2", "-w1", "-I", src, dst]);
        run(&v.iter().map(String::as_str).collect::<Vec<_>>());
        let after = echoes_in(to, v6);
        assert_eq!(
            after,
            before,
            "{after_n} echo requests from {src} (not pod a's) reached {dst}",
            after_n = after - before
        );
    }
    // Still through from its own address after all that.
    assert!(ping_in(&pa, &["-I", "fd00::1", "fd00::2"]));
}
