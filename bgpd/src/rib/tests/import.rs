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
