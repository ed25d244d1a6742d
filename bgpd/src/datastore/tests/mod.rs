use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::{
    BgpConfigurationSpec, BgpPeerSpec, IpPoolSpec, IpamBlockSpec, WorkloadEndpointSpec,
};

use super::build::{BuildError, Inputs, build};

fn node(name: &str, ip: &str, rr: Option<&str>, labels: &[(&str, &str)]) -> Node {
    let mut ann = BTreeMap::from([(
        "tartan.dev/bgp-ipv4-address".to_string(),
        format!("{ip}/24"),
    )]);
    if let Some(c) = rr {
        ann.insert("tartan.dev/route-reflector-cluster-id".into(), c.into());
    }
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.annotations = Some(ann);
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

fn block(cidr: &str, node: &str) -> IpamBlockSpec {
    let mut b = IpamBlockSpec::empty(&cidr.parse().unwrap());
    b.affinity = Some(format!("host:{node}"));
    b
}

fn three() -> Inputs {
    Inputs {
        node: "n1".into(),
        nodes: vec![
            node("n1", "10.0.0.1", None, &[]),
            node("n2", "10.0.0.2", None, &[]),
            node("n3", "10.0.0.3", None, &[]),
        ],
        ..Default::default()
    }
}

fn addrs(c: &crate::config::Config) -> Vec<String> {
    c.neighbors.iter().map(|n| n.address.to_string()).collect()
}

#[test]
fn the_mesh_peers_every_other_node() {
    let c = build(&three()).unwrap();
    assert_eq!(c.router_id.to_string(), "10.0.0.1");
    assert_eq!(c.asn, 64512);
    assert_eq!(addrs(&c), ["10.0.0.2", "10.0.0.3"]);
    assert!(
        c.neighbors
            .iter()
            .all(|n| n.asn == 64512 && !n.route_reflector_client)
    );
    assert_eq!(c.listen[0].to_string(), "10.0.0.1:179");
    assert!(c.kernel_install);
}

#[test]
fn route_reflectors_without_the_mesh() {
    let mut i = three();
    i.nodes.push(node("rr1", "10.0.0.11", Some("1.1.1.1"), &[]));
    i.nodes.push(node("rr2", "10.0.0.12", Some("1.1.1.1"), &[]));
    let off = BgpConfigurationSpec {
        node_to_node_mesh_enabled: Some(false),
        ..Default::default()
    };
    i.configs.insert("default".into(), off);
    // A plain node peers with the reflectors only.
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.11", "10.0.0.12"]);
    assert!(c.neighbors.iter().all(|n| !n.route_reflector_client));
    // A reflector: the other reflector as a peer, the rest as clients.
    i.node = "rr1".into();
    let c = build(&i).unwrap();
    assert_eq!(c.cluster_id.to_string(), "1.1.1.1");
    let clients: Vec<(String, bool)> = c
        .neighbors
        .iter()
        .map(|n| (n.address.to_string(), n.route_reflector_client))
        .collect();
    assert_eq!(
        clients,
        [
            ("10.0.0.1".into(), true),
            ("10.0.0.2".into(), true),
            ("10.0.0.3".into(), true),
            ("10.0.0.12".into(), false)
        ]
    );
}

#[test]
fn bgp_peers_by_node_selector_and_node() {
    let mut i = three();
    i.nodes[0] = node("n1", "10.0.0.1", None, &[("rack", "a")]);
    i.peers.insert("tor-a".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.node_selector = Some("rack == 'a'".into());
        p
    });
    i.peers.insert("tor-b".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.253", 65002);
        p.node_selector = Some("rack == 'b'".into());
        p
    });
    i.peers.insert("only-n2".into(), {
        let mut p = BgpPeerSpec::new("192.0.2.1:1179", 65003);
        p.node = Some("n2".into());
        p
    });
    let c = build(&i).unwrap();
    let tor = c
        .neighbors
        .iter()
        .find(|n| n.address == "10.0.0.254".parse::<IpAddr>().unwrap())
        .unwrap();
    assert_eq!(tor.asn, 65001);
    assert_eq!(tor.multihop, 1, "eBGP to a directly connected router");
    assert_eq!(c.neighbors.len(), 3, "{:?}", addrs(&c));
    i.node = "n2".into();
    let c = build(&i).unwrap();
    let n = c.neighbors.iter().find(|n| n.asn == 65003).unwrap();
    assert_eq!((n.address.to_string(), n.port), ("192.0.2.1".into(), 1179));
}

