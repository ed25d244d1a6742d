//! BFD settings reach the sessions they are for: `spec.bfd` of a BGPPeer,
//! `nodeMeshBFD` of BGPConfiguration for node-to-node sessions.
use super::*;
use crate::datastore::build::build;
use std::net::IpAddr;
use std::time::Duration;
use tartan_api::resources::{BfdSpec, BgpConfigurationSpec, BgpPeerSpec};

#[test]
fn a_bgp_peers_bfd_reaches_its_session_only() {
    let mut i = three();
    i.peers.insert("tor".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.254", 65001);
        p.bfd = Some(BfdSpec {
            min_rx: Some("100ms".into()),
            min_tx: Some("50ms".into()),
            multiplier: Some(4),
        });
        p
    });
    i.peers.insert("bad".into(), {
        let mut p = BgpPeerSpec::new("10.0.0.252", 65001);
        p.bfd = Some(BfdSpec {
            min_rx: Some("1ms".into()),
            ..Default::default()
        });
        p
    });
    let c = build(&i).unwrap();
    let find = |a: &str| {
        c.neighbors
            .iter()
            .find(|n| n.address == a.parse::<IpAddr>().unwrap())
    };
    let b = find("10.0.0.254").unwrap().bfd.expect("bfd on the BGPPeer");
    assert_eq!(b.required_min_rx, Duration::from_millis(100));
    assert_eq!(b.desired_min_tx, Duration::from_millis(50));
    assert_eq!(b.detect_mult, 4);
    assert!(
        find("10.0.0.2").unwrap().bfd.is_none(),
        "mesh: off by default"
    );
    assert!(
        find("10.0.0.252").is_none(),
        "an unreadable bfd makes no session rather than one without BFD"
    );
}

#[test]
fn node_mesh_bfd_reaches_every_node_session() {
    let mut i = three();
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            node_mesh_bfd: Some(BfdSpec::default()),
            ..Default::default()
        },
    );
    i.peers
        .insert("tor".into(), BgpPeerSpec::new("10.0.0.254", 65001));
    let c = build(&i).unwrap();
    for n in &c.neighbors {
        let want = n.address.to_string() != "10.0.0.254";
        assert_eq!(n.bfd.is_some(), want, "{}", n.address);
    }
    let b = c.neighbors[0].bfd.unwrap();
    assert_eq!(b.required_min_rx, Duration::from_millis(300));
    assert_eq!(b.detect_mult, 3);
}
