//! The export filter and rewrite, per target peer.

use super::*;

const P: &str = "192.0.2.0/25";

/// `src` announces P with `a`; returns what `dst` ends up holding for P.
fn through(src: PeerConfig, a: PathAttrs, dst: PeerConfig) -> Option<Arc<PathAttrs>> {
    through_local(local(), src, a, dst)
}

fn through_local(
    l: LocalConfig,
    src: PeerConfig,
    a: PathAttrs,
    dst: PeerConfig,
) -> Option<Arc<PathAttrs>> {
    let mut r = Rib::new(l);
    let (s, d) = (src.id, dst.id);
    r.peer_up(src);
    r.peer_up(dst);
    r.announce(s, a, &[net(P)]).unwrap();
    let sent = drained(&mut r, d);
    assert!(drained(&mut r, s).0.is_empty(), "sent back to its source");
    sent.0.get(&net(P)).cloned()
}

fn learned() -> PathAttrs {
    let mut a = attrs(&[65002, 65100], [10, 1, 1, 2]);
    a.med = Some(42);
    a.local_pref = Some(250);
    a
}

#[test]
fn to_ebgp() {
    let out = through(ibgp(2), learned(), ebgp(3)).unwrap();
    assert_eq!(
        out.as_path.segments,
        vec![AsSegment::Sequence(vec![OUR_AS, 65002, 65100])]
    );
    assert_eq!(out.next_hop, nh([192, 0, 2, 254]));
    assert_eq!(out.local_pref, None);
    assert_eq!(out.med, None);
    assert_eq!(out.originator_id, None);
    assert!(out.cluster_list.is_empty());
}

#[test]
fn reflected_attributes_do_not_leave_the_as() {
    let mut a = learned();
    a.originator_id = Some(Ipv4Addr::new(10, 9, 9, 50));
    a.cluster_list = vec![Ipv4Addr::new(10, 255, 0, 9)];
    let out = through(client(2), a, ebgp(3)).unwrap();
    assert_eq!(out.originator_id, None);
    assert!(out.cluster_list.is_empty());
}

#[test]
fn own_route_to_ebgp_keeps_med_and_uses_our_address() {
    let mut r = rib();
    r.peer_up(ebgp(3));
    let mut a = attrs(&[], [0; 4]);
    a.next_hop = NextHop::None;
    a.med = Some(7);
    r.originate(a, net(P));
    let out = drained(&mut r, 3).0[&net(P)].clone();
    assert_eq!(out.med, Some(7));
    assert_eq!(out.next_hop, nh([192, 0, 2, 254]));
    assert_eq!(
        out.as_path.segments,
        vec![AsSegment::Sequence(vec![OUR_AS])]
    );
}

#[test]
fn own_route_to_ibgp_next_hop_self_and_default_local_pref() {
    let mut r = rib();
    r.peer_up(ibgp(3));
    let mut a = attrs(&[], [0; 4]);
    a.next_hop = NextHop::None;
    r.originate(a, net(P));
    let out = drained(&mut r, 3).0[&net(P)].clone();
    assert_eq!(out.next_hop, nh([192, 0, 2, 254]));
    assert_eq!(out.local_pref, Some(100));
    assert!(out.as_path.segments.is_empty());
    assert_eq!(out.originator_id, None);
}

#[test]
fn ebgp_learned_to_ibgp_keeps_next_hop_and_med() {
    let out = through(ebgp(2), learned(), ibgp(3)).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 2]));
    assert_eq!(out.med, Some(42));
    // LOCAL_PREF from eBGP was ignored; iBGP gets the default.
    assert_eq!(out.local_pref, Some(100));
    assert_eq!(out.originator_id, None);
    assert!(out.cluster_list.is_empty());
}

#[test]
fn next_hop_self_to_ibgp() {
    let dst = PeerConfig {
        next_hop: NextHopMode::SelfAddress,
        ..ibgp(3)
    };
    let out = through(ebgp(2), learned(), dst).unwrap();
    assert_eq!(out.next_hop, nh([192, 0, 2, 254]));
}

/// An external peer on 10.1.1.0/24 with us, in mode `mode`.
fn ebgp_on_shared_subnet(mode: NextHopMode) -> PeerConfig {
    PeerConfig {
        next_hop: mode,
        address: IpAddr::V4(Ipv4Addr::new(10, 1, 1, 9)),
        local_v4: Some(Ipv4Addr::new(10, 1, 1, 254)),
        shared_subnet: Some("10.1.1.0/24".parse().unwrap()),
        ..ebgp(3)
    }
}