#[test]
fn ttl_security_source_address_and_max_restart_time_reach_the_session() {
    use tartan_api::resources::bgppeer::SourceAddress;
    let mut i = three();
    i.peers.insert("tor".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.ttl_security = Some(2);
        p.max_restart_time = Some("30s".into());
        p.source_address = SourceAddress::None;
        p
    });
    i.peers
        .insert("plain".into(), BgpPeerSpec::new("10.0.0.253", 65001));
    i.peers.insert("bad".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.252", 65001);
        p.max_restart_time = Some("soon".into());
        p
    });
    let c = build(&i).unwrap();
    let find = |a: &str| {
        c.neighbors
            .iter()
            .find(|n| n.address == a.parse::<IpAddr>().unwrap())
    };
    let tor = find("10.0.0.254").unwrap();
    assert!(tor.ttl_security);
    assert_eq!(tor.multihop, 2, "up to 2 hops away (RFC 5082)");
    assert_eq!(tor.max_restart_time, Some(30));
    assert_eq!(
        tor.local_address, None,
        "sourceAddress None: the kernel picks"
    );
    let plain = find("10.0.0.253").unwrap();
    assert!(!plain.ttl_security);
    assert_eq!(plain.multihop, 1);
    assert_eq!(plain.max_restart_time, None);
    assert_eq!(plain.local_address, Some("10.0.0.1".parse().unwrap()));
    assert!(
        find("10.0.0.252").is_none(),
        "an unreadable BGPPeer makes no session"
    );
}

#[test]
fn a_bgp_peers_filters_reach_its_session_and_a_missing_one_stops_it() {
    use tartan_api::resources::BgpFilterSpec;
    let mut i = three();
    i.filters.insert(
        "export-pods".into(),
        serde_json::from_value::<BgpFilterSpec>(serde_json::json!({
            "exportV4": [{"action": "Reject", "cidr": "10.0.0.0/8", "matchOperator": "NotIn"}],
            "importV4": [{"action": "Reject", "prefixLength": {"min": 25}}],
        }))
        .unwrap(),
    );
    i.peers.insert("tor".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.filters = vec!["export-pods".into()];
        p
    });
    i.peers.insert("broken".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.253", 65001);
        p.filters = vec!["export-pods".into(), "gone".into()];
        p
    });
    let c = build(&i).unwrap();
    let tor = c
        .neighbors
        .iter()
        .find(|n| n.address == "10.0.0.254".parse::<IpAddr>().unwrap())
        .unwrap();
    assert_eq!(tor.filters.export.v4.len(), 1);
    assert_eq!(tor.filters.import.v4[0].lengths, Some((25, 32)));
    // The mesh has no filters.
    assert!(
        c.neighbors
            .iter()
            .filter(|n| n.asn == 64512)
            .all(|n| n.filters.is_empty())
    );
    // A BGPPeer naming a filter that is not there makes no session: it
    // must not run unfiltered.
    assert!(
        !c.neighbors
            .iter()
            .any(|n| n.address == "10.0.0.253".parse::<IpAddr>().unwrap())
    );
}

#[test]
fn a_bgp_peers_next_hop_mode_reaches_its_sessions() {
    use crate::model::NextHopMode;
    use tartan_api::resources::bgppeer::NextHopMode as Api;
    for (api, want) in [
        (Api::Auto, NextHopMode::Auto),
        (Api::SelfAddress, NextHopMode::SelfAddress),
        (Api::Keep, NextHopMode::Keep),
    ] {
        let mut i = three();
        // Without the mesh, so that the peerSelector sessions stand alone.
        i.configs.insert(
            "default".into(),
            BgpConfigurationSpec {
                node_to_node_mesh_enabled: Some(false),
                ..Default::default()
            },
        );
        i.peers.insert("tor".into(), {
            let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
            p.next_hop_mode = api;
            p
        });
        i.peers.insert("nodes".into(), {
            let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
            p.peer_ip = None;
            p.as_number = None;
            p.peer_selector = Some("all()".into());
            p.next_hop_mode = api;
            p
        });
        let c = build(&i).unwrap();
        assert_eq!(addrs(&c), ["10.0.0.2", "10.0.0.3", "10.0.0.254"]);
        for n in &c.neighbors {
            assert_eq!(n.next_hop, want, "{n:?}");
        }
    }
}

