//! eBGP to a "top-of-rack" router: a BIRD namespace on the underlay, peered
//! with every node through one BGPPeer object. BIRD learns every node's
//! block; a host behind BIRD reaches the pods, and the pods reach it. The
//! sessions carry a TCP MD5 password taken from a Secret.
//!
//! With the default next-hop mode each node passes the other's block on
//! with its owner as next hop (a third-party next hop on the shared
//! underlay), so the ToR sends a block's traffic straight to its owner.
//! With `Self` on both nodes the ToR spreads each block over both (ECMP),
//! and a reply may reach the node that does not hold the pod: that node
//! routes it on, as a router does.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ipnet::Ipv4Net;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use tartan_api::resources::bgppeer::NextHopMode;
use tartan_api::resources::{BgpPeer, BgpPeerSpec, SecretKeyRef, SecretSource, TARTAN_NAMESPACE};
use tartan_api::store::typed::TypedStore;
use tartan_lab::Daemon;
use tartan_lab::TempDir;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::{Netns, veth, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route};

/// The host behind the ToR, on the network the ToR announces.
const HOST: &str = "198.51.100.2";

/// Two nodes peered with a BIRD ToR, a host behind the ToR, a pod on each
/// node. Field order is drop order: the namespaces outlive the daemons.
struct TorLab {
    pods: Vec<(Netns, tartan_lab::cni::Call, String)>,
    daemons: Vec<(Daemon, Daemon)>,
    bird: Bird,
    host: Netns,
    dir: TempDir,
    lab: CniLab,
}

impl TorLab {
    fn start(mode: NextHopMode) -> TorLab {
        // node-1 and node-2 are cluster nodes; the third namespace is the ToR.
        let lab = tartan_tests::cni_lab(3, "10.88.0.0/16");
        let tor = lab.underlay.node(2);
        let tor_ip = tor.address;
        for i in 0..2 {
            lab.add_node_object(i).unwrap();
        }
        // The sessions are signed (TCP MD5): the password is in a Secret in
        // Tartan's namespace, the BGPPeer refers to it.
        let mut secret = Secret::default();
        secret.metadata.name = Some("bgp-tor".into());
        secret.metadata.namespace = Some(TARTAN_NAMESPACE.into());
        secret.data = Some(BTreeMap::from([(
            "password".to_string(),
            ByteString(b"rack-7-key".to_vec()),
        )]));
        lab.rt.block_on(lab.store.create_typed(&secret)).unwrap();
        let mut peer = BgpPeerSpec::new(&tor_ip.to_string(), 65000);
        peer.password = Some(SecretSource {
            secret_key_ref: SecretKeyRef {
                name: "bgp-tor".into(),
                key: "password".into(),
            },
        });
        peer.next_hop_mode = mode;
        lab.rt
            .block_on(lab.store.create_typed(&BgpPeer::new("tor", peer)))
            .unwrap();

        // The ToR: BIRD in AS 65000, installing what it learns (ECMP over
        // equal paths, as rack switches do), announcing the network of the
        // hosts behind it (198.51.100.0/24, routed to a host reached over a
        // link of its own).
        let host = Netns::new("torh").unwrap();
        veth(&tor.netns, &["192.0.2.1/24"], &host, &["192.0.2.2/24"]).unwrap();
        host.ip(&["addr", "add", &format!("{HOST}/32"), "dev", "lo"])
            .unwrap();
        host.ip(&["route", "add", "default", "via", "192.0.2.1"])
            .unwrap();
        tor.netns
            .ip(&["route", "add", "198.51.100.0/24", "via", "192.0.2.2"])
            .unwrap();
        // Multipath hashed on ports too, so that flows from one pod with
        // different source ports take both paths when there are two.
        tor.netns
            .exec(
                "sysctl",
                &[
                    "-qw",
                    "net.ipv4.ip_forward=1",
                    "net.ipv4.fib_multipath_hash_policy=1",
                ],
            )
            .unwrap();
        let mut cfg = BgpConfig::new(tor_ip, 65000)
            .kernel(true)
            .route(Route::new("198.51.100.0/24"));
        for i in 0..2 {
            cfg = cfg.neighbor(
                Neighbor::new(IpAddr::V4(lab.underlay.node(i).address), 64512)
                    .password("rack-7-key"),
            );
        }
        let bird = Bird::start(&tor.netns, cfg).unwrap();

        let (dir, daemons, pods) = tartan_tests::daemons_and_a_pod_each(&lab, 2, "tor");
        bird.wait_established(Duration::from_secs(30)).unwrap();
        TorLab {
            pods,
            daemons,
            bird,
            host,
            dir,
            lab,
        }
    }

