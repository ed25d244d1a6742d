use super::*;
use serde_json::json;

fn sample_peer() -> PeerStatus {
    PeerStatus {
        address: "192.0.2.1".parse().unwrap(),
        port: Some(179),
        asn: 65001,
        local_asn: 65000,
        kind: PeerKind::Ebgp,
        state: SessionState::Established,
        uptime_seconds: Some(192),
        router_id: Some(Ipv4Addr::new(192, 0, 2, 1)),
        hold_time: Some(90),
        families: vec!["ipv4-unicast".into()],
        prefixes: PrefixCounts {
            received: 10,
            accepted: 9,
            advertised: 3,
        },
        last_error: None,
        messages: MessageCounts::default(),
        graceful_restart: Some(GracefulRestartStatus {
            restart_time: 120,
            peer_restarting: false,
            preserved_families: vec!["ipv4-unicast".into()],
            stale_routes: 0,
        }),
        rr_client: false,
        description: Some("tor-a".into()),
        bfd: None,
    }
}

fn sample_route() -> RouteEntry {
    RouteEntry {
        prefix: "10.0.1.0/26".parse().unwrap(),
        family: "ipv4-unicast".into(),
        paths: vec![PathView {
            best: true,
            multipath: false,
            stale: false,
            peer: Some("192.0.2.1".parse().unwrap()),
            next_hop: Some("192.0.2.1".parse().unwrap()),
            as_path: "65001 65002".into(),
            origin: "igp".into(),
            med: Some(5),
            local_pref: None,
            communities: vec![format_community(0xFDE8_0064), format_community(0xFFFF_FF01)],
            large_communities: vec![format_large_community([1, 2, 3])],
            originator_id: None,
            cluster_list: vec![Ipv4Addr::new(10, 0, 0, 1)],
        }],
    }
}

#[test]
fn peer_round_trips_with_camel_case_names() {
    let peer = sample_peer();
    let v = serde_json::to_value(&peer).unwrap();
    assert_eq!(v["localAsn"], 65000);
    assert_eq!(v["kind"], "ebgp");
    assert_eq!(v["state"], "Established");
    assert_eq!(v["uptimeSeconds"], 192);
    assert_eq!(v["holdTime"], 90);
    assert_eq!(v["lastError"], serde_json::Value::Null);
    assert_eq!(v["messages"]["sent"]["routeRefresh"], 0);
    assert_eq!(v["gracefulRestart"]["restartTime"], 120);
    assert_eq!(v["rrClient"], false);
    let back: PeerStatus = serde_json::from_value(v).unwrap();
    assert_eq!(back, peer);
}

#[test]
fn route_round_trips() {
    let route = sample_route();
    let v = serde_json::to_value(&route).unwrap();
    assert_eq!(v["prefix"], "10.0.1.0/26");
    let path = &v["paths"][0];
    assert_eq!(path["nextHop"], "192.0.2.1");
    assert_eq!(path["asPath"], "65001 65002");
    assert_eq!(path["communities"], json!(["65000:100", "no-export"]));
    assert_eq!(path["largeCommunities"], json!(["1:2:3"]));
    assert_eq!(path["clusterList"], json!(["10.0.0.1"]));
    let back: RouteEntry = serde_json::from_value(v).unwrap();
    assert_eq!(back, route);
}

#[test]
fn status_round_trips() {
    let status = SpeakerStatus {
        router_id: Ipv4Addr::new(10, 0, 0, 1),
        asn: 65000,
        peers: 3,
        established_peers: 2,
        routes: BTreeMap::from([(
            "ipv4-unicast".to_string(),
            RouteCounts {
                prefixes: 4,
                paths: 7,
            },
        )]),
        kernel: KernelCounts {
            installed: 4,
            removed: 1,
            failed: 0,
        },
        started_at: 1_700_000_000,
        uptime_seconds: 60,
        version: "0.1.0".into(),
        restart: Some(RestartStatus {
            seconds_left: 42,
            kernel_routes_kept: true,
            families: BTreeMap::from([(
                "ipv4-unicast".to_string(),
                FamilyDeferral {
                    deferred: true,
                    waiting_for: vec!["192.0.2.2".parse().unwrap()],
                },
            )]),
        }),
    };
    let v = serde_json::to_value(&status).unwrap();
    assert_eq!(v["restart"]["secondsLeft"], 42);
    assert_eq!(v["restart"]["kernelRoutesKept"], true);
    assert_eq!(
        v["restart"]["families"]["ipv4-unicast"]["waitingFor"][0],
        "192.0.2.2"
    );
    assert_eq!(v["routerId"], "10.0.0.1");
    assert_eq!(v["establishedPeers"], 2);
    assert_eq!(v["routes"]["ipv4-unicast"]["paths"], 7);
    assert_eq!(v["startedAt"], 1_700_000_000u64);
    let back: SpeakerStatus = serde_json::from_value(v).unwrap();
    assert_eq!(back, status);
    // An older bgpd's answer has no `restart`.
    let mut old = serde_json::to_value(&status).unwrap();
    old.as_object_mut().unwrap().remove("restart");
    let back: SpeakerStatus = serde_json::from_value(old).unwrap();
    assert_eq!(back.restart, None);
}

#[test]
fn session_state_numbers_follow_the_mib() {
    assert_eq!(SessionState::Idle.number(), 1);
    assert_eq!(SessionState::Established.number(), 6);
    let s: SessionState = serde_json::from_str("\"OpenConfirm\"").unwrap();
    assert_eq!(s.number(), 5);
    assert!(serde_json::from_str::<SessionState>("\"Bogus\"").is_err());
}

#[test]
fn communities_format() {
    assert_eq!(format_community((65000 << 16) | 100), "65000:100");
    assert_eq!(format_community(0xFFFF_FF02), "no-advertise");
    assert_eq!(format_community(0xFFFF_FF04), "no-peer");
    assert_eq!(format_community(0xFFFF_FF10), "65535:65296");
    assert_eq!(
        format_large_community([4_200_000_000, 0, 7]),
        "4200000000:0:7"
    );
}

#[test]
fn error_body_shape() {
    let e: ErrorBody = serde_json::from_str(r#"{"error":"bad prefix"}"#).unwrap();
    assert_eq!(e.error, "bad prefix");
}