#[test]
fn announces_own_blocks_and_borrowed_addresses_not_unexported_pools() {
    let mut i = three();
    i.blocks = vec![
        block("10.244.0.0/26", "n1"),
        block("10.244.0.64/26", "n2"),
        block("10.250.0.0/26", "n1"),
    ];
    let mut private = IpPoolSpec::new("10.250.0.0/16");
    private.disable_bgp_export = true;
    i.pools = vec![IpPoolSpec::new("10.244.0.0/16"), private];
    i.endpoints = vec![WorkloadEndpointSpec {
        node: "n1".into(),
        pod: "p".into(),
        container_id: "c".into(),
        endpoint: "eth0".into(),
        interface_name: "tarx".into(),
        mac: None,
        // Borrowed from n2's block, and one in its own block.
        ip_networks: vec!["10.244.0.70/32".into(), "10.244.0.5/32".into()],
        ports: vec![],
    }];
    let c = build(&i).unwrap();
    let prefixes: Vec<String> = c.announce.iter().map(|a| a.prefix.to_string()).collect();
    assert_eq!(prefixes, ["10.244.0.0/26", "10.244.0.70/32"]);
}

#[test]
fn a_node_without_object_or_address_is_an_error() {
    let mut i = three();
    i.node = "nx".into();
    assert_eq!(build(&i).unwrap_err(), BuildError::NoNode("nx".into()));
    i.node = "n1".into();
    i.nodes[0].metadata.annotations = None;
    assert!(matches!(
        build(&i).unwrap_err(),
        BuildError::NoAddress { .. }
    ));
}

#[test]
fn encapsulated_ipv4_pools_stay_out_of_the_kernel_but_are_announced() {
    use tartan_api::resources::ippool::EncapMode;
    let mut i = three();
    let mut vx = IpPoolSpec::new("10.244.0.0/16");
    vx.vxlan_mode = EncapMode::CrossSubnet;
    let mut ipip = IpPoolSpec::new("10.245.0.0/16");
    ipip.ipip_mode = EncapMode::Always;
    // IPv6 VXLAN is not routed by felix: bgpd keeps installing it.
    let mut v6 = IpPoolSpec::new("fd00:244::/48");
    v6.vxlan_mode = EncapMode::Always;
    i.pools = vec![vx, ipip, v6, IpPoolSpec::new("10.246.0.0/16")];
    i.blocks = vec![block("10.244.0.0/26", "n1")];
    let c = build(&i).unwrap();
    let ex: Vec<String> = c.kernel_exclude.iter().map(|n| n.to_string()).collect();
    assert_eq!(ex, ["10.244.0.0/16", "10.245.0.0/16"]);
    assert_eq!(c.announce[0].prefix.to_string(), "10.244.0.0/26");
    assert!(build(&three()).unwrap().kernel_exclude.is_empty());
}

