//! IPv6 Services against the real kernel, with real packets: the node (a
//! fresh network namespace) writes `ip6 tartan-svc` from a dual-stack
//! Service, and its own connections reach an endpoint in a pod (a named
//! namespace behind a veth, as the CNI plugin wires it) through the
//! ClusterIP and through a NodePort on the node's IPv6 address; a
//! frontend without endpoints and an undeclared ClusterIP port are
//! refused; session affinity keeps a client on its endpoint; an endpoint
//! change goes over netlink; a stale UDP conntrack entry of the IPv6 table
//! is deleted. An IPv4-only proxy writes no IPv6 table, and Services off
//! removes both.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_felix::dataplane::conntrack::Conntrack;
use tartan_felix::dataplane::nft::{Via, Written};
use tartan_felix::dataplane::services::ServiceProxy;
use tartan_felix::services::family::Fam;
use tartan_felix::services::stale::{Entry, Tuple};
use tartan_felix::services::{SERVICE_NAME_LABEL, ServiceHalves, Slice, UDP};

mod common;
use common::{in_new_netns, ok, run};

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Run `f` in a fresh network namespace (the node); skipped without root.
fn as_root<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return None;
    }
    Some(in_new_netns(f))
}

/// A named namespace (the pod), deleted when dropped, also when the test
/// fails.
struct Netns(String);

impl Netns {
    fn new(prefix: &str) -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ok(&["ip", "netns", "add", &name]);
        Netns(name)
    }

    fn exec(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", &self.0];
        v.extend(args);
        ok(&v);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.0]);
    }
}

/// A TCP server in the pod on port 8080 (every address): to each
/// connection it answers `<its own address> <the client's address>`.
/// Stopped and joined when dropped.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(ns: &Netns) -> Server {
        let path = format!("/run/netns/{}", ns.0);
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).unwrap();
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let l = TcpListener::bind("[::]:8080").unwrap();
            l.set_nonblocking(true).unwrap();
            ready_tx.send(()).unwrap();
            while !flag.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, peer)) => {
                        let me = s.local_addr().unwrap().ip();
                        let _ = s.write_all(format!("{me} {}", peer.ip()).as_bytes());
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(e) => panic!("accept: {e}"),
                }
            }
        });
        ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("server up");
        Server {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn service(name: &str, spec: serde_json::Value) -> ServiceHalves {
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "x"}, "spec": spec
    }))
    .unwrap();
    ServiceHalves::from_service(&s).unwrap().unwrap()
}

fn slice(svc: &str, family: &str, ips: &[&str]) -> Slice {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "nodeName": "n1"}))
        .collect();
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("{svc}-{family}"), "namespace": "x",
                     "labels": {SERVICE_NAME_LABEL: svc}},
        "addressType": family,
        "ports": [{"name": "http", "port": 8080}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
        "endpoints": eps}))
    .unwrap();
    Slice::from_slice(&s, "n1").unwrap()
}

/// What the endpoint answered to a connection to `to`: its address and
/// the client's as it saw them; or how the connection failed.
fn ask(to: &str) -> Result<(String, String), ErrorKind> {
    let to: SocketAddr = to.parse().unwrap();
    let mut s =
        TcpStream::connect_timeout(&to, Duration::from_millis(1500)).map_err(|e| e.kind())?;
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).map_err(|e| e.kind())?;
    let (me, peer) = got.split_once(' ').expect("an answer");
    Ok((me.to_string(), peer.to_string()))
}

