//! Service addresses over BGP, against BIRD as a top-of-rack router: three
//! nodes (mesh off, an AS each) in eBGP with BIRD over IPv4 and IPv6.
//! BGPConfiguration sets the three service ranges; a LoadBalancer Service
//! with externalTrafficPolicy Local has an external IP and two ingress IPs
//! (IPv4 and IPv6), and its EndpointSlice, written directly into the
//! datastore here, has its endpoint on node-2. BIRD learns every range
//! from every node, and the host routes only from node-2; moving the
//! endpoint to node-3 moves them, deleting the slice withdraws them. No
//! node puts a service prefix in its kernel, though it learns the other
//! nodes' host routes from the ToR. Run as root.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_api::bgp::RouteEntry;
use tartan_api::resources::{BgpConfiguration, BgpConfigurationSpec, BgpPeer, BgpPeerSpec};
use tartan_api::store::typed::TypedStore;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, control_get};
use tartan_lab::{Daemon, TempDir};

const NODES: usize = 3;
const TOR_AS: u32 = 65000;
const RANGES: [&str; 5] = [
    "10.96.0.0/12",
    "fd00:96::/108",
    "203.0.113.0/24",
    "198.51.100.0/24",
    "fd00:1b::/112",
];
/// The Local Service's addresses: external IP, ingress IPv4, ingress IPv6.
const HOSTS: [&str; 3] = ["203.0.113.10/32", "198.51.100.10/32", "fd00:1b::10/128"];
/// A Cluster-policy Service's ingress IP: covered by the range only.
const CLUSTER_LB: &str = "198.51.100.20/32";
const WAIT: Duration = Duration::from_secs(30);

fn node_as(i: usize) -> u32 {
    65001 + i as u32
}

/// The endpoint slice of `web` with one ready endpoint on `node`.
fn slice(node: &str) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": "web-x1", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.88.0.5"], "nodeName": node,
            "conditions": {"ready": true, "serving": true, "terminating": false}}],
        "ports": [{"port": 8080, "protocol": "TCP"}],
    }))
    .unwrap()
}

struct Lab {
    lab: CniLab,
    bird: Bird,
    /// The BGP protocol name BIRD gives each node's session, per family.
    proto4: Vec<String>,
    proto6: Vec<String>,
    // Daemons stop before their directory goes.
    bgpd: Vec<Daemon>,
    dir: TempDir,
}

impl Lab {
    /// The node (1-based names) whose sessions a BIRD path came over.
    fn node_of(&self, proto: &str) -> Option<usize> {
        self.proto4
            .iter()
            .position(|p| p == proto)
            .or_else(|| self.proto6.iter().position(|p| p == proto))
            .map(|i| i + 1)
    }

    /// The nodes BIRD has a BGP path for `prefix` from.
    fn announcers(&self, prefix: &str) -> BTreeSet<usize> {
        self.bird
            .routes_for(prefix)
            .unwrap_or_default()
            .iter()
            .filter_map(|r| self.node_of(&r.proto))
            .collect()
    }

    fn wait_from(&self, prefix: &str, want: &[usize]) -> Duration {
        let t = Instant::now();
        let want: BTreeSet<usize> = want.iter().copied().collect();
        poll(&format!("BIRD has {prefix} from nodes {want:?}"), || {
            (self.announcers(prefix) == want).then_some(())
        })
        .unwrap_or_else(|e| {
            panic!(
                "{e}: has it from {:?}\n{}\nnode-1's log:\n{}",
                self.announcers(prefix),
                self.bird
                    .birdc(&["show", "route", "all"])
                    .unwrap_or_default(),
                self.bgpd[0].log_tail(30)
            )
        });
        t.elapsed()
    }

    fn rib(&self, i: usize, family: &str) -> Vec<RouteEntry> {
        let sock = self.dir.join(&format!("bgpd-{i}.sock"));
        control_get(&sock, &format!("/v1/routes?family={family}"))
            .and_then(|v| Ok(serde_json::from_value(v)?))
            .unwrap_or_default()
    }

    /// Node `i`'s kernel routes of protocol 201 (bgpd's), both families.
    fn kernel(&self, i: usize) -> String {
        let ns = &self.lab.underlay.node(i).netns;
        let v4 = ns
            .ip(&["-4", "route", "show", "proto", "201"])
            .unwrap_or_default();
        let v6 = ns
            .ip(&["-6", "route", "show", "proto", "201"])
            .unwrap_or_default();
        format!("{v4}{v6}")
    }
}