#[test]
fn passwords_come_from_secrets_and_a_missing_one_stops_only_its_sessions() {
    use tartan_api::resources::{SecretKeyRef, SecretSource};
    let src = |name: &str, key: &str| SecretSource {
        secret_key_ref: SecretKeyRef {
            name: name.into(),
            key: key.into(),
        },
    };
    let mut i = three();
    i.secrets.insert(
        "bgp".into(),
        BTreeMap::from([
            ("tor".to_string(), "s3cret".to_string()),
            ("mesh".to_string(), "m3sh".to_string()),
            ("long".to_string(), "x".repeat(81)),
        ]),
    );
    i.peers.insert("tor".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.password = Some(src("bgp", "tor"));
        p
    });
    i.peers.insert("gone".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.253", 65002);
        p.password = Some(src("missing", "tor"));
        p
    });
    i.peers.insert("too-long".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.252", 65003);
        p.password = Some(src("bgp", "long"));
        p
    });
    let pw = |c: &crate::config::Config, a: &str| {
        c.neighbors
            .iter()
            .find(|n| n.address.to_string() == a)
            .map(|n| n.password.clone())
    };
    let c = build(&i).unwrap();
    assert_eq!(pw(&c, "10.0.0.254"), Some(Some("s3cret".into())));
    assert_eq!(pw(&c, "10.0.0.253"), None, "Secret missing: no session");
    assert_eq!(pw(&c, "10.0.0.252"), None, "81 bytes: no session");
    assert_eq!(pw(&c, "10.0.0.2"), Some(None), "no mesh password set");

    // The mesh password goes on every node-to-node session.
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            node_mesh_password: Some(src("bgp", "mesh")),
            ..Default::default()
        },
    );
    let c = build(&i).unwrap();
    assert_eq!(pw(&c, "10.0.0.2"), Some(Some("m3sh".into())));
    assert_eq!(pw(&c, "10.0.0.3"), Some(Some("m3sh".into())));
    assert_eq!(pw(&c, "10.0.0.254"), Some(Some("s3cret".into())));
    // Unresolvable: no node-to-node sessions; the ToR stays.
    i.secrets.remove("bgp");
    i.secrets.insert(
        "bgp".into(),
        BTreeMap::from([("tor".into(), "s3cret".into())]),
    );
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.254"]);
}

#[test]
fn nodes_with_ipv6_addresses_also_peer_over_ipv6() {
    use crate::model::Family;
    let mut i = three();
    for (k, n) in i.nodes.iter_mut().enumerate().take(2) {
        n.metadata.annotations.as_mut().unwrap().insert(
            "tartan.dev/bgp-ipv6-address".into(),
            format!("fd00::{}/64", k + 1),
        );
    }
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.2", "10.0.0.3", "fd00::2"]);
    let v6 = c.neighbors.iter().find(|n| n.address.is_ipv6()).unwrap();
    assert_eq!(v6.families, [Family::Ipv6Unicast]);
    assert_eq!(v6.local_address, Some("fd00::1".parse().unwrap()));
    let v4 = &c.neighbors[0];
    assert_eq!(v4.families, [Family::Ipv4Unicast]);
    let listen: Vec<String> = c.listen.iter().map(|a| a.to_string()).collect();
    assert_eq!(listen, ["10.0.0.1:179", "[fd00::1]:179"]);
    // A node without an IPv6 address: IPv4 only.
    i.node = "n3".into();
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.1", "10.0.0.2"]);
}

// ---- Services ----

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::resources::bgpconfiguration::ServiceCidr;

use super::services::{LocalServices, ServiceIps, local_policy_ips, summarize};

fn cidrs(list: &[&str]) -> Vec<ServiceCidr> {
    list.iter()
        .map(|c| ServiceCidr {
            cidr: c.to_string(),
        })
        .collect()
}

/// Cluster IPs 10.96.0.0/12, external IPs 203.0.113.0/24 and fd00:e::/64,
/// LoadBalancer IPs 198.51.100.0/24 and fd00:1b::/112.
fn with_service_ranges(mut i: Inputs) -> Inputs {
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            service_cluster_ips: cidrs(&["10.96.0.0/12"]),
            service_external_ips: cidrs(&["203.0.113.0/24", "fd00:e::/64"]),
            service_load_balancer_ips: cidrs(&["198.51.100.0/24", "fd00:1b::/112"]),
            ..Default::default()
        },
    );
    i
}

fn prefixes(c: &crate::config::Config) -> Vec<String> {
    c.announce.iter().map(|a| a.prefix.to_string()).collect()
}

/// A Service in `default` from its spec and LoadBalancer ingress IPs.
fn service(name: &str, spec: serde_json::Value, ingress: &[&str]) -> Service {
    let ingress: Vec<serde_json::Value> = ingress
        .iter()
        .map(|ip| serde_json::json!({"ip": ip}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": ingress}},
    }))
    .unwrap()
}

/// A LoadBalancer Service with externalTrafficPolicy Local.
fn local_lb(name: &str, ingress: &[&str]) -> Service {
    service(
        name,
        serde_json::json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80}]}),
        ingress,
    )
}

