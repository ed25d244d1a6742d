//! One test per step of the decision process.

use super::*;

const P: &str = "203.0.113.0/24";

/// Two peers announce P with `a` and `b`; returns the winner.
fn winner(pa: PeerConfig, a: PathAttrs, pb: PeerConfig, b: PathAttrs) -> PeerId {
    let (ia, ib) = (pa.id, pb.id);
    // Both orders must give the same answer.
    let mut results = Vec::new();
    for flip in [false, true] {
        let mut r = rib();
        r.peer_up(pa.clone());
        r.peer_up(pb.clone());
        let mut steps = [(ia, a.clone()), (ib, b.clone())];
        if flip {
            steps.reverse();
        }
        for (p, at) in steps {
            r.announce(p, at, &[net(P)]).unwrap();
        }
        results.push(best_peer(&r, P).unwrap());
    }
    assert_eq!(results[0], results[1], "order changed the result");
    results[0]
}

#[test]
fn highest_local_pref() {
    let mut a = attrs(&[], [10, 1, 1, 1]);
    a.local_pref = Some(200);
    let b = attrs(&[], [10, 1, 1, 2]);
    // b has no LOCAL_PREF: taken as 100.
    assert_eq!(winner(ibgp(2), a.clone(), ibgp(1), b.clone()), 2);
    let mut b = b;
    b.local_pref = Some(300);
    assert_eq!(winner(ibgp(2), a, ibgp(1), b), 1);
}

#[test]
fn ebgp_local_pref_is_ignored() {
    // eBGP-learned paths get the default 100, whatever they carry.
    let mut a = attrs(&[65002], [10, 1, 1, 2]);
    a.local_pref = Some(500);
    let mut b = attrs(&[], [10, 1, 1, 1]);
    b.local_pref = Some(150);
    assert_eq!(winner(ebgp(2), a, ibgp(1), b), 1);
}

#[test]
fn shortest_as_path() {
    let a = attrs(&[65002, 1, 2], [10, 1, 1, 1]);
    let b = attrs(&[65003, 1], [10, 1, 1, 2]);
    assert_eq!(winner(ebgp(2), a, ebgp(3), b), 3);
    // A SET counts as one.
    let mut c = attrs(&[65002], [10, 1, 1, 1]);
    c.as_path.segments.push(AsSegment::Set(vec![7, 8, 9]));
    let d = attrs(&[65003, 1, 2], [10, 1, 1, 2]);
    assert_eq!(winner(ebgp(2), c, ebgp(3), d), 2);
}

#[test]
fn lowest_origin() {
    let mut a = attrs(&[65002], [10, 1, 1, 1]);
    a.origin = Origin::Incomplete;
    let mut b = attrs(&[65003], [10, 1, 1, 2]);
    b.origin = Origin::Egp;
    assert_eq!(winner(ebgp(2), a, ebgp(3), b), 3);
}

#[test]
fn lowest_med_from_the_same_neighbour_as() {
    // Same neighbouring AS 65100 behind two peers: MED decides even though
    // peer 2 has the lower router id.
    let mut a = attrs(&[65100], [10, 1, 1, 1]);
    a.med = Some(50);
    let mut b = attrs(&[65100], [10, 1, 1, 2]);
    b.med = Some(10);
    assert_eq!(winner(peer(2, 65100), a, peer(3, 65100), b), 3);
}

#[test]
fn absent_med_is_zero() {
    let mut a = attrs(&[65100], [10, 1, 1, 1]);
    a.med = Some(1);
    let b = attrs(&[65100], [10, 1, 1, 2]);
    assert_eq!(winner(peer(2, 65100), a, peer(3, 65100), b), 3);
}

#[test]
fn med_not_compared_across_neighbour_ases() {
    // Different neighbouring ASes: MED is skipped, the router id decides.
    let mut a = attrs(&[65002], [10, 1, 1, 1]);
    a.med = Some(500);
    let mut b = attrs(&[65003], [10, 1, 1, 2]);
    b.med = Some(1);
    assert_eq!(winner(ebgp(2), a, ebgp(3), b), 2);
}

#[test]
fn med_elimination_is_order_independent() {
    // The classic non-transitive trio: A(AS1, MED 10), B(AS2, MED 0),
    // C(AS1, MED 0). C eliminates A; then B vs C by router id.
    for order in [[2u32, 3, 4], [4, 3, 2], [3, 2, 4], [3, 4, 2]] {
        let mut r = rib();
        let ps = [peer(2, 65001), peer(3, 65002), peer(4, 65001)];
        for p in &ps {
            r.peer_up(p.clone());
        }
        for id in order {
            let mut a = attrs(&[ps[(id - 2) as usize].asn], [10, 1, 1, id as u8]);
            a.med = Some(if id == 2 { 10 } else { 0 });
            r.announce(id, a, &[net(P)]).unwrap();
        }
        assert_eq!(best_peer(&r, P), Some(3), "order {order:?}");
    }
}