#[test]
fn third_party_next_hop_on_a_shared_subnet_is_kept_for_ebgp() {
    // learned() has next hop 10.1.1.2: another router on the peer's subnet.
    let out = through(ibgp(2), learned(), ebgp_on_shared_subnet(NextHopMode::Auto)).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 2]));
    // From an external peer too (RFC 4271 5.1.3, second case).
    let out = through(ebgp(2), learned(), ebgp_on_shared_subnet(NextHopMode::Auto)).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 2]));
}

#[test]
fn next_hop_off_the_shared_subnet_becomes_ours_for_ebgp() {
    let a = attrs(&[65002], [10, 7, 7, 7]);
    let out = through(ibgp(2), a, ebgp_on_shared_subnet(NextHopMode::Auto)).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 254]));
    // No shared subnet known (a multihop peer): ours.
    let out = through(ibgp(2), learned(), ebgp(3)).unwrap();
    assert_eq!(out.next_hop, nh([192, 0, 2, 254]));
}

#[test]
fn the_peers_own_address_is_never_its_next_hop() {
    let a = attrs(&[65002], [10, 1, 1, 9]);
    let out = through(ibgp(2), a, ebgp_on_shared_subnet(NextHopMode::Auto)).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 254]));
}

#[test]
fn next_hop_self_replaces_a_shared_subnet_next_hop() {
    let dst = ebgp_on_shared_subnet(NextHopMode::SelfAddress);
    let out = through(ibgp(2), learned(), dst).unwrap();
    assert_eq!(out.next_hop, nh([10, 1, 1, 254]));
}

#[test]
fn next_hop_keep_passes_any_next_hop_but_gives_ours_to_own_routes() {
    let a = attrs(&[65002], [10, 7, 7, 7]);
    let out = through(ibgp(2), a, ebgp(3).with_mode(NextHopMode::Keep)).unwrap();
    assert_eq!(out.next_hop, nh([10, 7, 7, 7]));
    let mut r = rib();
    r.peer_up(ebgp(3).with_mode(NextHopMode::Keep));
    let mut own = attrs(&[], [0; 4]);
    own.next_hop = NextHop::None;
    r.originate(own, net(P));
    assert_eq!(drained(&mut r, 3).0[&net(P)].next_hop, nh([192, 0, 2, 254]));
}

#[test]
fn own_routes_get_our_address_on_a_shared_subnet() {
    let mut r = rib();
    r.peer_up(ebgp_on_shared_subnet(NextHopMode::Auto));
    let mut own = attrs(&[], [0; 4]);
    own.next_hop = NextHop::None;
    r.originate(own, net(P));
    assert_eq!(drained(&mut r, 3).0[&net(P)].next_hop, nh([10, 1, 1, 254]));
}

impl PeerConfig {
    fn with_mode(self, next_hop: NextHopMode) -> PeerConfig {
        PeerConfig { next_hop, ..self }
    }
}

#[test]
fn ibgp_to_ibgp_needs_reflection() {
    assert!(through(ibgp(2), learned(), ibgp(3)).is_none());
}

#[test]
fn route_reflection_matrix() {
    // (source is a client, target is a client) -> reflected?
    for (sc, tc, ok) in [
        (true, true, true),
        (true, false, true),
        (false, true, true),
        (false, false, false),
    ] {
        let src = PeerConfig {
            rr_client: sc,
            ..ibgp(2)
        };
        let dst = PeerConfig {
            rr_client: tc,
            ..ibgp(3)
        };
        let out = through(src, learned(), dst);
        assert_eq!(out.is_some(), ok, "client {sc} -> client {tc}");
        if let Some(out) = out {
            // ORIGINATOR_ID: the source's router id; CLUSTER_LIST: ours.
            assert_eq!(out.originator_id, Some(Ipv4Addr::new(10, 9, 9, 2)));
            assert_eq!(out.cluster_list, vec![local().cluster_id]);
            assert_eq!(out.next_hop, nh([10, 1, 1, 2]));
            assert_eq!(out.local_pref, Some(250));
            assert_eq!(out.med, Some(42));
        }
    }
}