/// An EndpointSlice of `svc` in `default`; each endpoint as (node,
/// conditions).
fn slice(name: &str, svc: &str, endpoints: &[(&str, serde_json::Value)]) -> EndpointSlice {
    let eps: Vec<serde_json::Value> = endpoints
        .iter()
        .enumerate()
        .map(|(k, (node, cond))| {
            serde_json::json!({"addresses": [format!("10.244.0.{}", k + 1)],
                "nodeName": node, "conditions": cond})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": eps,
    }))
    .unwrap()
}

fn ready() -> serde_json::Value {
    serde_json::json!({"ready": true, "serving": true, "terminating": false})
}

#[test]
fn every_node_announces_the_service_ranges_of_both_families() {
    let mut i = with_service_ranges(three());
    i.blocks = vec![block("10.244.0.0/26", "n1")];
    for node in ["n1", "n2", "n3"] {
        i.node = node.into();
        let c = build(&i).unwrap();
        let p = prefixes(&c);
        for r in [
            "10.96.0.0/12",
            "203.0.113.0/24",
            "198.51.100.0/24",
            "fd00:e::/64",
            "fd00:1b::/112",
        ] {
            assert!(p.contains(&r.to_string()), "{node}: {r} not in {p:?}");
        }
        // Local routes: never in this node's kernel, and nothing learned
        // inside a service range goes there either.
        let ex: Vec<String> = c.kernel_exclude.iter().map(|n| n.to_string()).collect();
        assert_eq!(
            ex,
            [
                "10.96.0.0/12",
                "198.51.100.0/24",
                "203.0.113.0/24",
                "fd00:e::/64",
                "fd00:1b::/112"
            ]
        );
    }
    i.node = "n1".into();
    assert!(prefixes(&build(&i).unwrap()).contains(&"10.244.0.0/26".to_string()));
    // A CIDR that does not parse (the API rejects it; a store may still
    // hold it) is left out, the rest stays; host bits are cleared.
    i.configs.get_mut("default").unwrap().service_cluster_ips =
        cidrs(&["10.96.0.1/12", "not-a-cidr"]);
    let p = prefixes(&build(&i).unwrap());
    assert!(p.contains(&"10.96.0.0/12".to_string()), "{p:?}");
    assert!(!p.iter().any(|x| x.contains("not")));
    // No ranges: nothing of the kind.
    let c = build(&three()).unwrap();
    assert!(c.announce.is_empty() && c.kernel_exclude.is_empty());
}

#[test]
fn a_node_override_sets_its_own_ranges() {
    let mut i = with_service_ranges(three());
    i.configs.insert(
        "node.n2".into(),
        BgpConfigurationSpec {
            service_cluster_ips: cidrs(&["10.100.0.0/16"]),
            ..Default::default()
        },
    );
    i.node = "n2".into();
    let p = prefixes(&build(&i).unwrap());
    assert!(p.contains(&"10.100.0.0/16".to_string()), "{p:?}");
    assert!(!p.contains(&"10.96.0.0/12".to_string()), "{p:?}");
    assert!(p.contains(&"203.0.113.0/24".to_string()), "{p:?}");
}