fn nft(args: &[&str]) -> String {
    let out = run(&[&["nft"], args].concat());
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn table_exists(family: &str) -> bool {
    run(&["nft", "list", "table", family, "tartan-svc"])
        .status
        .success()
}

/// In the node's namespace: the pod `pod` behind veth `tar6a` (pod side
/// `eth0`, addresses fd00::2 and fd00::3), the node fd00::1 on the veth
/// and fd10::1 (its own address, where NodePorts are), and a default
/// route into a device that goes nowhere (what is not DNATed hangs).
fn wire(pod: &Netns) {
    ok(&["ip", "link", "set", "lo", "up"]);
    ok(&[
        "ip", "link", "add", "tar6a", "type", "veth", "peer", "name", "eth0", "netns", &pod.0,
    ]);
    ok(&[
        "ip",
        "-6",
        "addr",
        "add",
        "fd00::1/64",
        "dev",
        "tar6a",
        "nodad",
    ]);
    ok(&["ip", "link", "set", "tar6a", "up"]);
    ok(&["ip", "-6", "addr", "add", "fd10::1/128", "dev", "lo"]);
    ok(&[
        "ip", "link", "add", "out0", "type", "veth", "peer", "name", "out1",
    ]);
    ok(&[
        "ip",
        "-6",
        "addr",
        "add",
        "fd20::2/64",
        "dev",
        "out0",
        "nodad",
    ]);
    ok(&["ip", "link", "set", "out0", "up"]);
    ok(&["ip", "link", "set", "out1", "up"]);
    ok(&["ip", "-6", "route", "add", "default", "via", "fd20::1"]);
    pod.exec(&["ip", "link", "set", "lo", "up"]);
    for a in ["fd00::2/64", "fd00::3/64"] {
        pod.exec(&["ip", "-6", "addr", "add", a, "dev", "eth0", "nodad"]);
    }
    pod.exec(&["ip", "link", "set", "eth0", "up"]);
    pod.exec(&["ip", "-6", "route", "add", "default", "via", "fd00::1"]);
    // Until the veth carries packets (and the neighbours are known), the
    // first connections would be lost to its coming up, not to the table.
    for a in ["fd00::2", "fd00::3"] {
        let up = (0..50).any(|_| run(&["ping", "-6", "-c1", "-W1", a]).status.success());
        assert!(up, "the pod answers on {a}");
    }
}

/// The dual-stack NodePort Service `x/web` (ClusterIPs 10.96.0.10 and
/// fd96::10, port 80 → 8080, NodePort 30080; UDP 53 → 5353), its IPv6
/// endpoints `ips` and an IPv4 one, and `x/empty` (fd96::11) without
/// endpoints; written whole.
fn proxy(ips: &[&str], affinity: bool) -> ServiceProxy {
    let mut spec = json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10", "fd96::10"],
        "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack", "type": "NodePort",
        "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                  {"name": "dns", "port": 53, "protocol": "UDP"}]});
    if affinity {
        spec["sessionAffinity"] = json!("ClientIP");
    }
    let mut p = ServiceProxy::new("n1");
    p.index.set_service("x/web", Some(service("web", spec)));
    p.index
        .set_slice("x/web-IPv6", Some(slice("web", "IPv6", ips)));
    p.index
        .set_slice("x/web-IPv4", Some(slice("web", "IPv4", &["10.0.0.2"])));
    p.index.set_service(
        "x/empty",
        Some(service(
            "empty",
            json!({"clusterIPs": ["fd96::11"], "ipFamilies": ["IPv6"],
                   "ports": [{"name": "http", "port": 80},
                             {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        )),
    );
    assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
    assert_eq!(p.sync(true).unwrap(), Written::Nothing, "no drift");
    p
}

#[test]
fn ipv6_cluster_ip_node_port_and_refusals_with_real_packets() {
    as_root(|| {
        let pod = Netns::new("tsvc6");
        wire(&pod);
        let _server = Server::start(&pod);
        let mut p = proxy(&["fd00::2"], false);
        assert!(table_exists("ip6") && table_exists("ip"));
        let listing = nft(&["list", "table", "ip6", "tartan-svc"]);
        assert!(
            listing.contains("fd96::10 . tcp . 80") && listing.contains("fd00::2"),
            "{listing}"
        );
        assert!(!listing.contains("10.0.0.2"), "no IPv4 endpoint: {listing}");

        // The ClusterIP, DNATed to the pod.
        let (me, _) = ask("[fd96::10]:80").expect("the ClusterIP answers");
        assert_eq!(me, "fd00::2");
        // The NodePort on the node's IPv6 address: masqueraded
        // (`externalTrafficPolicy: Cluster`), so the pod sees the node's
        // address on its side, not fd10::1.
        let (me, client) = ask("[fd10::1]:30080").expect("the NodePort answers");
        assert_eq!((me.as_str(), client.as_str()), ("fd00::2", "fd00::1"));
        // A link-local address of the node is no NodePort address
        // (kube-proxy's default NodePort addresses, the node's primary
        // IPs, never hold one): the node's own stack answers, with a reset.
        ok(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fe80::10/64",
            "dev",
            "tar6a",
            "nodad",
        ]);
        let link = nix::net::if_::if_nametoindex("tar6a").unwrap();
        let to = SocketAddr::V6(SocketAddrV6::new(
            "fe80::10".parse().unwrap(),
            30080,
            0,
            link,
        ));
        assert_eq!(
            TcpStream::connect_timeout(&to, Duration::from_millis(1500))
                .map_err(|e| e.kind())
                .err(),
            Some(ErrorKind::ConnectionRefused),
            "no NodePort on a link-local address"
        );
        // Refused at once: a frontend without endpoints, an undeclared
        // ClusterIP port (TCP reset); UDP to a declared port without
        // endpoints is rejected in `output`, so the send itself fails.
        assert_eq!(ask("[fd96::11]:80"), Err(ErrorKind::ConnectionRefused));
        assert_eq!(ask("[fd96::10]:81"), Err(ErrorKind::ConnectionRefused));
        let listing = nft(&["list", "table", "ip6", "tartan-svc"]);
        assert!(
            listing.contains("fd96::11 . udp . 53"),
            "the declared UDP port, without endpoints: {listing}"
        );
        let udp = UdpSocket::bind("[::]:0").unwrap();
        udp.connect("[fd96::11]:53").unwrap();
        assert!(udp.send(b"x").is_err(), "UDP to no endpoint is refused");

        // The endpoint replaced by another: elements only, over netlink.
        p.index
            .set_slice("x/web-IPv6", Some(slice("web", "IPv6", &["fd00::3"])));
        p.index.update();
        let patch = p
            .index
            .family_mut::<Ipv6Addr>()
            .take_patch()
            .expect("a patch");
        assert_eq!(
            p.writer.write(&patch, "ip6", "tartan-svc").unwrap(),
            Via::Netlink,
            "{patch:#}"
        );
        let (me, _) = ask("[fd96::10]:80").expect("the new endpoint answers");
        assert_eq!(me, "fd00::3");
        assert_eq!(p.sync(true).unwrap(), Written::Nothing, "no drift");

        // Services off: both tables go.
        tartan_felix::dataplane::services::remove_left_table();
        assert!(!table_exists("ip6") && !table_exists("ip"));
    });
}

#[test]
fn ipv6_session_affinity_keeps_a_client_on_its_endpoint() {
    as_root(|| {
        let pod = Netns::new("tsvc6a");
        wire(&pod);
        let _server = Server::start(&pod);
        let _p = proxy(&["fd00::2", "fd00::3"], true);
        let listing = nft(&["list", "table", "ip6", "tartan-svc"]);
        assert!(listing.contains("fe_2_a10800"), "{listing}");
        let first = ask("[fd96::10]:80").expect("answered").0;
        for _ in 0..12 {
            assert_eq!(ask("[fd96::10]:80").expect("answered").0, first);
        }
        let aff = nft(&["list", "set", "ip6", "tartan-svc", "aff_0"])
            + &nft(&["list", "set", "ip6", "tartan-svc", "aff_1"]);
        assert!(aff.contains("fd96::10 . tcp . 80"), "{aff}");
    });
}

/// A UDP conntrack entry from fd00::9 to `dst` port 53, answered by `by`.
fn udp_entry(dst: &str, by: &str, sport: u16) -> Entry<Ipv6Addr> {
    let a = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    Entry {
        orig: Tuple {
            src: a("fd00::9"),
            dst: a(dst),
            proto: UDP,
            src_port: sport,
            dst_port: 53,
        },
        reply: Tuple {
            src: a(by),
            dst: a("fd00::9"),
            proto: UDP,
            src_port: if dst == by { 53 } else { 5353 },
            dst_port: sport,
        },
        zone: None,
        id: None,
    }
}

/// The original directions of the IPv6 conntrack entries.
fn origs(ct: &mut Conntrack) -> Vec<Tuple<Ipv6Addr>> {
    ct.list_family::<Ipv6Addr>()
        .unwrap()
        .iter()
        .map(|e| e.orig)
        .collect()
}

/// The pod wired, `proxy` written with endpoint fd00::2, and two UDP
/// conntrack entries: one through the ClusterIP to fd00::2 (stale once
/// that endpoint goes) and `other`, returned, that no change touches.
fn with_stale_flow(prefix: &str) -> (Netns, ServiceProxy, Conntrack, Entry<Ipv6Addr>) {
    let pod = Netns::new(prefix);
    wire(&pod);
    let p = proxy(&["fd00::2"], false);
    let mut ct = Conntrack::open().unwrap();
    let stale = udp_entry("fd96::10", "fd00::2", 40000);
    let other = udp_entry("fd00::7", "fd00::7", 40001);
    assert_eq!(ct.create(&[stale, other], 600).unwrap(), (2, 0));
    (pod, p, ct, other)
}

/// A UDP flow to the ClusterIP whose endpoint goes: its IPv6 conntrack
/// entry is deleted at the next sync (AF_INET6 over ctnetlink), an
/// unrelated one is kept.
#[test]
fn ipv6_stale_udp_conntrack_entries_are_deleted() {
    as_root(|| {
        let (_pod, mut p, mut ct, other) = with_stale_flow("tsvc6c");
        assert_eq!(origs(&mut ct).len(), 2);
        // The IPv4 listing does not see them.
        assert!(ct.list().unwrap().iter().all(|e| e.orig.dst_port != 53));
        p.index
            .set_slice("x/web-IPv6", Some(slice("web", "IPv6", &[])));
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        assert_eq!(origs(&mut ct), vec![other.orig]);
    });
}

/// The IPv6 table's write fails while the IPv4 one's succeeds: the IPv6
/// flow left stale is kept (the kernel still has the old rules, which
/// would make a new entry like it) and deleted after the write that does
/// go through; the sync tells the families apart.
#[test]
fn a_failed_ipv6_write_keeps_its_stale_flows_for_the_write_that_succeeds() {
    as_root(|| {
        let (_pod, mut p, mut ct, other) = with_stale_flow("tsvc6f");
        p.refuse = Some(Fam::V6);
        p.index
            .set_slice("x/web-IPv6", Some(slice("web", "IPv6", &[])));
        p.index
            .set_slice("x/web-IPv4", Some(slice("web", "IPv4", &["10.0.0.3"])));
        let s = p.sync_families(false);
        assert!(matches!(s.v4, Ok(Written::Difference(_))), "{s:?}");
        assert!(matches!(s.v6, Some(Err(_))), "{s:?}");
        assert!(p.sync(false).is_err(), "one result: the IPv6 error");
        let listing = nft(&["list", "table", "ip6", "tartan-svc"]);
        assert!(listing.contains("fd00::2"), "the old rules: {listing}");
        assert_eq!(origs(&mut ct).len(), 2, "the stale flow kept");

        p.refuse = None;
        let s = p.sync_families(false);
        assert!(matches!(s.v6, Some(Ok(Written::Full(_)))), "{s:?}");
        assert_eq!(origs(&mut ct), vec![other.orig], "deleted after the write");
    });
}

/// The kept IPv6 table drifts from one computed afresh: the check
/// rebuilds and rewrites it alone, the IPv4 table is left as written.
#[test]
fn one_familys_mismatch_rebuilds_that_family_alone() {
    as_root(|| {
        let mut p = proxy(&["fd00::2"], false);
        p.index
            .family_mut::<Ipv6Addr>()
            .table_mut()
            .frontends
            .clear();
        let s = p.sync_families(true);
        assert!(matches!(s.v4, Ok(Written::Nothing)), "{s:?}");
        assert!(matches!(s.v6, Some(Ok(Written::Full(_)))), "{s:?}");
        assert!(
            !p.index.family::<Ipv6Addr>().table().frontends.is_empty(),
            "rebuilt"
        );
        assert_eq!(p.sync(true).unwrap(), Written::Nothing, "no drift");
    });
}

/// An IPv6 table an earlier felix left, with no IPv6 Service now: found
/// at the first sync and written (empty of Services), not left serving
/// what it held.
#[test]
fn a_leftover_ipv6_table_is_found_and_written_at_the_first_sync() {
    as_root(|| {
        ok(&["nft", "add", "table", "ip6", "tartan-svc"]);
        ok(&["nft", "add", "chain", "ip6", "tartan-svc", "left_over"]);
        let mut p = ServiceProxy::new("n1");
        p.index.set_service(
            "x/web",
            Some(service(
                "web",
                json!({"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}]}),
            )),
        );
        let s = p.sync_families(false);
        assert!(matches!(s.v4, Ok(Written::Full(_))), "{s:?}");
        assert!(matches!(s.v6, Some(Ok(Written::Full(_)))), "{s:?}");
        let listing = nft(&["list", "table", "ip6", "tartan-svc"]);
        assert!(!listing.contains("left_over"), "{listing}");
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
    });
}

/// A cluster without IPv6 Services has no IPv6 table.
#[test]
fn an_ipv4_only_proxy_writes_no_ipv6_table() {
    as_root(|| {
        let mut p = ServiceProxy::new("n1");
        p.index.set_service(
            "x/web",
            Some(service(
                "web",
                json!({"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}],
                       "externalIPs": ["2001:db8::10"]}),
            )),
        );
        p.index
            .set_slice("x/web-IPv6", Some(slice("web", "IPv6", &["fd00::2"])));
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        assert!(table_exists("ip"));
        assert!(!table_exists("ip6"), "no IPv6 table");
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        assert!(!table_exists("ip6"));
    });
}

/// The dual-stack Services of `proxy` with affinity, a Local
/// LoadBalancer limited to an IPv6 network and hairpin pods, written
/// whole by a new proxy: netlink on or off.
fn written_whole(netlink: bool) -> ServiceProxy {
    use tartan_felix::dataplane::nft::NftWriter;
    let mut p = ServiceProxy::new("n1");
    p.writer = NftWriter::default().netlink(netlink);
    p.index.set_service(
        "x/web",
        Some(service(
            "web",
            json!({"clusterIPs": ["10.96.0.10", "fd96::10"], "type": "NodePort",
                   "sessionAffinity": "ClientIP",
                   "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                             {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        )),
    );
    p.index.set_slice(
        "x/web-IPv6",
        Some(slice("web", "IPv6", &["fd00::2", "fd00::3", "fd00:1::4"])),
    );
    let lb: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb", "namespace": "x"},
        "spec": {"clusterIPs": ["fd96::11"], "type": "LoadBalancer", "externalTrafficPolicy": "Local",
                 "loadBalancerSourceRanges": ["2001:db8:7::/48", "198.51.100.0/24"],
                 "ports": [{"name": "http", "port": 80, "nodePort": 30081}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "2001:db8:1::7"}]}}
    }))
    .unwrap();
    p.index
        .set_service("x/lb", ServiceHalves::from_service(&lb).unwrap());
    p.index
        .set_local_pods(["fd00::2", "10.0.0.2"].map(|a| a.parse::<std::net::IpAddr>().unwrap()));
    assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
    assert_eq!(p.sync(true).unwrap(), Written::Nothing);
    p
}

/// A new IPv6 table written as nft's skeleton plus elements encoded
/// straight from the table (16-byte addresses in concatenated netlink
/// keys) is the table nft alone writes from JSON; written again over
/// itself by a restarted felix, it is updated in place.
#[test]
fn a_new_ipv6_table_over_netlink_equals_the_nft_one_and_is_rewritten_in_place() {
    use tartan_felix::dataplane::svc_whole::Whole;
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    let build = |netlink: bool| {
        in_new_netns(move || {
            let p = written_whole(netlink);
            let want = if netlink {
                Whole::Fresh
            } else {
                Whole::Replaced
            };
            assert_eq!(p.v6.last_whole, Some(want));
            let table = common::normalized_table("ip6", "tartan-svc");
            if netlink {
                // A restarted felix writes over the table in place.
                let again = written_whole(true);
                assert_eq!(again.v6.last_whole, Some(Whole::InPlace));
                assert_eq!(common::normalized_table("ip6", "tartan-svc"), table);
            }
            table
        })
    };
    let over_netlink = build(true);
    let by_nft = build(false);
    let text = serde_json::to_string(&over_netlink).unwrap();
    for needle in [
        "fd00:1::4",
        "2001:db8:7::",
        "fe_3_a10800",
        "fd96::11",
        "icmpv6",
        "ipv6_addr",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
    assert_eq!(over_netlink, by_nft);
}