/// As `wait_for`, polling every 10 ms (the timings printed are of what
/// BIRD shows, give or take a poll and a `birdc` call).
fn poll(what: &str, mut f: impl FnMut() -> Option<()>) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if f().is_some() {
            return Ok(());
        }
        if start.elapsed() > WAIT {
            anyhow::bail!("timed out after {WAIT:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn setup() -> Lab {
    // node-1..3, and the ToR in the fourth namespace.
    let lab = CniLab::new(NODES + 1).unwrap();
    let tor = lab.underlay.node(NODES);
    let octet = lab.underlay.subnet.network().octets()[2];
    let v6 = |i: usize| -> IpAddr { format!("fd00:5e:{octet}::{}", i + 1).parse().unwrap() };
    for i in 0..=NODES {
        let u = lab.underlay.node(i);
        u.netns
            .ip(&[
                "-6",
                "addr",
                "add",
                &format!("{}/64", v6(i)),
                "dev",
                &u.ifname,
                "nodad",
            ])
            .unwrap();
    }
    let rt = &lab.rt;
    let store = &lab.store;
    for i in 0..NODES {
        let n: Node = serde_json::from_value(json!({"metadata": {
        "name": CniLab::node_name(i),
        "annotations": {
            "tartan.dev/bgp-ipv4-address": format!("{}/24", lab.underlay.node(i).address),
            "tartan.dev/bgp-ipv6-address": format!("{}/64", v6(i)),
            "tartan.dev/bgp-as-number": node_as(i).to_string(),
        }}}))
        .unwrap();
        rt.block_on(store.create_typed(&n)).unwrap();
    }
    let spec: BgpConfigurationSpec = serde_json::from_value(json!({
        "nodeToNodeMeshEnabled": false,
        "serviceClusterIPs": [{"cidr": RANGES[0]}, {"cidr": RANGES[1]}],
        "serviceExternalIPs": [{"cidr": RANGES[2]}],
        "serviceLoadBalancerIPs": [{"cidr": RANGES[3]}, {"cidr": RANGES[4]}],
    }))
    .unwrap();
    rt.block_on(store.create_typed(&BgpConfiguration::new("default", spec)))
        .unwrap();
    for (name, addr) in [("tor4", IpAddr::V4(tor.address)), ("tor6", v6(NODES))] {
        let peer = BgpPeer::new(name, BgpPeerSpec::new(&addr.to_string(), TOR_AS));
        rt.block_on(store.create_typed(&peer)).unwrap();
    }
    // The Local Service: an external IP and IPv4 and IPv6 ingress IPs; and
    // one outside every range, which nobody announces.
    let web: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "externalIPs": ["203.0.113.10", "192.0.2.77"],
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.10"}, {"ip": "fd00:1b::10"}]}},
    }))
    .unwrap();
    rt.block_on(store.create_typed(&web)).unwrap();
    // A Cluster-policy Service with an endpoint on every node.
    let api: Service = serde_json::from_value(json!({
        "metadata": {"name": "api", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Cluster",
            "ports": [{"port": 80, "protocol": "TCP"}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "198.51.100.20"}]}},
    }))
    .unwrap();
    rt.block_on(store.create_typed(&api)).unwrap();
    let api_slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "api-x1", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "api"}},
        "addressType": "IPv4",
        "endpoints": (0..NODES).map(|i| json!({"addresses": [format!("10.88.1.{}", i + 1)],
            "nodeName": CniLab::node_name(i), "conditions": {"ready": true}})).collect::<Vec<_>>(),
    }))
    .unwrap();
    rt.block_on(store.create_typed(&api_slice)).unwrap();
    rt.block_on(store.create_typed(&slice("node-2"))).unwrap();

    // The ToR: BIRD in AS 65000 with a session per node and family; it
    // announces 192.0.2.0/24, which the nodes do install (bgpd's kernel
    // routes work; only service prefixes stay out).
    let mut cfg = BgpConfig::new(tor.address, TOR_AS)
        .kernel(false)
        .route(Route::new("192.0.2.0/24"));
    let (mut proto4, mut proto6) = (vec![], vec![]);
    for i in 0..NODES {
        let a4 = IpAddr::V4(lab.underlay.node(i).address);
        cfg = cfg
            .neighbor(Neighbor::new(a4, node_as(i)))
            .neighbor(Neighbor::new(v6(i), node_as(i)));
        proto4.push(Bird::protocol_name(a4));
        proto6.push(Bird::protocol_name(v6(i)));
    }
    let bird = Bird::start(&tor.netns, cfg).unwrap();

    let dir = TempDir::new("bgpsvc").unwrap();
    let bin = tartan_lab::cni::tartan_bin_dir().join("tartan-bgpd");
    let bgpd = (0..NODES)
        .map(|i| {
            let mut c = lab
                .underlay
                .node(i)
                .netns
                .command(&bin.display().to_string());
            c.args(["--datastore", &lab.etcd.datastore_spec(), "--node"])
                .arg(CniLab::node_name(i))
                .arg("--socket")
                .arg(dir.join(&format!("bgpd-{i}.sock")))
                .env("TARTAN_LOG", "info");
            Daemon::start(&format!("bgpd-{i}"), c).unwrap()
        })
        .collect();
    Lab {
        lab,
        bird,
        proto4,
        proto6,
        bgpd,
        dir,
    }
}