#[test]
fn which_services_have_local_policy_and_which_addresses_count() {
    let ips = |e: &[&str], lb: &[&str]| ServiceIps {
        external: e.iter().map(|a| a.parse().unwrap()).collect(),
        load_balancer: lb.iter().map(|a| a.parse().unwrap()).collect(),
    };
    // LoadBalancer, Local: ingress IPs and external IPs, sorted, no repeats.
    let mut s = local_lb("web", &["198.51.100.7", "fd00:1b::7", "198.51.100.7"]);
    s.spec.as_mut().unwrap().external_ips = Some(vec!["203.0.113.9".into(), "bogus".into()]);
    assert_eq!(
        local_policy_ips(&s),
        Some(ips(&["203.0.113.9"], &["198.51.100.7", "fd00:1b::7"]))
    );
    // Cluster policy: the range announcement suffices.
    s.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
    assert_eq!(local_policy_ips(&s), None);
    // NodePort with external IPs: those; an ingress IP does not count
    // without type LoadBalancer.
    let np = service(
        "np",
        serde_json::json!({"type": "NodePort", "externalTrafficPolicy": "Local",
            "externalIPs": ["203.0.113.5"]}),
        &["198.51.100.5"],
    );
    assert_eq!(local_policy_ips(&np), Some(ips(&["203.0.113.5"], &[])));
    // ClusterIP: Local policy counts only with external IPs.
    let cip = |ext: serde_json::Value| {
        service(
            "c",
            serde_json::json!({"type": "ClusterIP", "externalTrafficPolicy": "Local",
                "externalIPs": ext}),
            &[],
        )
    };
    assert_eq!(
        local_policy_ips(&cip(serde_json::json!(["203.0.113.6"]))),
        Some(ips(&["203.0.113.6"], &[]))
    );
    assert_eq!(local_policy_ips(&cip(serde_json::json!([]))), None);
    // ExternalName: never.
    let en = service(
        "en",
        serde_json::json!({"type": "ExternalName", "externalName": "example.com",
            "externalTrafficPolicy": "Local", "externalIPs": ["203.0.113.8"]}),
        &[],
    );
    assert_eq!(local_policy_ips(&en), None);
    // Headless: the proxy leaves it alone; not announced.
    let headless = service(
        "h",
        serde_json::json!({"type": "ClusterIP", "clusterIP": "None",
            "externalTrafficPolicy": "Local", "externalIPs": ["203.0.113.8"]}),
        &[],
    );
    assert_eq!(local_policy_ips(&headless), None);
    // An ingress with ipMode Proxy belongs to the load balancer.
    let mut px = local_lb("px", &["198.51.100.8"]);
    px.status
        .as_mut()
        .unwrap()
        .load_balancer
        .as_mut()
        .unwrap()
        .ingress
        .as_mut()
        .unwrap()[0]
        .ip_mode = Some("Proxy".into());
    assert_eq!(local_policy_ips(&px), None);
    // No spec, no addresses: nothing.
    assert_eq!(local_policy_ips(&Service::default()), None);
    assert_eq!(local_policy_ips(&local_lb("pending", &[])), None);
}

#[test]
fn endpoint_conditions_are_read_as_the_proxy_reads_them() {
    use serde_json::json;
    // (ready anywhere, ready here, serving-terminating here) for one
    // endpoint on `node`, seen from n1.
    let one = |node: &str, cond: serde_json::Value| {
        summarize(&slice("web-a", "web", &[(node, cond)]), "n1")
            .map(|s| (s.ready_anywhere, s.ready_here, s.terminating_here))
    };
    assert_eq!(one("n1", ready()), Some((true, true, false)));
    // Unset `ready` means ready.
    assert_eq!(one("n1", json!({})), Some((true, true, false)));
    // Terminating and still serving.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": true, "terminating": true})
        ),
        Some((false, false, true))
    );
    // Unset `serving` follows `ready`: not serving.
    assert_eq!(
        one("n1", json!({"ready": false, "terminating": true})),
        None
    );
    // Not ready and not terminating (starting, failing its probe): nothing.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": false, "terminating": false})
        ),
        None
    );
    // Terminating and no longer serving: nothing.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": false, "terminating": true})
        ),
        None
    );
    // On another node: only "ready somewhere".
    assert_eq!(one("n2", ready()), Some((true, false, false)));
    assert_eq!(
        one(
            "n2",
            json!({"ready": false, "serving": true, "terminating": true})
        ),
        None
    );
    assert_eq!(
        summarize(&slice("web-a", "web", &[("n1", ready())]), "n1").map(|s| s.service),
        Some("default/web".into())
    );
    // No service label, or FQDN addresses: not an endpoint of a Service.
    let mut s = slice("x", "web", &[("n1", ready())]);
    s.metadata.labels = None;
    assert_eq!(summarize(&s, "n1"), None);
    let mut s = slice("x", "web", &[("n1", ready())]);
    s.address_type = "FQDN".into();
    assert_eq!(summarize(&s, "n1"), None);
}