#[test]
fn reflection_keeps_originator_and_prepends_cluster() {
    let l = LocalConfig {
        cluster_id: Ipv4Addr::new(10, 255, 0, 1),
        ..local()
    };
    let mut a = learned();
    a.originator_id = Some(Ipv4Addr::new(10, 9, 9, 50));
    a.cluster_list = vec![Ipv4Addr::new(10, 255, 0, 9)];
    let out = through_local(l, client(2), a, ibgp(3)).unwrap();
    assert_eq!(out.originator_id, Some(Ipv4Addr::new(10, 9, 9, 50)));
    assert_eq!(
        out.cluster_list,
        vec![Ipv4Addr::new(10, 255, 0, 1), Ipv4Addr::new(10, 255, 0, 9)]
    );
}

#[test]
fn well_known_communities() {
    use crate::model::well_known::*;
    let with = |c: u32| {
        let mut a = learned();
        a.communities = vec![0xFDE8_0001, c];
        a
    };
    assert!(through(ebgp(2), with(NO_ADVERTISE), ibgp(3)).is_none());
    assert!(through(ebgp(2), with(NO_ADVERTISE), ebgp(3)).is_none());
    assert!(through(ebgp(2), with(NO_EXPORT), ebgp(3)).is_none());
    assert!(through(ebgp(2), with(NO_EXPORT_SUBCONFED), ebgp(3)).is_none());
    let kept = through(ebgp(2), with(NO_EXPORT), ibgp(3)).unwrap();
    assert_eq!(kept.communities, vec![0xFDE8_0001, NO_EXPORT]);
    assert!(through(ebgp(2), with(NO_EXPORT_SUBCONFED), ibgp(3)).is_some());
    assert!(through(ebgp(2), with(0xFDE8_0002), ebgp(3)).is_some());
}

#[test]
fn unknown_attributes() {
    let mut a = learned();
    let t = RawAttr {
        flags: RawAttr::OPTIONAL | RawAttr::TRANSITIVE,
        type_code: 99,
        value: vec![1, 2],
    };
    let n = RawAttr {
        flags: RawAttr::OPTIONAL,
        type_code: 100,
        value: vec![3],
    };
    a.unknown = vec![t.clone(), n];
    for dst in [ebgp(3), ibgp(3)] {
        let out = through(ebgp(2), a.clone(), dst).unwrap();
        assert_eq!(out.unknown, vec![t.clone()]);
    }
}

#[test]
fn only_negotiated_families() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(PeerConfig {
        families: vec![Family::Ipv4Unicast],
        ..ebgp(3)
    });
    let mut a = attrs(&[65002], [0; 4]);
    a.next_hop = v6nh("2001:db8::2");
    r.announce(2, a, &[net("2001:db8:5::/48")]).unwrap();
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let sent = drained(&mut r, 3);
    assert_eq!(sent.0.keys().collect::<Vec<_>>(), vec![&net(P)]);
}

#[test]
fn ipv6_to_ebgp_next_hop_has_link_local() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    let mut a = attrs(&[65002], [0; 4]);
    a.next_hop = v6nh("2001:db8::2");
    let p6 = net("2001:db8:5::/48");
    r.announce(2, a, &[p6]).unwrap();
    let batches = Sent::default().drain(&mut r, 3, 100);
    match &batches[..] {
        [
            OutBatch::Announce {
                family,
                attrs,
                prefixes,
            },
        ] => {
            assert_eq!(*family, Family::Ipv6Unicast);
            assert_eq!(prefixes, &vec![p6]);
            assert_eq!(
                attrs.next_hop,
                NextHop::V6 {
                    global: "2001:db8::fe".parse().unwrap(),
                    link_local: Some("fe80::fe".parse().unwrap()),
                }
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn export_can_be_turned_off_and_on() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let mut sent = drained(&mut r, 3);
    assert_eq!(r.counts(3).advertised, 1);
    let c = r.set_export(3, false);
    assert_eq!(c.peers_with_output, vec![3]);
    sent.drain(&mut r, 3, 10);
    assert!(sent.0.is_empty());
    assert_eq!(r.counts(3).advertised, 0);
    r.set_export(3, true);
    sent.drain(&mut r, 3, 10);
    assert_eq!(sent.0.len(), 1);
}