    fn node_address(&self, i: usize) -> IpAddr {
        IpAddr::V4(self.lab.underlay.node(i).address)
    }

    /// The /26 block of pod `i` (on node `i`).
    fn block(&self, i: usize) -> String {
        let a: Ipv4Addr = self.pods[i].2.parse().unwrap();
        Ipv4Net::new(a, 26).unwrap().trunc().to_string()
    }

    /// BIRD's paths for pod `i`'s block, once `want` of them are there.
    fn tor_paths(&self, i: usize, want: usize) -> Vec<tartan_lab::peers::BirdRoute> {
        let block = self.block(i);
        wait_for(
            &format!("{want} paths for {block} at the ToR"),
            Duration::from_secs(30),
            || {
                let r = self.bird.routes_for(&block).ok()?;
                (r.len() == want).then_some(r)
            },
        )
        .unwrap_or_else(|e| {
            panic!(
                "{e}\n{}\n{}",
                self.bird
                    .birdc(&["show", "route", "all"])
                    .unwrap_or_default(),
                self.daemons[0].0.log_tail(20)
            )
        })
    }

    /// The ToR's kernel route for pod `i`'s block.
    fn tor_kernel_route(&self, i: usize) -> String {
        self.lab
            .underlay
            .node(2)
            .netns
            .ip(&["route", "show", &self.block(i)])
            .unwrap_or_default()
    }

    fn diagnostics(&self) -> String {
        format!(
            "node-1 routes:\n{}\nToR routes:\n{}",
            self.lab
                .underlay
                .node(0)
                .netns
                .ip(&["route"])
                .unwrap_or_default(),
            self.lab
                .underlay
                .node(2)
                .netns
                .ip(&["route"])
                .unwrap_or_default()
        )
    }
}

/// Runs `f` once per flow and lists the flows that failed.
fn failed_flows(n: u16, mut f: impl FnMut(u16) -> bool) -> Vec<u16> {
    (0..n).filter(|&i| !f(i)).collect()
}

#[test]
fn a_tor_router_learns_each_block_from_its_owner_and_its_hosts_reach_pods() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t = TorLab::start(NextHopMode::Auto);
    // Both nodes announce both blocks, and every path names the block's
    // owner as next hop: the other node passes it on as a third-party next
    // hop on the shared underlay (RFC 4271 5.1.3).
    for i in 0..2 {
        let owner = t.node_address(i);
        let paths = t.tor_paths(i, 2);
        for p in &paths {
            assert_eq!(p.next_hop(), Some(owner), "{}: {p:?}", t.block(i));
            assert_eq!(
                p.attr("BGP.next_hop")
                    .and_then(|v| v.split_whitespace().next()),
                Some(owner.to_string().as_str()),
                "{p:?}"
            );
        }
        // One next hop in the ToR's kernel: the owner, not ECMP over both.
        let route = t.tor_kernel_route(i);
        assert!(
            route.contains(&format!("via {owner} ")) && !route.contains("nexthop"),
            "{}: {route}",
            t.block(i)
        );
    }
    // The host behind the ToR reaches both pods, and they reach it.
    let mut failures = BTreeMap::new();
    for (pod_ns, _, addr) in &t.pods {
        let there = wait_for("host -> pod", Duration::from_secs(10), || {
            t.host.exec("ping", &["-c1", "-W1", "-I", HOST, addr]).ok()
        });
        if there.is_err() {
            failures.insert(addr.clone(), "host -> pod");
        }
        let back = wait_for("pod -> host", Duration::from_secs(10), || {
            pod_ns.exec("ping", &["-c1", "-W1", HOST]).ok()
        });
        if back.is_err() {
            failures.insert(addr.clone(), "pod -> host");
        }
    }
    assert!(failures.is_empty(), "{failures:?}\n{}", t.diagnostics());

    // An invalid packet addressed to a pod (TCP SYN+FIN, a flag combination
    // conntrack refuses) is still dropped by the node; a plain SYN from the
    // same host arrives. The pod counts what reaches it before its own
    // conntrack sees it.
    let (pod_ns, _, addr) = &t.pods[0];
    let counters = "table inet count { \
        counter synfin { }; counter syn { }; \
        chain pre { type filter hook prerouting priority -400; \
        tcp dport 7777 tcp flags & (syn|fin) == syn|fin counter name synfin; \
        tcp dport 7777 tcp flags == syn counter name syn; }; }";
    pod_ns.exec("nft", &[counters]).unwrap();
    for flags in [["-S", "-F"], ["-S", "-S"]] {
        t.host
            .exec(
                "hping3",
                &[
                    "-q", "-c", "3", "-i", "u100000", flags[0], flags[1], "-p", "7777", "-a", HOST,
                    addr,
                ],
            )
            .ok();
    }
    let packets = |name: &str| -> u64 {
        let out = pod_ns
            .exec("nft", &["list", "counter", "inet", "count", name])
            .unwrap();
        out.split("packets ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no packet count in {out}"))
    };
    assert!(packets("syn") >= 1, "the valid SYNs should reach the pod");
    assert_eq!(
        packets("synfin"),
        0,
        "an invalid packet reached the pod\n{}",
        t.lab
            .underlay
            .node(0)
            .netns
            .exec("nft", &["list", "chain", "inet", "tartan", "forward"])
            .unwrap_or_default()
    );
}

