//! felix's two nftables tables against the real `nft` and kernel, each in
//! a network namespace of its own: the whole table loads, the drift check
//! finds nothing after a write and finds a hand edit, and differences
//! apply. (nft 1.0.6's JSON input has gaps; this is where they show.)

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_felix::dataplane::nft::{NftDriver, Written};
use tartan_felix::services::render::{SvcNft, is_dynamic};
use tartan_felix::services::{self, ServiceInfo, SliceInfo};
use tartan_policy::compile::{Endpoint, NamedPort, compile};
use tartan_policy::ir;

mod common;
use common::in_new_netns;

fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn endpoint(ns: &str, pod: &str, ip: &str, iface: Option<&str>) -> Endpoint {
    Endpoint {
        namespace: ns.into(),
        labels: std::sync::Arc::new([("pod".to_string(), pod.to_string())].into()),
        addrs: vec![ip.parse().unwrap()],
        ports: [NamedPort {
            name: "http".into(),
            protocol: 6,
            port: 80,
        }]
        .into(),
        interface: iface.map(String::from),
    }
}

fn kube(spec: serde_json::Value) -> ir::Policy {
    let np =
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "x"}, "spec": spec}))
            .unwrap();
    ir::from_kubernetes(&tartan_policy::k8s::from_network_policy(&np).unwrap())
}

#[test]
fn policy_table_loads_checks_and_changes() {
    in_new_netns(|| {
        let eps = vec![
            endpoint("x", "a", "10.0.0.1", Some("tarxa")),
            endpoint("x", "b", "10.0.0.2", Some("tarxb")),
            endpoint("y", "c", "10.0.1.1", None),
        ];
        let ns = BTreeMap::new();
        let p1 = kube(json!({"podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}], "ports": [{"port": "http"}]},
                        {"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.0.1.0/24"]}}], "ports": [{"port": 81, "endPort": 90, "protocol": "UDP"}]}],
            "egress": [{}]}));
        let mut d: NftDriver<tartan_policy::compile::Ruleset> = NftDriver::default();
        let rs = compile(std::slice::from_ref(&p1), &eps, &[], &ns);
        assert!(matches!(
            d.apply(&rs, false, &|_| false).unwrap(),
            Written::Full(_)
        ));
        assert_eq!(
            d.apply(&rs, true, &|_| false).unwrap(),
            Written::Nothing,
            "the drift check must match what was written"
        );
        // A pod relabelled: elements only.
        let mut eps2 = eps.clone();
        std::sync::Arc::make_mut(&mut eps2[1].labels).insert("pod".into(), "a".into());
        let rs2 = compile(std::slice::from_ref(&p1), &eps2, &[], &ns);
        assert!(matches!(
            d.apply(&rs2, false, &|_| false).unwrap(),
            Written::Difference(_)
        ));
        assert_eq!(d.apply(&rs2, true, &|_| false).unwrap(), Written::Nothing);
        // By hand: a profile chain flushed. The check sees it and rebuilds.
        let chain = rs2
            .chains
            .keys()
            .find(|c| c.starts_with('q'))
            .unwrap()
            .clone();
        nft(&["flush", "chain", "inet", "tartan", &chain]);
        assert!(matches!(
            d.apply(&rs2, true, &|_| false).unwrap(),
            Written::Full(_)
        ));
        // Every policy gone: its chains and sets leave.
        let empty = compile(&[], &eps, &[], &ns);
        assert!(matches!(
            d.apply(&empty, false, &|_| false).unwrap(),
            Written::Difference(_)
        ));
        let listing = nft(&["list", "table", "inet", "tartan"]);
        assert!(!listing.contains(&chain), "{listing}");
        assert_eq!(d.apply(&empty, true, &|_| false).unwrap(), Written::Nothing);
    });
}

fn svc(spec: serde_json::Value) -> ServiceInfo {
    let s: Service = serde_json::from_value(
        json!({"metadata": {"name": "web", "namespace": "x"}, "spec": spec}),
    )
    .unwrap();
    ServiceInfo::<std::net::Ipv4Addr>::from_service(&s)
        .unwrap()
        .unwrap()
}

fn slice(ips: &[&str]) -> SliceInfo {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "nodeName": "n1"}))
        .collect();
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-1", "namespace": "x", "labels": {services::SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}], "endpoints": eps})).unwrap();
    SliceInfo::from_slice(&s, "n1").unwrap()
}

