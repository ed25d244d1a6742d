//! Import checks: loops, eBGP attribute hygiene, max-prefix.

use super::*;

const P: &str = "198.51.100.0/24";

#[test]
fn own_as_from_ebgp_is_dropped_and_counted() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.announce(2, attrs(&[65002], [10, 1, 1, 1]), &[net(P)])
        .unwrap();
    // The same prefix again, now with our AS in the path: treated as a
    // withdraw of what the peer sent before.
    let c = r
        .announce(2, attrs(&[65002, OUR_AS, 7], [10, 1, 1, 1]), &[net(P)])
        .unwrap();
    assert_eq!(best_peer(&r, P), None);
    assert_eq!(c.kernel, vec![(net(P), None)]);
    let n = r.counts(2);
    assert_eq!((n.received, n.accepted, n.looped), (2, 0, 1));
}

#[test]
fn own_as_from_ibgp_is_dropped_too() {
    // RFC 4271 9.1.2: the AS_PATH check is not only for eBGP.
    let mut r = rib();
    r.peer_up(ibgp(2));
    r.announce(2, attrs(&[65002, OUR_AS], [10, 1, 1, 1]), &[net(P)])
        .unwrap();
    assert_eq!(best_peer(&r, P), None);
    assert_eq!(r.counts(2).looped, 1);
}

#[test]
fn our_router_id_as_originator_is_dropped() {
    let mut r = rib();
    r.peer_up(ibgp(2));
    let mut a = attrs(&[], [10, 1, 1, 1]);
    a.originator_id = Some(local().router_id);
    r.announce(2, a, &[net(P)]).unwrap();
    assert_eq!(best_peer(&r, P), None);
    assert_eq!(r.counts(2).looped, 1);
}

#[test]
fn our_cluster_id_in_cluster_list_is_dropped() {
    let mut r = Rib::new(LocalConfig {
        cluster_id: Ipv4Addr::new(10, 255, 0, 1),
        ..local()
    });
    r.peer_up(ibgp(2));
    let mut a = attrs(&[], [10, 1, 1, 1]);
    a.originator_id = Some(Ipv4Addr::new(10, 9, 9, 77));
    a.cluster_list = vec![Ipv4Addr::new(10, 255, 0, 9), Ipv4Addr::new(10, 255, 0, 1)];
    r.announce(2, a.clone(), &[net(P)]).unwrap();
    assert_eq!(best_peer(&r, P), None);
    a.cluster_list.pop();
    r.announce(2, a, &[net(P)]).unwrap();
    assert_eq!(best_peer(&r, P), Some(2));
}

#[test]
fn ebgp_drops_local_pref_and_reflection_attributes() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    let mut a = attrs(&[65002], [10, 1, 1, 1]);
    a.local_pref = Some(300);
    // Our own router id as ORIGINATOR_ID: over eBGP it is discarded
    // (RFC 7606 7.9), not taken as a loop.
    a.originator_id = Some(local().router_id);
    a.cluster_list = vec![local().cluster_id];
    r.announce(2, a, &[net(P)]).unwrap();
    let b = r.best(&net(P)).unwrap();
    assert_eq!(b.attrs.local_pref, None);
    assert_eq!(b.attrs.originator_id, None);
    assert!(b.attrs.cluster_list.is_empty());
}

#[test]
fn max_prefix_leaves_the_rib_unchanged() {
    let mut r = rib();
    r.peer_up(PeerConfig {
        max_prefix: Some(3),
        ..ebgp(2)
    });
    r.peer_up(ebgp(9));
    let nets: Vec<IpNet> = (0..4).map(|i| net(&format!("10.{i}.0.0/16"))).collect();
    r.announce(2, attrs(&[65002], [10, 1, 1, 1]), &nets[..2])
        .unwrap();
    let before: Vec<RouteView> = r.routes(Family::Ipv4Unicast).collect();
    let pending = r.pending(9);
    let err = r
        .announce(2, attrs(&[65002, 5], [10, 1, 1, 1]), &nets)
        .unwrap_err();
    assert_eq!(err, ImportError::MaxPrefix { limit: 3 });
    assert_eq!(r.routes(Family::Ipv4Unicast).collect::<Vec<_>>(), before);
    assert_eq!(r.pending(9), pending);
    assert_eq!(r.counts(2).accepted, 2);
    assert_eq!(r.attr_set_count(), 1);
    // Replacing known prefixes and adding one stays within the limit.
    r.announce(2, attrs(&[65002, 5], [10, 1, 1, 1]), &nets[..3])
        .unwrap();
    assert_eq!(r.counts(2).accepted, 3);
}