#[test]
fn with_next_hop_self_and_ecmp_at_the_tor_pod_flows_survive_either_path() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t = TorLab::start(NextHopMode::SelfAddress);
    // Each block has two paths, each through the node that sent it, and
    // the ToR installs both.
    for i in 0..2 {
        let paths = t.tor_paths(i, 2);
        let mut hops: Vec<IpAddr> = paths.iter().filter_map(|p| p.next_hop()).collect();
        hops.sort();
        assert_eq!(hops, vec![t.node_address(0), t.node_address(1)]);
        let route = wait_for("an ECMP route at the ToR", Duration::from_secs(10), || {
            let r = t.tor_kernel_route(i);
            (r.matches("nexthop via").count() == 2).then_some(r)
        });
        assert!(route.is_ok(), "{}\n{}", t.block(i), t.diagnostics());
    }
    // A TCP server on the host and in each pod; each answers "ok".
    let server = |ns: &Netns| {
        ns.command("socat")
            .args(["TCP-LISTEN:7000,fork,reuseaddr", "SYSTEM:echo ok"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut servers = vec![server(&t.host)];
    for (pod_ns, _, _) in &t.pods {
        servers.push(server(pod_ns));
    }
    let _stop = KillOnDrop(servers);
    // From `from` (the host's address on the announced network, or the
    // pod's only one) and source port `port`.
    let connect = |ns: &Netns, from: &str, to: &str, port: u16| {
        ns.exec(
            "socat",
            &[
                "-T2",
                "-",
                &format!("TCP:{to}:7000,bind={from}:{port},connect-timeout=2"),
            ],
        )
        .is_ok_and(|out| out.trim() == "ok")
    };
    // Reachable first (routes and tables in place), then 20 flows each way.
    for (pod_ns, _, addr) in &t.pods {
        wait_for("host -> pod", Duration::from_secs(10), || {
            t.host.exec("ping", &["-c1", "-W1", "-I", HOST, addr]).ok()
        })
        .unwrap_or_else(|e| panic!("{e}\n{}", t.diagnostics()));
        wait_for("the host's server", Duration::from_secs(10), || {
            connect(pod_ns, addr, HOST, 39999).then_some(())
        })
        .ok();
    }
    let mut failures = BTreeMap::new();
    for (n, (pod_ns, _, addr)) in t.pods.iter().enumerate() {
        let base = 40000 + 100 * n as u16;
        let out = failed_flows(20, |i| connect(pod_ns, addr, HOST, base + i));
        if !out.is_empty() {
            failures.insert(format!("{addr}: pod -> host TCP"), out);
        }
        let back = failed_flows(20, |i| connect(&t.host, HOST, addr, base + 50 + i));
        if !back.is_empty() {
            failures.insert(format!("{addr}: host -> pod TCP"), back);
        }
        let pings = failed_flows(20, |_| pod_ns.exec("ping", &["-c1", "-W2", HOST]).is_ok());
        if !pings.is_empty() {
            failures.insert(format!("{addr}: pod -> host ping"), pings);
        }
    }
    assert!(failures.is_empty(), "{failures:?}\n{}", t.diagnostics());
}

#[test]
fn a_bgp_filter_shapes_what_the_tor_learns_and_an_edit_applies_without_a_reset() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    use tartan_api::resources::{BgpFilter, BgpFilterSpec};
    let t = TorLab::start(NextHopMode::Auto);
    let (b0, b1) = (t.block(0), t.block(1));
    t.tor_paths(1, 2);
    // Block 1 refused towards the ToR; block 0 tagged and prepended.
    let spec = |reject_b1: bool| -> BgpFilterSpec {
        let mut rules = vec![serde_json::json!({
            "action": "Accept", "cidr": b0, "matchOperator": "Equal",
            "communities": {"add": ["64512:77"]}, "asPathPrepend": [64512],
        })];
        if reject_b1 {
            rules.insert(
                0,
                serde_json::json!({"action": "Reject", "cidr": b1, "matchOperator": "In", "prefixLength": {"min": 26, "max": 26}}),
            );
        }
        serde_json::from_value(serde_json::json!({ "exportV4": rules })).unwrap()
    };
    let store = &t.lab.store;
    t.lab
        .rt
        .block_on(store.create_typed(&BgpFilter::new("tor-export", spec(true))))
        .unwrap();
    let mut peer: BgpPeer = t.lab.rt.block_on(store.get_typed(None, "tor")).unwrap();
    peer.spec.filters = vec!["tor-export".into()];
    t.lab.rt.block_on(store.update_typed(&peer)).unwrap();
    let view = |prefix: &str| t.bird.routes_for(prefix).unwrap_or_default();
    wait_for(
        "the filtered view at the ToR",
        Duration::from_secs(10),
        || {
            let tagged = view(&b0);
            (view(&b1).is_empty()
                && tagged.len() == 2
                && tagged.iter().all(|r| {
                    r.communities() == vec![(64512, 77)] && r.as_path() == vec![64512, 64512]
                }))
            .then_some(())
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            t.bird.birdc(&["show", "route", "all"]).unwrap_or_default()
        )
    });
    let since = |i: usize| t.bird.state_since(t.node_address(i)).unwrap();
    let before = (since(0), since(1));
    let uptime = |i: usize| -> u64 {
        let sock = t.dir.join(&format!("bgpd-{i}.sock"));
        let peers = tartan_lab::peers::control_get(&sock, "/v1/peers").unwrap();
        let tor = t.lab.underlay.node(2).address.to_string();
        peers
            .as_array()
            .and_then(|a| a.iter().find(|p| p["address"] == tor.as_str()))
            .and_then(|p| p["uptimeSeconds"].as_u64())
            .unwrap_or(0)
    };
    let up_before = (uptime(0), uptime(1));
    // The filter edited while the sessions run: block 1 goes out again.
    let mut f: BgpFilter = t
        .lab
        .rt
        .block_on(store.get_typed(None, "tor-export"))
        .unwrap();
    f.spec = spec(false);
    // A reset after the edit must show as a later state change.
    std::thread::sleep(Duration::from_millis(300));
    let started = std::time::Instant::now();
    t.lab.rt.block_on(store.update_typed(&f)).unwrap();
    wait_for("block 1 back at the ToR", Duration::from_secs(2), || {
        (view(&b1).len() == 2).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", t.daemons[0].0.log_tail(20)));
    eprintln!("filter edit seen at the ToR in {:?}", started.elapsed());
    // Neither session was reset: BIRD's sessions are as old as before, and
    // the nodes' uptimes went on.
    let after = (since(0), since(1));
    assert!(
        after.0.same_as(before.0) && after.1.same_as(before.1),
        "BIRD's sessions changed state: {before:?} -> {after:?}"
    );
    let up_after = (uptime(0), uptime(1));
    assert!(
        up_after.0 >= up_before.0 && up_after.1 >= up_before.1,
        "{up_before:?} -> {up_after:?}"
    );
}

/// Child processes killed and reaped when the test ends, also on failure.
struct KillOnDrop(Vec<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