#[test]
fn a_terminating_endpoint_keeps_the_route_only_while_nothing_is_ready() {
    use serde_json::json;
    let draining = json!({"ready": false, "serving": true, "terminating": true});
    let mut ls = LocalServices::new("n1");
    assert!(!ls.service("default/web", Some(&local_lb("web", &["198.51.100.7"]))));
    // A ready endpoint here.
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "web", &[("n1", ready())]))
    ));
    // It starts terminating, nothing else is ready: the proxy still
    // forwards to it; the route stays.
    let d = slice("web-a", "web", &[("n1", draining.clone())]);
    assert!(!ls.slice("default/web-a", Some(&d)));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.7/32"]);
    // A ready endpoint comes up on n2 (another slice): the proxy here
    // prefers ready ones, which are elsewhere; the route goes.
    let b = slice("web-b", "web", &[("n2", ready())]);
    assert!(ls.slice("default/web-b", Some(&b)));
    assert!(announced_with(&ls, "n1").is_empty());
    // n2's endpoint goes: back to the draining one here.
    assert!(ls.slice("default/web-b", None));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.7/32"]);
    // The same within one slice: a ready endpoint on n2 beside it.
    let both = slice("web-a", "web", &[("n1", draining), ("n2", ready())]);
    assert!(ls.slice("default/web-a", Some(&both)));
    assert!(announced_with(&ls, "n1").is_empty());
    // Seen from n2, which has the ready one: announced there.
    let mut n2 = LocalServices::new("n2");
    n2.service("default/web", Some(&local_lb("web", &["198.51.100.7"])));
    assert!(n2.slice("default/web-a", Some(&both)));
    assert_eq!(announced_with(&n2, "n2"), ["198.51.100.7/32"]);
}

/// The host routes `node` announces with the Services as `ls` has them.
fn announced_with(ls: &LocalServices, node: &str) -> Vec<String> {
    let mut i = with_service_ranges(three());
    i.node = node.into();
    i.services = ls.announced_all();
    prefixes(&build(&i).unwrap())
        .into_iter()
        .filter(|p| p.ends_with("/32") || p.ends_with("/128"))
        .collect()
}

#[test]
fn a_local_service_is_announced_while_this_node_has_an_endpoint() {
    let mut ls = LocalServices::new("n1");
    let mut svc = local_lb("web", &["198.51.100.7", "fd00:1b::7", "192.0.2.7"]);
    svc.spec.as_mut().unwrap().external_ips = Some(vec!["203.0.113.9".into(), "192.0.2.9".into()]);
    // The Service alone: no endpoint here, nothing to announce, nothing
    // changes.
    assert!(!ls.service("default/web", Some(&svc)));
    assert!(announced_with(&ls, "n1").is_empty());
    // An endpoint on another node: still nothing here.
    let there = slice("web-a", "web", &[("n2", ready())]);
    assert!(!ls.slice("default/web-a", Some(&there)));
    assert!(announced_with(&ls, "n1").is_empty());
    // The endpoint moves here: the addresses inside their ranges, as
    // host routes (192.0.2.x are outside every range: not announced, an
    // external IP in the LoadBalancer range neither).
    let here = slice("web-a", "web", &[("n1", ready())]);
    assert!(ls.slice("default/web-a", Some(&here)));
    assert_eq!(
        announced_with(&ls, "n1"),
        ["198.51.100.7/32", "203.0.113.9/32", "fd00:1b::7/128"]
    );
    // Unchanged again: no change reported.
    assert!(!ls.slice("default/web-a", Some(&here)));
    // A second slice with an endpoint here, then the first goes: still
    // announced; the last one goes: withdrawn.
    let here_b = slice("web-b", "web", &[("n1", ready()), ("n2", ready())]);
    assert!(!ls.slice("default/web-b", Some(&here_b)));
    assert!(!ls.slice("default/web-a", None));
    assert_eq!(announced_with(&ls, "n1").len(), 3);
    assert!(ls.slice("default/web-b", None));
    assert!(announced_with(&ls, "n1").is_empty());
    // Back, and the endpoint starts terminating: still served here, kept.
    assert!(ls.slice("default/web-a", Some(&here)));
    let draining = slice(
        "web-a",
        "web",
        &[(
            "n1",
            serde_json::json!({"ready": false, "serving": true, "terminating": true}),
        )],
    );
    assert!(!ls.slice("default/web-a", Some(&draining)));
    assert_eq!(announced_with(&ls, "n1").len(), 3);
    // It stops serving: withdrawn.
    let gone = slice(
        "web-a",
        "web",
        &[(
            "n1",
            serde_json::json!({"ready": false, "serving": false, "terminating": true}),
        )],
    );
    assert!(ls.slice("default/web-a", Some(&gone)));
    assert!(announced_with(&ls, "n1").is_empty());
    // The Service's addresses change while it has an endpoint here.
    assert!(ls.slice("default/web-a", Some(&here)));
    let moved = local_lb("web", &["198.51.100.8"]);
    assert!(ls.service("default/web", Some(&moved)));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.8/32"]);
    // Cluster policy: withdrawn (the range covers it).
    let mut cluster = moved.clone();
    cluster.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
    assert!(ls.service("default/web", Some(&cluster)));
    assert!(announced_with(&ls, "n1").is_empty());
    // Local again, then the Service is deleted: withdrawn.
    assert!(ls.service("default/web", Some(&moved)));
    assert!(ls.service("default/web", None));
    assert!(announced_with(&ls, "n1").is_empty());
    // A node that only ever sees other nodes' endpoints announces nothing.
    let mut other = LocalServices::new("n3");
    other.service("default/web", Some(&moved));
    other.slice("default/web-a", Some(&here));
    assert!(announced_with(&other, "n3").is_empty());
}

