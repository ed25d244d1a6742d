//! Dual stack: a Service's IPv4 and IPv6 halves, each family's slices
//! feeding that family's frontends, and the IPv6 table rendered by the
//! same code with IPv6 types, payloads and rejects.

use std::net::Ipv6Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::index::ServiceIndex;
use super::render::{self, SvcNft};
use super::*;

fn halves(spec: serde_json::Value, status: serde_json::Value) -> Option<ServiceHalves> {
    let s: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "x"}, "spec": spec, "status": status
    }))
    .unwrap();
    ServiceHalves::from_service(&s).unwrap()
}

fn slice(family: &str, ips: &[&str]) -> Option<Slice> {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "nodeName": "n2"}))
        .collect();
    let s: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": format!("web-{family}"), "namespace": "x",
                     "labels": {SERVICE_NAME_LABEL: "web"}},
        "addressType": family,
        "ports": [{"name": "http", "port": 8080}, {"name": "dns", "port": 5353, "protocol": "UDP"}],
        "endpoints": eps
    }))
    .unwrap();
    Slice::from_slice(&s, "n1")
}

/// A dual-stack LoadBalancer: ClusterIPs, external IPs and ingress IPs of
/// both families, source ranges of IPv4 only.
fn dual_lb(ranges: serde_json::Value) -> ServiceHalves {
    halves(
        json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10",
               "clusterIPs": ["10.96.0.10", "fd96::10"], "ipFamilies": ["IPv4", "IPv6"],
               "externalIPs": ["192.0.2.1", "2001:db8::1"],
               "loadBalancerSourceRanges": ranges,
               "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                         {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}, {"ip": "2001:db8:1::7"}]}}),
    )
    .unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn a_dual_stack_service_splits_into_a_half_per_family() {
    let h = dual_lb(json!(["10.0.0.0/8"]));
    let (a, b) = (h.v4.unwrap(), h.v6.unwrap());
    assert_eq!(a.cluster_ips, [Ipv4Addr::new(10, 96, 0, 10)]);
    assert_eq!(b.cluster_ips, [v6("fd96::10")]);
    assert_eq!(b.external, [v6("2001:db8::1"), v6("2001:db8:1::7")]);
    assert_eq!(b.lb_ips, [v6("2001:db8:1::7")]);
    assert_eq!(a.lb_ips, [Ipv4Addr::new(198, 51, 100, 7)]);
    // The same ports and NodePorts in both.
    assert_eq!(a.ports, b.ports);
    assert_eq!(b.ports[0].node_port, Some(30080));
    // IPv4 networks only: the IPv6 ingress IP admits no client (a
    // limit, not none).
    assert_eq!(a.source_ranges, Some(vec!["10.0.0.0/8".parse().unwrap()]));
    assert_eq!(b.source_ranges, Some(vec![]));
    // An IPv6 range limits the IPv6 half, host bits cleared.
    let h = dual_lb(json!(["2001:db8:5::1/48", "10.0.0.0/8"]));
    assert_eq!(
        h.v6.unwrap().source_ranges,
        Some(vec!["2001:db8:5::/48".parse().unwrap()])
    );
    assert_eq!(dual_lb(json!([])).v6.unwrap().source_ranges, None);
}

#[test]
fn a_family_serves_a_service_only_through_a_cluster_ip_of_its_own() {
    // IPv6 single stack: no IPv4 half (its NodePorts are not opened on
    // the node's IPv4 addresses, as kube-proxy's IPv4 proxier skips it).
    let h = halves(
        json!({"type": "NodePort", "clusterIPs": ["fd96::10"], "ipFamilies": ["IPv6"],
               "externalIPs": ["192.0.2.1"],
               "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}),
        json!({}),
    )
    .unwrap();
    assert!(h.v4.is_none());
    assert!(h.v6.unwrap().external.is_empty(), "an IPv4 external IP");
    // IPv4 single stack: its IPv6 external IP is nobody's.
    let h = halves(
        json!({"clusterIP": "10.96.0.10", "externalIPs": ["2001:db8::1"],
               "ports": [{"name": "http", "port": 80}]}),
        json!({}),
    )
    .unwrap();
    assert!(h.v6.is_none());
    assert!(h.v4.unwrap().external.is_empty());
    // No ClusterIP at all yet: the IPv4 proxy's, as before.
    let h = halves(
        json!({"externalIPs": ["192.0.2.1"], "ports": [{"port": 80}]}),
        json!({}),
    )
    .unwrap();
    assert!(h.v4.is_some() && h.v6.is_none());
    // Headless: neither.
    assert_eq!(
        halves(
            json!({"clusterIPs": ["None"], "ports": [{"port": 80}]}),
            json!({})
        ),
        None
    );
}

#[test]
fn slices_are_read_by_address_type_and_fqdn_ones_ignored() {
    assert!(matches!(slice("IPv4", &["10.244.0.5"]), Some(Slice::V4(_))));
    let Some(Slice::V6(s)) = slice("IPv6", &["fd00::5", "10.244.0.5"]) else {
        panic!("an IPv6 slice");
    };
    // An address of the other family is no endpoint of this slice.
    assert_eq!(
        s.endpoints.iter().map(|e| e.addr).collect::<Vec<_>>(),
        [v6("fd00::5")]
    );
    assert_eq!(slice("FQDN", &["web.example"]), None);
}

/// The index holding the dual-stack `x/web` with slices of both
/// families: each family's frontends go to that family's endpoints.
fn dual_index(v6_endpoints: &[&str]) -> ServiceIndex {
    let mut ix = ServiceIndex::new("n1");
    ix.set_service("x/web", Some(dual_lb(json!(["2001:db8:9::/48"]))));
    ix.set_slice("x/web-IPv4", slice("IPv4", &["10.244.1.5"]));
    ix.set_slice("x/web-IPv6", slice("IPv6", v6_endpoints));
    ix.update();
    ix
}

#[test]
fn each_family_table_has_its_frontends_and_its_endpoints() {
    let ix = dual_index(&["fd00::5", "fd00::6"]);
    let t4 = ix.table();
    let t6 = ix.family::<Ipv6Addr>().table();
    let cip4 = (Ipv4Addr::new(10, 96, 0, 10), TCP, 80);
    let cip6 = (v6("fd96::10"), TCP, 80);
    assert_eq!(t4.frontends[&cip4].count, 1);
    assert_eq!(t6.frontends[&cip6].count, 2);
    let slots6: Vec<String> = t6.fe_slots.values().map(|b| b.addr.to_string()).collect();
    assert!(slots6.iter().all(|a| a.starts_with("fd00::")), "{slots6:?}");
    assert!(t4.fe_slots.values().all(|b| b.addr.octets()[0] == 10));
    // NodePorts in both tables, masqueraded (Cluster policy) in both.
    assert!(t4.node_ports[&(TCP, 30080)].masq && t6.node_ports[&(TCP, 30080)].masq);
    assert!(t6.frontends.contains_key(&(v6("2001:db8:1::7"), TCP, 80)));
    assert!(t6.cluster_ips.contains(&v6("fd96::10")));
    // The IPv6 source range limits the IPv6 ingress IP; the IPv4 one is
    // limited to no client (the list named no IPv4 network).
    let lb6 = (v6("2001:db8:1::7"), TCP, 80);
    assert!(t6.lb_limited.contains(&lb6));
    assert_eq!(
        t6.lb_allowed
            .iter()
            .filter(|(f, _)| *f == lb6)
            .map(|(_, n)| n.to_string())
            .collect::<Vec<_>>(),
        ["2001:db8:9::/48"]
    );
    assert!(
        t4.lb_limited
            .contains(&(Ipv4Addr::new(198, 51, 100, 7), TCP, 80))
    );
    assert!(t4.lb_allowed.is_empty());
    assert!(ix.consistent());
}

#[test]
fn ipv6_without_endpoints_is_refused_while_ipv4_is_served() {
    let ix = dual_index(&[]);
    let t6 = ix.family::<Ipv6Addr>().table();
    assert!(t6.reject_fe.contains(&(v6("fd96::10"), TCP, 80)));
    assert!(t6.reject_np.contains(&(TCP, 30080)));
    assert!(t6.frontends.is_empty());
    assert!(
        ix.table()
            .frontends
            .contains_key(&(Ipv4Addr::new(10, 96, 0, 10), TCP, 80))
    );
}

#[test]
fn an_ipv6_endpoint_gone_leaves_ipv6_stale_flows_only() {
    let mut ix = dual_index(&["fd00::5", "fd00::6"]);
    // Both written whole, so that a change to either would be a patch.
    ix.family_mut::<Ipv4Addr>().written_whole();
    ix.family_mut::<Ipv6Addr>().written_whole();
    let _ = ix.take_stale();
    ix.set_slice("x/web-IPv6", slice("IPv6", &["fd00::6"]));
    ix.update();
    let flows = ix.take_stale();
    assert!(flows.v4.is_empty());
    // UDP 53 on the ClusterIP and the ingress and external IPs, and the
    // NodePort-less UDP port has no node port: 3 frontends.
    assert_eq!(flows.v6.len(), 3, "{flows:?}");
    assert!(
        flows
            .v6
            .iter()
            .all(|f| f.proto == UDP && f.endpoint.unwrap().addr == v6("fd00::5"))
    );
    // The IPv4 half untouched: no IPv4 patch.
    assert!(ix.family_mut::<Ipv4Addr>().take_patch().is_none());
    assert!(ix.family_mut::<Ipv6Addr>().take_patch().is_some());
}

#[test]
fn a_slice_changing_family_leaves_the_other_family() {
    let mut ix = dual_index(&["fd00::5"]);
    // The IPv4 slice's key now holds IPv6 endpoints.
    ix.set_slice("x/web-IPv4", slice("IPv6", &["fd00::7"]));
    ix.update();
    assert!(
        ix.table()
            .reject_fe
            .contains(&(Ipv4Addr::new(10, 96, 0, 10), TCP, 80))
    );
    assert_eq!(
        ix.family::<Ipv6Addr>().table().frontends[&(v6("fd96::10"), TCP, 80)].count,
        2
    );
    assert!(ix.consistent());
}

#[test]
fn pod_addresses_go_to_the_hairpin_set_of_their_family() {
    let mut ix = dual_index(&["fd00::5"]);
    let pods: Vec<std::net::IpAddr> =
        vec!["10.244.1.5".parse().unwrap(), "fd00::5".parse().unwrap()];
    ix.set_local_pods(pods);
    ix.update();
    assert_eq!(
        ix.table()
            .hairpin
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>(),
        ["10.244.1.5"]
    );
    assert_eq!(
        ix.family::<Ipv6Addr>()
            .table()
            .hairpin
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>(),
        ["fd00::5"]
    );
}

#[test]
fn the_ipv6_table_is_the_ipv4_one_in_ip6_terms() {
    let ix = dual_index(&["fd00::5"]);
    let t6: &SvcNft<Ipv6Addr> = ix.family::<Ipv6Addr>().table();
    let v6 = render::full(t6).to_string();
    let v4 = render::full(ix.table()).to_string();
    for needle in [
        r#""family":"ip6""#,
        r#""ipv6_addr""#,
        r#""protocol":"ip6""#,
        r#""type":"icmpv6""#,
        r#""addr":"::1","len":128"#,
        "fd96::10",
        "2001:db8:9::",
    ] {
        assert!(v6.contains(needle), "{needle} missing: {v6}");
    }
    for needle in [
        r#""family":"ip""#,
        r#""ipv4_addr""#,
        r#""protocol":"ip""#,
        r#""type":"icmp""#,
    ] {
        assert!(!v6.contains(needle), "{needle} in the IPv6 table: {v6}");
        assert!(v4.contains(needle), "{needle} missing in IPv4: {v4}");
    }
    // The same chains and rule counts in both.
    let shape = |s: BTreeMap<String, usize>| -> Vec<(String, usize)> {
        s.into_iter().filter(|(k, _)| !k.starts_with('@')).collect()
    };
    assert_eq!(
        shape(render::summary(t6)),
        shape(render::summary(ix.table()))
    );
}

#[test]
fn health_check_counts_a_dual_stack_pod_once() {
    let mut ix = ServiceIndex::new("n1");
    // As a LoadBalancer with `externalTrafficPolicy: Local` reads.
    let mut h = dual_lb(json!([]));
    h.v4.as_mut().unwrap().health_port = Some(31000);
    h.v6.as_mut().unwrap().health_port = Some(31000);
    ix.set_service("x/web", Some(h));
    let local = |family: &str, ip: &str| {
        let s: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": format!("web-{family}"), "namespace": "x",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": family, "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [ip], "nodeName": "n1"}]
        }))
        .unwrap();
        Slice::from_slice(&s, "n1")
    };
    ix.set_slice("x/web-IPv6", local("IPv6", "fd00::5"));
    assert_eq!(ix.health_targets()[&31000].local_endpoints, 1);
    ix.set_slice("x/web-IPv4", local("IPv4", "10.244.0.5"));
    assert_eq!(ix.health_targets()[&31000].local_endpoints, 1);
}