fn service_table(spec: serde_json::Value, ips: &[&str]) -> SvcNft {
    let services = BTreeMap::from([("x/web".to_string(), svc(spec))]);
    let slices = BTreeMap::from([("x/web-1".to_string(), slice(ips))]);
    let local: BTreeSet<std::net::Ipv4Addr> = ["10.0.0.5".parse().unwrap()].into();
    SvcNft::from_table(&services::desired(&services, &slices, "", local))
}

#[test]
fn service_table_loads_checks_and_changes() {
    in_new_netns(|| {
        let spec = json!({"clusterIP": "10.96.0.10", "type": "NodePort", "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
            "ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"name": "dns", "port": 53, "protocol": "UDP"}]});
        let mut d: NftDriver<SvcNft> = NftDriver::default();
        let t = service_table(spec.clone(), &["10.0.0.5", "10.0.1.5"]);
        assert!(matches!(
            d.apply(&t, false, &is_dynamic).unwrap(),
            Written::Full(_)
        ));
        assert_eq!(d.apply(&t, true, &is_dynamic).unwrap(), Written::Nothing);
        let listing = nft(&["list", "table", "ip", "tartan-svc"]);
        assert!(listing.contains("fe_2_a30"), "{listing}");
        // One more endpoint, then none.
        let t2 = service_table(spec.clone(), &["10.0.0.5", "10.0.1.5", "10.0.1.6"]);
        assert!(matches!(
            d.apply(&t2, false, &is_dynamic).unwrap(),
            Written::Difference(_)
        ));
        assert_eq!(d.apply(&t2, true, &is_dynamic).unwrap(), Written::Nothing);
        let t3 = service_table(spec, &[]);
        assert!(matches!(
            d.apply(&t3, false, &is_dynamic).unwrap(),
            Written::Difference(_)
        ));
        let listing = nft(&["list", "table", "ip", "tartan-svc"]);
        assert!(!listing.contains("fe_3_a30"), "{listing}");
        assert!(
            listing.contains("10.96.0.10 . tcp . 80"),
            "the frontend is refused: {listing}"
        );
        assert_eq!(d.apply(&t3, true, &is_dynamic).unwrap(), Written::Nothing);
    });
}

/// A proxy holding one NodePort Service `x/web` with endpoints `ips`,
/// 10.0.0.5 local, its table written whole.
fn web_proxy(ips: &[&str]) -> tartan_felix::dataplane::services::ServiceProxy {
    let spec = json!({"clusterIP": "10.96.0.10", "type": "NodePort",
        "ports": [{"name": "http", "port": 80, "nodePort": 30080}]});
    let mut p = tartan_felix::dataplane::services::ServiceProxy::new("n1");
    p.index.set_service("x/web", Some(svc(spec)));
    p.index.set_slice("x/web-1", Some(slice(ips)));
    p.index
        .set_local_pods(["10.0.0.5".parse::<std::net::Ipv4Addr>().unwrap()]);
    assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
    p
}

#[test]
fn service_proxy_writes_per_service_differences() {
    in_new_netns(|| {
        let mut p = web_proxy(&["10.0.0.5", "10.0.1.5"]);
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        p.index.set_slice("x/web-1", Some(slice(&["10.0.0.5"])));
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        let listing = nft(&["list", "map", "ip", "tartan-svc", "fe_addr"]);
        assert!(
            listing.contains("10.0.0.5") && !listing.contains("10.0.1.5"),
            "{listing}"
        );
        // A chain emptied by hand: the check writes the table whole again.
        nft(&["flush", "chain", "ip", "tartan-svc", "fe_dnat"]);
        assert!(matches!(p.sync(true).unwrap(), Written::Full(_)));
        // A LoadBalancer IP open to two client networks only.
        let lb: Service = serde_json::from_value(json!({
            "metadata": {"name": "lb", "namespace": "x"},
            "spec": {"clusterIP": "10.96.0.11", "type": "LoadBalancer",
                     "loadBalancerSourceRanges": ["198.51.100.0/24", "203.0.113.7/32", "2001:db8::/32"],
                     "ports": [{"name": "http", "port": 80, "nodePort": 30081}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
        }))
        .unwrap();
        p.index.set_service(
            "x/lb",
            ServiceInfo::<std::net::Ipv4Addr>::from_service(&lb).unwrap(),
        );
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        let listing = nft(&["list", "set", "ip", "tartan-svc", "lb_allowed"]);
        assert!(
            listing.contains("192.0.2.10 . tcp . 80 . 198.51.100.0/24")
                && listing.contains("192.0.2.10 . tcp . 80 . 203.0.113.7"),
            "{listing}"
        );
        p.index.set_service("x/lb", None::<ServiceInfo>);
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        let listing = nft(&["list", "set", "ip", "tartan-svc", "lb_allowed"]);
        assert!(!listing.contains("192.0.2.10"), "{listing}");
        nft(&["delete", "table", "ip", "tartan-svc"]);
        assert!(matches!(p.sync(true).unwrap(), Written::Full(_)));
        p.index.set_slice("x/web-1", None::<SliceInfo>);
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        let listing = nft(&["list", "set", "ip", "tartan-svc", "reject_fe"]);
        assert!(listing.contains("10.96.0.10"), "{listing}");
    });
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// In the test's namespace: the node's address 192.168.7.2 and a default
/// route into a device that goes nowhere (what is not answered hangs).
fn default_route_to_nowhere() {
    ip(&["link", "set", "lo", "up"]);
    ip(&[
        "link", "add", "out0", "type", "veth", "peer", "name", "out1",
    ]);
    ip(&["addr", "add", "192.168.7.2/24", "dev", "out0"]);
    ip(&["link", "set", "out0", "up"]);
    ip(&["link", "set", "out1", "up"]);
    ip(&["route", "add", "default", "via", "192.168.7.1"]);
}

/// The node's own connections to a ClusterIP: to a port the Service
/// declares they are DNATed to an endpoint; to any other port they are
/// refused at once (TCP reset, ICMP port unreachable) instead of leaving
/// by the default route, where they would hang.
#[test]
fn a_cluster_ip_refuses_ports_its_service_does_not_declare() {
    use std::io::ErrorKind;
    use std::net::{SocketAddr, TcpStream, UdpSocket};
    use std::time::Duration;
    in_new_netns(|| {
        default_route_to_nowhere();
        let mut p = web_proxy(&["10.0.1.5"]);
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        let listing = nft(&["list", "set", "ip", "tartan-svc", "cluster_ips"]);
        assert!(listing.contains("10.96.0.10"), "{listing}");
        let connect = |port: u16| {
            let to: SocketAddr = format!("10.96.0.10:{port}").parse().unwrap();
            TcpStream::connect_timeout(&to, Duration::from_millis(1500))
                .map(|_| ())
                .map_err(|e| e.kind())
        };
        assert_eq!(connect(81), Err(ErrorKind::ConnectionRefused));
        // The declared port is DNATed (to an endpoint nothing answers
        // for), not refused.
        assert_eq!(connect(80), Err(ErrorKind::TimedOut));
        // Rejected in `output`, a datagram's send itself fails; had it
        // left, nothing would say so.
        let send = |port: u16| {
            let udp = UdpSocket::bind("0.0.0.0:0").unwrap();
            udp.connect(format!("10.96.0.10:{port}")).unwrap();
            udp.send(b"x").map(|_| ()).map_err(|e| e.kind())
        };
        assert_eq!(send(53), Err(ErrorKind::PermissionDenied));
        assert_eq!(send(80), Err(ErrorKind::PermissionDenied), "no UDP 80");
        // The Service gone: its ClusterIP is no longer held.
        p.index.set_service("x/web", None::<ServiceInfo>);
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        assert_eq!(p.sync(true).unwrap(), Written::Nothing);
        let listing = nft(&["list", "set", "ip", "tartan-svc", "cluster_ips"]);
        assert!(!listing.contains("10.96.0.10"), "{listing}");
    });
}

/// A NodePort without endpoints refuses new connections only: the
/// replies to the node's own connection made from that port as its
/// local port pass (kube-proxy checks `ct state new`).
#[test]
fn a_reply_to_the_nodes_connection_from_a_node_port_is_not_refused() {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, setsockopt, socket, sockopt,
    };
    use nix::sys::time::TimeVal;
    use std::io::ErrorKind;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Duration;
    in_new_netns(|| {
        ip(&["link", "set", "lo", "up"]);
        ip(&["addr", "add", "192.168.7.2/32", "dev", "lo"]);
        ip(&["addr", "add", "192.168.7.3/32", "dev", "lo"]);
        let p = web_proxy(&[]);
        let listing = nft(&["list", "set", "ip", "tartan-svc", "reject_np"]);
        assert!(listing.contains("tcp . 30080"), "{listing}");
        let server = TcpListener::bind("192.168.7.3:9000").unwrap();
        // From 192.168.7.2:30080: the server's SYN-ACK is to a NodePort.
        let fd = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::empty(),
            None,
        )
        .unwrap();
        setsockopt(&fd, sockopt::ReuseAddr, &true).unwrap();
        setsockopt(&fd, sockopt::SendTimeout, &TimeVal::new(2, 0)).unwrap();
        bind(fd.as_raw_fd(), &SockaddrIn::new(192, 168, 7, 2, 30080)).unwrap();
        connect(fd.as_raw_fd(), &SockaddrIn::new(192, 168, 7, 3, 9000)).expect("the reply passes");
        let mut client = TcpStream::from(fd);
        let (mut accepted, _) = server.accept().unwrap();
        std::io::Write::write_all(&mut accepted, b"ok").unwrap();
        let mut got = [0u8; 2];
        std::io::Read::read_exact(&mut client, &mut got).unwrap();
        assert_eq!(&got, b"ok");
        // A new connection to the NodePort is still refused.
        let to = "192.168.7.2:30080".parse().unwrap();
        let refused = TcpStream::connect_timeout(&to, Duration::from_millis(1500)).map(|_| ());
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(ErrorKind::ConnectionRefused)
        );
        drop(p);
    });
}

/// Give `x/web` the endpoints `ips` and check the change went over
/// netlink.
fn endpoints_over_netlink(p: &mut tartan_felix::dataplane::services::ServiceProxy, ips: &[&str]) {
    p.index.set_slice("x/web-1", Some(slice(ips)));
    p.index.update();
    let patch = p.index.take_patch().expect("a patch");
    assert_eq!(
        p.writer.write(&patch, "ip", "tartan-svc").unwrap(),
        tartan_felix::dataplane::nft::Via::Netlink,
        "{patch:#}"
    );
}

/// An endpoint replaced by another (the count unchanged) changes map
/// elements only, and that goes to the kernel over netlink.
#[test]
fn a_replaced_endpoint_is_an_element_change_over_netlink() {
    in_new_netns(|| {
        let mut p = web_proxy(&["10.0.0.5", "10.0.1.5"]);
        endpoints_over_netlink(&mut p, &["10.0.0.5", "10.0.1.6"]);
        let listing = nft(&["list", "map", "ip", "tartan-svc", "fe_addr"]);
        assert!(
            listing.contains("10.0.1.6") && !listing.contains("10.0.1.5"),
            "{listing}"
        );
    });
}

/// An endpoint added to or taken from a Service repoints its frontend to
/// another standing picking chain: elements only, over netlink.
#[test]
fn an_endpoint_added_or_removed_is_an_element_change_over_netlink() {
    in_new_netns(|| {
        let mut p = web_proxy(&["10.0.0.5"]);
        endpoints_over_netlink(&mut p, &["10.0.0.5", "10.0.1.6"]);
        endpoints_over_netlink(&mut p, &["10.0.1.6"]);
        let listing = nft(&["list", "map", "ip", "tartan-svc", "frontends"]);
        // Picker id 1: the standing chain for one endpoint.
        assert!(
            listing.contains("10.96.0.10 . tcp . 80 : 0x00000001"),
            "{listing}"
        );
        assert_eq!(
            p.sync(true).unwrap(),
            Written::Nothing,
            "the drift check agrees"
        );
    });
}

/// The whole service table as the kernel lists it, normalized.
fn normalized_service_table() -> Vec<serde_json::Value> {
    common::normalized_table("ip", "tartan-svc")
}

/// A new table written as nft's skeleton plus elements encoded straight
/// from the table (netlink) is the table nft alone writes from JSON: every
/// kind of element, affinity, reject and drop sets, LB source ranges,
/// hairpin.
#[test]
fn a_new_service_table_over_netlink_equals_the_nft_one() {
    use tartan_felix::dataplane::nft::NftWriter;
    use tartan_felix::dataplane::services::ServiceProxy;
    let build = |netlink: bool| {
        in_new_netns(move || {
            let mut p = ServiceProxy::new("n1");
            p.writer = NftWriter::default().netlink(netlink);
            p.index.set_service(
                "x/web",
                Some(svc(json!({"clusterIP": "10.96.0.10", "type": "NodePort", "sessionAffinity": "ClientIP",
                    "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 30}},
                    "ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"name": "dns", "port": 53, "protocol": "UDP"}]}))),
            );
            p.index.set_slice(
                "x/web-1",
                Some(slice(&["10.0.0.5", "10.0.1.5", "10.0.2.5"])),
            );
            let lb: Service = serde_json::from_value(json!({
                "metadata": {"name": "lb", "namespace": "x"},
                "spec": {"clusterIP": "10.96.0.11", "type": "LoadBalancer", "externalTrafficPolicy": "Local",
                         "loadBalancerSourceRanges": ["198.51.100.0/24", "203.0.113.7/32"],
                         "ports": [{"name": "http", "port": 80, "nodePort": 30081}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
            }))
            .unwrap();
            p.index.set_service(
                "x/lb",
                ServiceInfo::<std::net::Ipv4Addr>::from_service(&lb).unwrap(),
            );
            p.index.set_service(
                "x/empty",
                Some(svc(
                    json!({"clusterIP": "10.96.0.12", "ports": [{"port": 81}]}),
                )),
            );
            p.index.set_local_pods([
                "10.0.0.5".parse::<std::net::Ipv4Addr>().unwrap(),
                "10.0.0.6".parse().unwrap(),
            ]);
            assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
            assert_eq!(p.sync(true).unwrap(), Written::Nothing);
            normalized_service_table()
        })
    };
    let over_netlink = build(true);
    let by_nft = build(false);
    let text = serde_json::to_string_pretty(&over_netlink).unwrap();
    for needle in [
        "10.0.2.5",
        "198.51.100.0",
        "fe_3_a30",
        "10.96.0.12",
        "30081",
    ] {
        assert!(text.contains(needle), "{needle} missing: {text}");
    }
    assert_eq!(over_netlink, by_nft);
}

/// The policy table as `nft` lists it, with set elements sorted, handles
/// left out, and chains and rules by chain name (the kernel lists chains
/// in the order they were made; rules keep their order in a chain).
fn policy_listing() -> String {
    let v: serde_json::Value =
        serde_json::from_str(&nft(&["-j", "list", "table", "inet", "tartan"])).unwrap();
    let mut out = Vec::new();
    for o in v["nftables"].as_array().unwrap() {
        if o.get("metainfo").is_some() {
            continue;
        }
        let mut o = o.clone();
        if let Some(m) = o
            .as_object_mut()
            .and_then(|m| m.values_mut().next())
            .and_then(|m| m.as_object_mut())
        {
            m.remove("handle");
            if let Some(e) = m.get_mut("elem").and_then(|e| e.as_array_mut()) {
                e.sort_by_key(|x| x.to_string());
            }
        }
        let kind = o
            .as_object()
            .and_then(|m| m.keys().next())
            .cloned()
            .unwrap_or_default();
        let body = &o[&kind];
        let name = body["chain"]
            .as_str()
            .or(body["name"].as_str())
            .unwrap_or("")
            .to_string();
        out.push((kind, name, o.to_string()));
    }
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out.into_iter()
        .map(|(_, _, l)| l)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A pod relabelled into a profile no other pod has: the new profile
/// chain, its rules, the map and set elements, and the old profile's
/// removal all go over netlink in one transaction, and the table ends up
/// as `nft` writes the new ruleset whole.
#[test]
fn a_relabel_into_a_new_profile_goes_over_netlink_and_matches_nft() {
    use tartan_felix::dataplane::nft::{NftWriter, Table, Via};
    use tartan_policy::compile::Ruleset;
    let rulesets = || {
        let p1 = kube(json!({"podSelector": {"matchLabels": {"pod": "a"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}));
        let mut p2 = kube(json!({"podSelector": {"matchLabels": {"role": "db"}},
            "ingress": [{"ports": [{"port": 5432}]}]}));
        p2.source = tartan_policy::ir::Source::Kubernetes("x".into(), "q".into());
        // Allows everything in: its chain is mark statements only.
        let mut p3 = kube(json!({"podSelector": {"matchLabels": {"tier": "x"}}, "ingress": [{}]}));
        p3.source = tartan_policy::ir::Source::Kubernetes("x".into(), "r".into());
        let ns = BTreeMap::new();
        let mut eps = vec![
            endpoint("x", "a", "10.0.0.1", Some("tarxa")),
            endpoint("x", "b", "10.0.0.2", Some("tarxb")),
            endpoint("x", "c", "10.0.0.3", Some("tarxc")),
        ];
        std::sync::Arc::make_mut(&mut eps[2].labels).insert("role".into(), "db".into());
        // a alone has profile [p1], c alone [p2]; relabelled, a needs
        // [p1, p2, p3], which no pod had, and p3's chain is new.
        let before = compile([&p1, &p2, &p3], &eps, &[], &ns);
        std::sync::Arc::make_mut(&mut eps[0].labels).insert("role".into(), "db".into());
        std::sync::Arc::make_mut(&mut eps[0].labels).insert("tier".into(), "x".into());
        let after = compile([&p1, &p2, &p3], &eps, &[], &ns);
        (before, after)
    };
    let (before, after) = rulesets();
    assert_ne!(before, after);
    let by_netlink = in_new_netns(move || {
        let mut w = NftWriter::default().netlink(true);
        w.write(&before.full(), "inet", "tartan").unwrap();
        let d = Ruleset::diff(&before, &after).unwrap();
        assert!(
            d.to_string().contains("\"chain\""),
            "a new profile chain: {d}"
        );
        assert_eq!(
            w.write(&d, "inet", "tartan").unwrap(),
            Via::Netlink,
            "{d:#}"
        );
        // And back: the profile emptied and removed, over netlink too.
        let back = Ruleset::diff(&after, &before).unwrap();
        assert_eq!(
            w.write(&back, "inet", "tartan").unwrap(),
            Via::Netlink,
            "{back:#}"
        );
        let listed_back = policy_listing();
        assert_eq!(w.write(&d, "inet", "tartan").unwrap(), Via::Netlink);
        (policy_listing(), listed_back)
    });
    let (before, after) = rulesets();
    let by_nft = in_new_netns(move || {
        let mut w = NftWriter::default().netlink(false);
        w.write(&before.full(), "inet", "tartan").unwrap();
        let listed_before = policy_listing();
        w.write(&after.full(), "inet", "tartan").unwrap();
        (policy_listing(), listed_before)
    });
    assert_eq!(by_netlink.0, by_nft.0, "after the relabel");
    assert_eq!(by_netlink.1, by_nft.1, "after the relabel back");
}

/// Datagrams from the "pod" on `tarpod0` that the node forwarded: a
/// counter in a table of the test's own, after felix's chains.
fn forwarded_from_pod() -> u64 {
    let v = common::nft_list("inet", "probe");
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|o| o.get("counter").filter(|c| c["name"] == "seen"))
        .map(|c| c["packets"].as_u64().unwrap())
        .unwrap()
}

/// A node just booted: before felix has read the datastore, its start
/// writes a policy table in which every pod interface is unknown, so what
/// a pod sends through the node is dropped; felix's first full write
/// replaces it whole, and a felix restarted finds its table and leaves it.
#[test]
fn at_start_without_a_policy_table_pod_interfaces_are_closed_until_the_first_write() {
    use std::sync::mpsc;
    use tartan_felix::dataplane::policy::close_pods_if_no_table;
    in_new_netns(|| {
        // The pod: a network namespace of its own, on a thread that sends
        // a datagram past the node each time it is asked.
        let (tid_tx, tid_rx) = mpsc::channel();
        let (ask, asked) = mpsc::channel::<()>();
        let (done, sent) = mpsc::channel::<()>();
        let pod = std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            tid_tx.send(nix::unistd::gettid().as_raw()).unwrap();
            // Set up by the node first.
            asked.recv().unwrap();
            ip(&["link", "set", "lo", "up"]);
            ip(&["addr", "add", "10.0.0.2/24", "dev", "podeth"]);
            ip(&["link", "set", "podeth", "up"]);
            ip(&["route", "add", "default", "via", "10.0.0.1"]);
            done.send(()).unwrap();
            let udp = std::net::UdpSocket::bind("10.0.0.2:0").unwrap();
            while asked.recv().is_ok() {
                udp.send_to(b"x", "10.9.9.9:9").unwrap();
                std::thread::sleep(std::time::Duration::from_millis(100));
                done.send(()).unwrap();
            }
        });
        let tid = tid_rx.recv().unwrap().to_string();
        ip(&[
            "link", "add", "tarpod0", "type", "veth", "peer", "name", "podeth", "netns", &tid,
        ]);
        ip(&["addr", "add", "10.0.0.1/24", "dev", "tarpod0"]);
        ip(&["link", "set", "tarpod0", "up"]);
        // Where the datagrams leave (the forward hook counts them before
        // the neighbour is looked for).
        ip(&[
            "link", "add", "out0", "type", "veth", "peer", "name", "out1",
        ]);
        ip(&["link", "set", "out0", "up"]);
        ip(&["link", "set", "out1", "up"]);
        ip(&["route", "add", "10.9.9.0/24", "dev", "out0"]);
        std::fs::write("/proc/sys/net/ipv4/ip_forward", "1").unwrap();
        nft(&["add", "table", "inet", "probe"]);
        nft(&["add", "counter", "inet", "probe", "seen"]);
        nft(&[
            "add",
            "chain",
            "inet",
            "probe",
            "after",
            "{ type filter hook forward priority 10; }",
        ]);
        nft(&[
            "add", "rule", "inet", "probe", "after", "iifname", "tarpod0", "counter", "name",
            "seen",
        ]);
        ask.send(()).unwrap();
        sent.recv().unwrap();
        // One datagram, and the count once it is `want` or after a wait:
        // the first waits for the pod to resolve its gateway, which takes
        // longer than the pod's pause on a loaded machine. A datagram that
        // must be dropped is checked after the pause alone (a count above
        // `want` is seen at once).
        let send = |want: u64| {
            ask.send(()).unwrap();
            sent.recv().unwrap();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            loop {
                let n = forwarded_from_pod();
                if n >= want || std::time::Instant::now() > deadline {
                    return n;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        };
        // No table: open (what a node just booted had until felix's
        // first write).
        assert_eq!(send(1), 1, "the test's path forwards");
        assert!(close_pods_if_no_table().unwrap());
        assert_eq!(send(1), 1, "dropped before felix has read anything");
        assert_eq!(send(1), 1);
        // The first full write: the pod known, no policy selecting it.
        let eps = vec![endpoint("x", "a", "10.0.0.2", Some("tarpod0"))];
        let rs = compile(&[], &eps, &[], &BTreeMap::new());
        let mut d: NftDriver<tartan_policy::compile::Ruleset> = NftDriver::default();
        assert!(matches!(
            d.apply(&rs, false, &|_| false).unwrap(),
            Written::Full(_)
        ));
        assert_eq!(send(2), 2, "open once written");
        // Nothing of the stub is left: the kernel's table is the one a
        // fresh write makes.
        assert_eq!(d.apply(&rs, true, &|_| false).unwrap(), Written::Nothing);
        let written = common::normalized_table("inet", "tartan");
        let fresh = {
            let rs = rs.clone();
            in_new_netns(move || {
                let mut d: NftDriver<tartan_policy::compile::Ruleset> = NftDriver::default();
                d.apply(&rs, false, &|_| false).unwrap();
                common::normalized_table("inet", "tartan")
            })
        };
        assert_eq!(written, fresh);
        // felix restarted: its table is there and stays as it is.
        assert!(!close_pods_if_no_table().unwrap());
        assert_eq!(common::normalized_table("inet", "tartan"), written);
        assert_eq!(send(3), 3);
        drop(ask);
        pod.join().unwrap();
    });
}

/// The node's own connections to a LoadBalancer IP limited by
/// `loadBalancerSourceRanges` are checked against the address it sends
/// from, as kube-proxy checks them: outside the ranges, dropped; inside,
/// DNATed to the endpoint.
#[test]
fn the_nodes_own_connections_obey_load_balancer_source_ranges() {
    use std::net::{SocketAddr, TcpListener, TcpStream};
    use std::time::Duration;
    in_new_netns(|| {
        default_route_to_nowhere();
        // The endpoint: a listener on the node itself.
        let server = TcpListener::bind("192.168.7.2:8080").unwrap();
        server.set_nonblocking(true).unwrap();
        let lb = |ranges: &[&str]| {
            let s: Service = serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "x"},
                "spec": {"clusterIP": "10.96.0.11", "type": "LoadBalancer",
                         "loadBalancerSourceRanges": ranges,
                         "ports": [{"name": "http", "port": 80, "nodePort": 30081}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}
            }))
            .unwrap();
            ServiceInfo::<std::net::Ipv4Addr>::from_service(&s).unwrap()
        };
        let mut p = tartan_felix::dataplane::services::ServiceProxy::new("n1");
        p.index.set_service("x/web", lb(&["198.51.100.0/24"]));
        p.index.set_slice("x/web-1", Some(slice(&["192.168.7.2"])));
        assert!(matches!(p.sync(false).unwrap(), Written::Full(_)));
        let connect = || {
            let to: SocketAddr = "192.0.2.10:80".parse().unwrap();
            TcpStream::connect_timeout(&to, Duration::from_millis(1500))
                .map(|_| ())
                .map_err(|e| e.kind())
        };
        assert_eq!(
            connect(),
            Err(std::io::ErrorKind::TimedOut),
            "192.168.7.2 is outside 198.51.100.0/24: dropped"
        );
        p.index
            .set_service("x/web", lb(&["198.51.100.0/24", "192.168.7.2/32"]));
        assert!(matches!(p.sync(false).unwrap(), Written::Difference(_)));
        assert_eq!(connect(), Ok(()), "inside the ranges: served");
    });
}

/// Whether a table is there is asked of the kernel for that one table:
/// the exact family and name, an unknown family an error.
#[test]
fn a_table_is_known_by_its_family_and_whole_name() {
    use tartan_felix::dataplane::nft::table_known;
    in_new_netns(|| {
        nft(&["add", "table", "inet", "tartan-x"]);
        nft(&["add", "table", "ip", "tartan"]);
        assert!(table_known("ip", "tartan").unwrap());
        assert!(table_known("inet", "tartan-x").unwrap());
        assert!(!table_known("inet", "tartan").unwrap());
        assert!(!table_known("ip6", "tartan").unwrap());
        assert!(!table_known("ip", "tartanx").unwrap());
        assert!(table_known("bogus", "tartan").is_err());
    });
}

/// Selector address sets against the kernel: without network sets a pod
/// added is an element change over netlink, as before; a network set
/// turns the set into its interval form (a difference the kernel takes),
/// its networks grow and shrink by differences, and the way back to the
/// plain set too; after each step the table is what a whole write of the
/// same ruleset gives.
#[test]
fn selector_sets_take_network_sets_and_plain_ones_stay_on_netlink() {
    use tartan_felix::dataplane::nft::{NftWriter, Table, Via};
    use tartan_policy::compile::{NetSet, Ruleset};
    let steps = || {
        let np: tartan_api::resources::NetworkPolicy = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "x"},
            "spec": {"selector": "all()", "types": ["Ingress"], "ingress": [
                {"action": "Pass", "source": {"selector": "role == 'ext' || pod == 'b'"}}]}
        }))
        .unwrap();
        let p = tartan_policy::tartan::from_network_policy(&np).unwrap();
        let ns = BTreeMap::new();
        let mut eps = vec![
            endpoint("x", "a", "10.0.0.1", Some("tarxa")),
            endpoint("x", "b", "10.0.0.2", Some("tarxb")),
        ];
        let set = |nets: &[&str]| NetSet {
            namespace: Some("x".into()),
            labels: std::sync::Arc::new([("role".to_string(), "ext".to_string())].into()),
            nets: nets.iter().map(|n| n.parse().unwrap()).collect(),
        };
        let mut out = vec![compile([&p], &eps, &[], &ns)];
        eps.push(endpoint("x", "b", "10.0.0.3", None));
        eps.push(endpoint("x", "b", "fd00::3", None));
        out.push(compile([&p], &eps, &[], &ns));
        let steps: [&[&str]; 4] = [
            &["198.51.100.0/25", "10.0.0.4/32", "2001:db8::/33"],
            &["198.51.100.0/24", "0.0.0.0/1", "2001:db8::/32"],
            // Ranges that end at the top of each address space.
            &["128.0.0.0/1", "ffff::/16", "::/0"],
            &["198.51.100.128/25"],
        ];
        for nets in steps {
            out.push(compile([&p], &eps, &[set(nets)], &ns));
        }
        out.push(compile([&p], &eps, &[], &ns));
        out
    };
    let rulesets = steps();
    let by_diff = in_new_netns(move || {
        let mut w = NftWriter::default().netlink(true);
        w.write(&rulesets[0].full(), "inet", "tartan").unwrap();
        let mut listings = vec![];
        for (i, pair) in rulesets.windows(2).enumerate() {
            let d = Ruleset::diff(&pair[0], &pair[1]).unwrap();
            let via = w.write(&d, "inet", "tartan").unwrap();
            if i == 0 {
                assert_eq!(via, Via::Netlink, "a pod into a plain set: {d:#}");
            }
            listings.push(policy_listing());
        }
        listings
    });
    let rulesets = steps();
    let whole = in_new_netns(move || {
        let mut w = NftWriter::default().netlink(false);
        let mut listings = vec![];
        for rs in &rulesets[1..] {
            w.write(&rs.full(), "inet", "tartan").unwrap();
            listings.push(policy_listing());
        }
        listings
    });
    assert_eq!(by_diff.len(), whole.len());
    for (i, (a, b)) in by_diff.iter().zip(&whole).enumerate() {
        assert_eq!(a, b, "step {}", i + 1);
    }
    assert!(by_diff[2].contains("198.51.100.0"), "{}", by_diff[2]);
    // ::/0 takes in ffff::/16: one element, the whole IPv6 space.
    assert!(
        by_diff[3].contains(r#"{"prefix":{"addr":"::","len":0}}"#),
        "{}",
        by_diff[3]
    );
    assert!(by_diff[1].contains("interval"), "{}", by_diff[1]);
    assert!(!by_diff[5].contains("interval"), "{}", by_diff[5]);
}