#[test]
fn events_that_change_nothing_here_report_no_change() {
    let mut ls = LocalServices::new("n1");
    // A Cluster-policy Service with endpoints here and elsewhere churning.
    let cluster = service(
        "api",
        serde_json::json!({"type": "LoadBalancer", "externalTrafficPolicy": "Cluster"}),
        &["198.51.100.1"],
    );
    assert!(!ls.service("default/api", Some(&cluster)));
    for n in 0..50 {
        let node = if n % 2 == 0 { "n1" } else { "n2" };
        let s = slice("api-a", "api", &[(node, ready())]);
        assert!(!ls.slice("default/api-a", Some(&s)));
    }
    // A Local Service whose endpoints churn on other nodes only.
    let web = local_lb("web", &["198.51.100.7"]);
    assert!(!ls.service("default/web", Some(&web)));
    for n in 0..50 {
        let s = slice(
            "web-a",
            "web",
            &[
                ("n2", ready()),
                (if n % 2 == 0 { "n3" } else { "n2" }, ready()),
            ],
        );
        assert!(!ls.slice("default/web-a", Some(&s)));
    }
    // A slice whose label moves it from one Service to another while
    // its endpoint stays here: web loses it (withdrawn), api gains it
    // (Cluster policy: nothing).
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "web", &[("n1", ready())]))
    ));
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "api", &[("n1", ready())]))
    ));
    assert!(ls.announced_all().is_empty());
}

#[test]
fn every_kind_bgpd_reads_is_granted_by_the_node_role() {
    use super::follow::WATCHED;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/tartan-node.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
        .collect();
    let grants = |kind: &str| -> Vec<(String, String, Vec<String>)> {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
            .flat_map(|r| {
                let verbs: Vec<String> = r["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let groups: Vec<String> = r["apiGroups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let res: Vec<String> = r["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                groups
                    .into_iter()
                    .flat_map(|g| res.iter().map(move |x| (g.clone(), x.clone())))
                    .map(move |(g, x)| (g, x, verbs.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let cluster = grants("ClusterRole");
    let namespaced = grants("Role");
    for kind in WATCHED {
        let info = kind.info();
        // Secrets only in Tartan's namespace (the Role); the rest cluster-wide.
        let rules = if kind == tartan_api::Kind::Secret {
            &namespaced
        } else {
            &cluster
        };
        for verb in ["get", "list", "watch"] {
            assert!(
                rules.iter().any(|(g, r, v)| g == info.group
                    && r == info.plural
                    && v.iter().any(|x| x == verb)),
                "deploy/tartan-node.yaml does not grant {verb} on {}.{}",
                info.plural,
                info.group
            );
        }
    }
}
