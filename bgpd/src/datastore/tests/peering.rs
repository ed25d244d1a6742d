//! Which sessions a node's configuration gets: the full mesh, route
//! reflectors, BGPPeers by selector, their settings and secrets, and the
//! prefixes each node announces.
use super::*;
use crate::datastore::build::{BuildError, build};
use std::net::IpAddr;
use tartan_api::resources::{BgpConfigurationSpec, BgpPeerSpec, IpPoolSpec, WorkloadEndpointSpec};

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
    i.nodes.push(view("rr1", "10.0.0.11", Some("1.1.1.1"), &[]));
    i.nodes.push(view("rr2", "10.0.0.12", Some("1.1.1.1"), &[]));
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
    i.nodes[0] = view("n1", "10.0.0.1", None, &[("rack", "a")]);
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
    // 0 is Calico's off.
    i.peers.insert("zero".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.251", 65001);
        p.ttl_security = Some(0);
        p
    });
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
    // Calico's meaning: the restart time announced to this peer.
    assert_eq!(tor.restart_time, Some(30));
    assert_eq!(tor.max_restart_time, None);
    assert_eq!(
        tor.local_address, None,
        "sourceAddress None: the kernel picks"
    );
    let zero = find("10.0.0.251").unwrap();
    assert!(!zero.ttl_security);
    assert_eq!(zero.multihop, 1);
    let plain = find("10.0.0.253").unwrap();
    assert!(!plain.ttl_security);
    assert_eq!(plain.multihop, 1);
    assert_eq!(plain.restart_time, None);
    assert_eq!(plain.local_address, Some("10.0.0.1".parse().unwrap()));
    assert!(
        find("10.0.0.252").is_none(),
        "an unreadable BGPPeer makes no session"
    );
}

/// The three nodes without the mesh, so that the BGPPeer `nodes`
/// (`peerSelector: all()`, set up further by `with`) stands alone.
fn without_mesh(with: impl FnOnce(&mut BgpPeerSpec)) -> Inputs {
    let mut i = three();
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            node_to_node_mesh_enabled: Some(false),
            ..Default::default()
        },
    );
    i.peers.insert("nodes".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.peer_ip = None;
        p.as_number = None;
        p.peer_selector = Some("all()".into());
        with(&mut p);
        p
    });
    i
}

/// ttlSecurity of a peerSelector BGPPeer applies to every node it picks.
#[test]
fn ttl_security_reaches_peer_selector_sessions() {
    let i = without_mesh(|p| p.ttl_security = Some(3));
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.2", "10.0.0.3"]);
    for n in &c.neighbors {
        assert!(n.ttl_security, "{n:?}");
        assert_eq!(n.multihop, 3, "up to 3 hops away (RFC 5082)");
    }
}