#[test]
fn service_ranges_from_every_node_and_a_local_service_only_from_its_endpoints_node() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t = setup();
    let start = Instant::now();
    t.bird
        .wait_established(WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", t.bgpd[0].log_tail(30)));
    eprintln!("6 sessions established: {:?}", start.elapsed());

    // Every range from every node, in its own family.
    for r in RANGES {
        t.wait_from(r, &[1, 2, 3]);
        let fam_ok = t
            .bird
            .routes_for(r)
            .unwrap()
            .iter()
            .filter(|p| t.node_of(&p.proto).is_some())
            .all(|p| {
                let over_v6 = t.proto6.contains(&p.proto);
                over_v6 == r.contains(':')
            });
        assert!(fam_ok, "{r} came over a session of the other family");
    }
    // The host routes only from node-2, with node-2's AS as the path.
    for h in HOSTS {
        t.wait_from(h, &[2]);
        let paths = t.bird.routes_for(h).unwrap();
        assert_eq!(paths.len(), 1, "{paths:?}");
        assert_eq!(paths[0].as_path(), [node_as(1)], "{paths:?}");
    }
    assert!(
        t.announcers(CLUSTER_LB).is_empty(),
        "Cluster policy: range only"
    );
    assert!(
        t.announcers("192.0.2.77/32").is_empty(),
        "outside every range"
    );

    // No service prefix in any node's kernel, though node-1 and node-3
    // hold node-2's host routes (from the ToR) and every range from the
    // other nodes; the ToR's own prefix is installed.
    for i in 0..NODES {
        wait_for("the ToR's prefix in the kernel", WAIT, || {
            t.kernel(i).contains("192.0.2.0/24").then_some(())
        })
        .unwrap_or_else(|e| panic!("node-{}: {e}\n{}", i + 1, t.kernel(i)));
    }
    let learned = |i: usize, prefix: &str| {
        let fam = if prefix.contains(':') {
            "ipv6-unicast"
        } else {
            "ipv4-unicast"
        };
        t.rib(i, fam)
            .iter()
            .any(|r| r.prefix.to_string() == prefix && r.paths.iter().any(|p| p.peer.is_some()))
    };
    wait_for("node-1 learns node-2's host route", WAIT, || {
        HOSTS.iter().all(|h| learned(0, h)).then_some(())
    })
    .unwrap();
    for i in 0..NODES {
        let k = t.kernel(i);
        for p in RANGES.iter().chain(&HOSTS) {
            let bare = p.trim_end_matches("/32").trim_end_matches("/128");
            assert!(
                !k.lines()
                    .any(|l| l.starts_with(&format!("{bare} ")) || l.starts_with(p)),
                "node-{}: {p} in the kernel:\n{k}",
                i + 1
            );
        }
        for pfx in [
            "10.96.",
            "198.51.100.",
            "203.0.113.",
            "fd00:1b:",
            "fd00:96:",
        ] {
            assert!(
                !k.contains(pfx),
                "node-{}: {pfx} in the kernel:\n{k}",
                i + 1
            );
        }
    }

    // The endpoint moves to node-3: so do the host routes.
    let cur: EndpointSlice = t
        .lab
        .rt
        .block_on(t.lab.store.get_typed(Some("default"), "web-x1"))
        .unwrap();
    let mut moved = slice("node-3");
    moved.metadata.resource_version = cur.metadata.resource_version;
    let w = Instant::now();
    t.lab.rt.block_on(t.lab.store.update_typed(&moved)).unwrap();
    for h in HOSTS {
        t.wait_from(h, &[3]);
    }
    eprintln!(
        "endpoint moved to node-3 -> BIRD has the host routes from node-3 only: {:?}",
        w.elapsed()
    );
    for r in RANGES {
        assert_eq!(t.announcers(r), BTreeSet::from([1, 2, 3]), "{r}");
    }

    // The slice goes: withdrawn everywhere; the ranges stay.
    let w = Instant::now();
    t.lab
        .rt
        .block_on(
            t.lab
                .store
                .delete_typed::<EndpointSlice>(Some("default"), "web-x1", None),
        )
        .unwrap();
    for h in HOSTS {
        t.wait_from(h, &[]);
    }
    eprintln!(
        "slice deleted -> host routes withdrawn at BIRD: {:?}",
        w.elapsed()
    );
    for r in RANGES {
        assert_eq!(t.announcers(r), BTreeSet::from([1, 2, 3]), "{r}");
    }
    for (i, d) in t.bgpd.iter().enumerate() {
        assert!(d.is_running(), "bgpd-{i} exited:\n{}", d.log_tail(30));
    }
}