/// A prefix repeated within one UPDATE is one route towards the limit.
#[test]
fn max_prefix_counts_a_repeated_prefix_once() {
    let mut r = rib();
    r.peer_up(PeerConfig {
        max_prefix: Some(2),
        ..ebgp(2)
    });
    let a = attrs(&[65002], [10, 1, 1, 1]);
    r.announce(2, a.clone(), &[net("10.1.0.0/16")]).unwrap();
    let p2 = net("10.2.0.0/16");
    r.announce(2, a.clone(), &[p2, p2, net("10.2.3.4/16")])
        .unwrap();
    assert_eq!(r.counts(2).accepted, 2);
    assert_eq!(
        r.announce(2, a, &[net("10.3.0.0/16")]),
        Err(ImportError::MaxPrefix { limit: 2 })
    );
}

#[test]
fn unknown_peer_is_an_error() {
    let mut r = rib();
    assert_eq!(
        r.announce(7, attrs(&[1], [1, 1, 1, 1]), &[net(P)]),
        Err(ImportError::UnknownPeer(7))
    );
}

#[test]
fn families_not_negotiated_are_ignored() {
    let mut r = rib();
    r.peer_up(PeerConfig {
        families: vec![Family::Ipv4Unicast],
        ..ebgp(2)
    });
    let mut a = attrs(&[65002], [0; 4]);
    a.next_hop = v6nh("2001:db8::2");
    r.announce(2, a, &[net("2001:db8:1::/48")]).unwrap();
    assert_eq!(r.prefix_count(Family::Ipv6Unicast), 0);
    assert_eq!(r.attr_set_count(), 0);
}

#[test]
fn host_bits_are_cleared() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.announce(2, attrs(&[65002], [10, 1, 1, 1]), &[net("10.1.2.3/24")])
        .unwrap();
    assert!(r.best(&net("10.1.2.0/24")).is_some());
}

/// RFC 4271 6.3: a route whose NEXT_HOP no one can forward to is ignored,
/// and withdraws what the peer sent before for the prefix.
#[test]
fn unusable_next_hops_are_treat_as_withdraw() {
    let v4 = [
        [0, 0, 0, 0],
        [224, 0, 0, 5],
        [127, 0, 0, 1],
        [255, 255, 255, 255],
        [240, 0, 0, 1],
        // The session address we have with the peer (`local_v4`).
        [192, 0, 2, 254],
    ];
    for bad in v4 {
        let mut r = rib();
        r.peer_up(ebgp(2));
        r.announce(2, attrs(&[65002], [10, 1, 1, 1]), &[net(P)])
            .unwrap();
        r.announce(2, attrs(&[65002], bad), &[net(P)]).unwrap();
        assert_eq!(best_peer(&r, P), None, "next hop {bad:?}");
    }
    const P6: &str = "2001:db8:5::/48";
    for bad in ["::", "ff02::5", "::1", "2001:db8::fe"] {
        let mut r = rib();
        r.peer_up(ibgp(2));
        let mut a = attrs(&[], [0; 4]);
        a.next_hop = v6nh(bad);
        r.announce(2, a, &[net(P6)]).unwrap();
        assert_eq!(best_peer(&r, P6), None, "next hop {bad}");
    }
    // A link-local second next hop beside a global one is fine.
    let mut r = rib();
    r.peer_up(ibgp(2));
    let mut a = attrs(&[], [0; 4]);
    a.next_hop = NextHop::V6 {
        global: "2001:db8::2".parse().unwrap(),
        link_local: Some("fe80::2".parse().unwrap()),
    };
    r.announce(2, a, &[net(P6)]).unwrap();
    assert_eq!(best_peer(&r, P6), Some(2));
}

/// RFC 5065 5: bgpd is in no confederation, so confederation segments
/// come from outside one and the route is treat-as-withdraw.
#[test]
fn confederation_segments_are_treat_as_withdraw() {
    for (peer, seg) in [
        (ebgp(2), AsSegment::ConfedSequence(vec![65010])),
        (ibgp(2), AsSegment::ConfedSet(vec![65010, 65011])),
    ] {
        let mut r = rib();
        r.peer_up(peer);
        r.announce(2, attrs(&[65002], [10, 1, 1, 1]), &[net(P)])
            .unwrap();
        let mut a = attrs(&[65002], [10, 1, 1, 1]);
        a.as_path.segments.insert(0, seg);
        r.announce(2, a, &[net(P)]).unwrap();
        assert_eq!(best_peer(&r, P), None);
    }
}