#[test]
fn a_bgp_peers_filters_reach_its_session_and_a_missing_one_stops_it() {
    use tartan_api::resources::BgpFilterSpec;
    let mut i = three();
    i.filters.insert(
        "export-pods".into(),
        serde_json::from_value::<BgpFilterSpec>(serde_json::json!({
            "exportV4": [{"action": "Reject", "cidr": "10.0.0.0/8", "matchOperator": "NotIn"}],
            "importV4": [{"action": "Reject", "cidr": "0.0.0.0/0", "matchOperator": "In", "prefixLength": {"min": 25}}],
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
    // The BGPPeer's rule first, then the cluster's export scope.
    assert_eq!(
        tor.filters.export.v4[0].network,
        Some(("10.0.0.0/8".parse().unwrap(), crate::filter::MatchOp::NotIn))
    );
    assert_eq!(tor.filters.import.v4[0].lengths, Some((25, 32)));
    // The mesh has the scope alone.
    assert!(c.neighbors.iter().filter(|n| n.asn == 64512).all(|n| {
        n.filters.import.is_empty() && n.filters.export.v4[..] == tor.filters.export.v4[1..]
    }));
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
        let mut i = without_mesh(|p| p.next_hop_mode = api);
        i.peers.insert("tor".into(), {
            let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
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
    let mut bare = node("n1", "10.0.0.1", None, &[]);
    bare.metadata.annotations = None;
    i.nodes[0] = std::sync::Arc::new(bare.into());
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
        let name = format!("n{}", k + 1);
        let mut with_v6 = node(&name, &format!("10.0.0.{}", k + 1), None, &[]);
        with_v6.metadata.annotations.as_mut().unwrap().insert(
            "tartan.dev/bgp-ipv6-address".into(),
            format!("fd00::{}/64", k + 1),
        );
        *n = std::sync::Arc::new(with_v6.into());
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

/// Calico's route reflector recipe: mesh off, one BGPPeer
/// `nodeSelector: !has(rr)`, `peerSelector: has(rr)`. The reflectors are
/// the far end: they peer back with every node the nodeSelector picks,
/// with the BGPPeer's settings.
#[test]
fn the_node_a_peer_selector_picks_peers_back() {
    let mut i = three_and_a_labelled_reflector();
    i.peers.insert("to-rr".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.peer_ip = None;
        p.as_number = None;
        p.node_selector = Some("!has(rr)".into());
        p.peer_selector = Some("has(rr)".into());
        p.ttl_security = Some(1);
        p
    });
    // A client: the reflector.
    assert_eq!(addrs(&build(&i).unwrap()), ["10.0.0.11"]);
    // The reflector: every client, with the BGPPeer's settings.
    i.node = "rr1".into();
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    assert!(c.neighbors.iter().all(|n| n.ttl_security && n.asn == 64512));
    // Without the reverse, the reflector would have no session at all.
    i.peers.get_mut("to-rr").unwrap().node_selector = Some("has(nothing)".into());
    assert!(build(&i).unwrap().neighbors.is_empty());
}

/// A BGPPeer whose peerIP and AS are a node's: that node peers back with
/// the nodes the BGPPeer selects; another AS or port is not that node.
#[test]
fn the_node_a_peer_ip_names_peers_back_on_its_listen_port() {
    let mut i = three();
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            node_to_node_mesh_enabled: Some(false),
            listen_port: Some(1790),
            ..Default::default()
        },
    );
    i.peers.insert("to-n3".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.3", 64512);
        p.node = Some("n1".into());
        p
    });
    // n1 dials n3 on the cluster's port, not 179.
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.3"]);
    assert_eq!(c.neighbors[0].port, 1790);
    // n3 peers back with n1; n2 is not named.
    i.node = "n3".into();
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.1"]);
    assert_eq!(
        c.neighbors[0].description.as_deref(),
        Some("BGPPeer to-n3 (reverse) n1")
    );
    i.node = "n2".into();
    assert!(build(&i).unwrap().neighbors.is_empty());
    // Another AS than n3's: not n3.
    i.peers.get_mut("to-n3").unwrap().as_number = Some(65009);
    i.node = "n3".into();
    assert!(build(&i).unwrap().neighbors.is_empty());
}

/// Calico's logSeverityScreen, the node's override winning.
#[test]
fn the_log_level_comes_from_log_severity_screen() {
    use tartan_api::resources::bgpconfiguration::LogSeverity;
    let mut i = three();
    assert_eq!(build(&i).unwrap().log_level, None);
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            log_severity_screen: Some(LogSeverity::Warning),
            ..Default::default()
        },
    );
    assert_eq!(build(&i).unwrap().log_level, Some("warn"));
    i.configs.insert(
        "node.n1".into(),
        BgpConfigurationSpec {
            log_severity_screen: Some(LogSeverity::Debug),
            ..Default::default()
        },
    );
    assert_eq!(build(&i).unwrap().log_level, Some("debug"));
    i.node = "n2".into();
    assert_eq!(build(&i).unwrap().log_level, Some("warn"));
}

/// As Calico: a peering a BGPPeer makes from this node wins over the far
/// end of another BGPPeer's, whatever their names' order.
#[test]
fn a_nodes_own_peering_wins_over_the_far_end_of_another() {
    let mut i = three_and_a_labelled_reflector();
    let selectors = |p: &mut BgpPeerSpec, nodes: &str, peers: &str| {
        p.peer_ip = None;
        p.as_number = None;
        p.node_selector = Some(nodes.into());
        p.peer_selector = Some(peers.into());
    };
    i.peers.insert("a-clients".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        selectors(&mut p, "!has(rr)", "has(rr)");
        p
    });
    i.peers.insert("b-reflector".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        selectors(&mut p, "has(rr)", "!has(rr)");
        p.ttl_security = Some(5);
        p
    });
    i.node = "rr1".into();
    let c = build(&i).unwrap();
    assert_eq!(addrs(&c), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    for n in &c.neighbors {
        assert_eq!((n.ttl_security, n.multihop), (true, 5), "{n:?}");
        assert!(
            n.description
                .as_deref()
                .unwrap()
                .starts_with("BGPPeer b-reflector")
        );
    }
}

/// The three nodes and rr1 (label `rr`), without the mesh.
fn three_and_a_labelled_reflector() -> Inputs {
    let mut i = three();
    i.nodes.push(view("rr1", "10.0.0.11", None, &[("rr", "")]));
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            node_to_node_mesh_enabled: Some(false),
            ..Default::default()
        },
    );
    i
}