#[test]
fn ebgp_over_ibgp() {
    // The iBGP peer has the lower router id; eBGP still wins.
    let a = attrs(&[65100], [10, 1, 1, 1]);
    let b = attrs(&[65100], [10, 1, 1, 2]);
    assert_eq!(winner(ibgp(2), a, ebgp(3), b), 3);
}

#[test]
fn lowest_router_id() {
    let a = attrs(&[65100], [10, 1, 1, 1]);
    let b = attrs(&[65101], [10, 1, 1, 2]);
    assert_eq!(winner(ebgp(3), a, ebgp(2), b), 2);
}

#[test]
fn originator_id_stands_in_for_router_id() {
    // Peer 2 has the lower router id, but peer 3's path carries an
    // ORIGINATOR_ID lower still (RFC 4456 9).
    let a = attrs(&[], [10, 1, 1, 1]);
    let mut b = attrs(&[], [10, 1, 1, 2]);
    b.originator_id = Some(Ipv4Addr::new(1, 1, 1, 1));
    assert_eq!(winner(client(2), a, client(3), b), 3);
}

#[test]
fn shortest_cluster_list() {
    let orig = Some(Ipv4Addr::new(1, 1, 1, 1));
    let mut a = attrs(&[], [10, 1, 1, 1]);
    a.originator_id = orig;
    a.cluster_list = vec![Ipv4Addr::new(9, 9, 9, 9), Ipv4Addr::new(9, 9, 9, 8)];
    let mut b = attrs(&[], [10, 1, 1, 1]);
    b.originator_id = orig;
    b.cluster_list = vec![Ipv4Addr::new(9, 9, 9, 7)];
    assert_eq!(winner(ibgp(2), a, ibgp(3), b), 3);
}

#[test]
fn lowest_peer_address() {
    let rid = Ipv4Addr::new(10, 9, 9, 9);
    let pa = PeerConfig {
        router_id: rid,
        address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 50)),
        ..ebgp(2)
    };
    let pb = PeerConfig {
        router_id: rid,
        address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 40)),
        ..ebgp(3)
    };
    let a = attrs(&[65100], [10, 1, 1, 1]);
    let b = attrs(&[65101], [10, 1, 1, 2]);
    assert_eq!(winner(pa, a, pb, b), 3);
}

#[test]
fn local_route_wins() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    let mut a = attrs(&[65002], [10, 1, 1, 1]);
    a.local_pref = Some(1000);
    r.announce(2, a, &[net(P)]).unwrap();
    let mut own = attrs(&[], [0, 0, 0, 0]);
    own.next_hop = NextHop::None;
    own.origin = Origin::Incomplete;
    let c = r.originate(own, net(P));
    assert_eq!(best_peer(&r, P), Some(LOCAL));
    // The kernel loses the learned route: ours is not installed.
    assert_eq!(c.kernel, vec![(net(P), None)]);
    let c = r.unoriginate(net(P));
    assert_eq!(best_peer(&r, P), Some(2));
    assert_eq!(c.kernel.len(), 1);
}

#[test]
fn path_without_next_hop_is_not_feasible() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    let mut a = attrs(&[65002], [10, 1, 1, 1]);
    a.next_hop = NextHop::None;
    let c = r.announce(2, a, &[net(P)]).unwrap();
    assert!(c.kernel.is_empty());
    assert_eq!(best_peer(&r, P), None);
    r.announce(3, attrs(&[65003, 1, 2, 3], [10, 1, 1, 3]), &[net(P)])
        .unwrap();
    assert_eq!(best_peer(&r, P), Some(3));
}

#[test]
fn multipath_set() {
    let mut r = rib();
    for p in [ebgp(2), ebgp(3), ebgp(4)] {
        r.peer_up(p);
    }
    r.announce(2, attrs(&[65002, 9], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let c = r
        .announce(3, attrs(&[65003, 9], [10, 1, 1, 3]), &[net(P)])
        .unwrap();
    let both: NextHops = Arc::from(vec![nh([10, 1, 1, 2]), nh([10, 1, 1, 3])]);
    assert_eq!(c.kernel, vec![(net(P), Some(both))]);
    // Longer path: not in the set, no kernel change.
    let c = r
        .announce(4, attrs(&[65004, 8, 9], [10, 1, 1, 4]), &[net(P)])
        .unwrap();
    assert!(c.kernel.is_empty());
    let route = r.routes(Family::Ipv4Unicast).next().unwrap();
    let flags: Vec<(PeerId, bool, bool)> = route
        .paths
        .iter()
        .map(|p| (p.peer, p.best, p.multipath))
        .collect();
    assert!(flags.contains(&(2, true, true)));
    assert!(flags.contains(&(3, false, true)));
    assert!(flags.contains(&(4, false, false)));
    let best = r.best(&net(P)).unwrap();
    assert_eq!(best.next_hops.len(), 2);
    // Losing one member shrinks the set.
    let c = r.withdraw(2, &[net(P)]);
    let one: NextHops = Arc::from(vec![nh([10, 1, 1, 3])]);
    assert_eq!(c.kernel, vec![(net(P), Some(one))]);
}