/// A dual-stack Service turned single-stack IPv4: its IPv6 half leaves
/// the IPv6 table (a patch of deletes, its UDP frontends stale), the
/// IPv4 half stays as it was.
#[test]
fn a_service_turned_single_stack_leaves_the_ipv6_table() {
    let mut ix = dual_index(&["fd00::5"]);
    ix.family_mut::<Ipv4Addr>().written_whole();
    ix.family_mut::<Ipv6Addr>().written_whole();
    let _ = ix.take_stale();
    let single = halves(
        json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10",
               "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
               "externalIPs": ["192.0.2.1", "2001:db8::1"],
               "loadBalancerSourceRanges": ["2001:db8:9::/48"],
               "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                         {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}, {"ip": "2001:db8:1::7"}]}}),
    );
    let before = ix.table().clone();
    ix.set_service("x/web", single);
    ix.update();
    let t6 = ix.family::<Ipv6Addr>().table();
    assert!(t6.frontends.is_empty(), "{t6:?}");
    assert!(t6.node_ports.is_empty(), "{t6:?}");
    assert!(t6.fe_slots.is_empty(), "{t6:?}");
    let patch = ix
        .family_mut::<Ipv6Addr>()
        .take_patch()
        .expect("an IPv6 patch")
        .to_string();
    assert!(
        patch.contains("\"delete\"") && patch.contains("fd96::10"),
        "{patch}"
    );
    let flows = ix.take_stale();
    assert!(flows.v4.is_empty(), "{flows:?}");
    assert!(
        flows.v6.iter().any(|f| f.proto == UDP) && !flows.v6.is_empty(),
        "{flows:?}"
    );
    assert_eq!(*ix.table(), before, "the IPv4 half as it was");
    assert!(ix.consistent());
}
