//! Pending output: coalescing, withdraws, batching.

use super::*;

const P: &str = "100.64.0.0/24";

#[test]
fn initial_advertisement_on_peer_up() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.announce(
        2,
        attrs(&[65002], [10, 1, 1, 2]),
        &[net(P), net("100.64.1.0/24")],
    )
    .unwrap();
    let c = r.peer_up(ebgp(3));
    assert_eq!(c.peers_with_output, vec![3]);
    assert_eq!(drained(&mut r, 3).0.len(), 2);
    assert_eq!(r.counts(3).advertised, 2);
}

#[test]
fn announce_wakes_the_right_writers() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.peer_up(ibgp(4));
    let c = r
        .announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert_eq!(c.peers_with_output, vec![3, 4]);
    // Learned over iBGP: not to the other iBGP peer (no reflection), and
    // not back to its source.
    let c = r
        .announce(4, attrs(&[], [10, 1, 1, 4]), &[net("100.64.9.0/24")])
        .unwrap();
    assert_eq!(c.peers_with_output, vec![2, 3]);
}

#[test]
fn withdraw_when_best_moves_to_the_peer_itself() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let mut to3 = drained(&mut r, 3);
    assert!(to3.0.contains_key(&net(P)));
    // Peer 3 now offers a better path: the best is its own, so it must
    // lose the route we sent it.
    r.announce(3, attrs(&[], [10, 1, 1, 3]), &[net(P)]).unwrap();
    let batches = to3.drain(&mut r, 3, 10);
    assert_eq!(
        batches,
        vec![OutBatch::Withdraw {
            family: Family::Ipv4Unicast,
            prefixes: vec![net(P)]
        }]
    );
    assert_eq!(r.counts(3).advertised, 0);
    // And peer 2 now gets peer 3's path.
    let to2 = drained(&mut r, 2);
    assert_eq!(to2.0[&net(P)].next_hop, nh([192, 0, 2, 254]));
    assert_eq!(
        to2.0[&net(P)].as_path.segments,
        vec![AsSegment::Sequence(vec![OUR_AS])]
    );
}

#[test]
fn peer_down_withdraws_its_routes_from_others() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(
        2,
        attrs(&[65002], [10, 1, 1, 2]),
        &[net(P), net("100.64.1.0/24")],
    )
    .unwrap();
    let mut to3 = drained(&mut r, 3);
    assert_eq!(to3.0.len(), 2);
    let c = r.peer_down(2);
    assert_eq!(c.peers_with_output, vec![3]);
    assert_eq!(c.kernel.len(), 2);
    assert!(c.kernel.iter().all(|(_, n)| n.is_none()));
    to3.drain(&mut r, 3, 10);
    assert!(to3.0.is_empty());
    assert_eq!(r.prefix_count(Family::Ipv4Unicast), 0);
    assert_eq!(r.attr_set_count(), 0);
    assert_eq!(r.counts(2), PeerCounts::default());
}

#[test]
fn never_advertised_then_gone_sends_nothing() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    r.withdraw(2, &[net(P)]);
    assert_eq!(r.take_output(3, 10), None);
    assert_eq!(r.pending(3), 0);
}

#[test]
fn only_the_last_state_goes_out() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002, 1], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let mut to3 = drained(&mut r, 3);
    r.announce(2, attrs(&[65002, 2], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    r.announce(2, attrs(&[65002, 3], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let batches = to3.drain(&mut r, 3, 10);
    assert_eq!(batches.len(), 1);
    assert_eq!(
        to3.0[&net(P)].as_path.segments,
        vec![AsSegment::Sequence(vec![OUR_AS, 65002, 3])]
    );
    // Withdrawn and announced again before the writer ran: one announce.
    r.withdraw(2, &[net(P)]);
    r.announce(2, attrs(&[65002, 3], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert_eq!(to3.drain(&mut r, 3, 10).len(), 1);
    // Announced and withdrawn: one withdraw.
    r.announce(2, attrs(&[65002, 4], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    r.withdraw(2, &[net(P)]);
    let b = to3.drain(&mut r, 3, 10);
    assert!(matches!(&b[..], [OutBatch::Withdraw { .. }]));
    assert!(to3.0.is_empty());
}

#[test]
fn batches_are_grouped_and_bounded() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.peer_up(ebgp(9));
    let nets = |base: u8| -> Vec<IpNet> {
        (0..25)
            .map(|i| net(&format!("{base}.{i}.0.0/16")))
            .collect()
    };
    // Interleaved UPDATEs from two peers with one attribute set each.
    for k in 0..5 {
        let a = nets(20);
        let b = nets(30);
        r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &a[k * 5..k * 5 + 5])
            .unwrap();
        r.announce(3, attrs(&[65003], [10, 1, 1, 3]), &b[k * 5..k * 5 + 5])
            .unwrap();
    }
    let mut sent = Sent::default();
    let batches = sent.drain(&mut r, 9, 10);
    assert_eq!(sent.0.len(), 50);
    assert_eq!(batches.len(), 6, "{batches:?}");
    for b in &batches {
        let OutBatch::Announce {
            attrs, prefixes, ..
        } = b
        else {
            panic!("withdraw");
        };
        assert!(prefixes.len() <= 10);
        let first = prefixes[0].to_string();
        let from2 = first.starts_with("20.");
        assert!(
            prefixes
                .iter()
                .all(|p| p.to_string().starts_with(&first[..3]))
        );
        assert_eq!(attrs.as_path.first_as(), Some(OUR_AS));
        assert_eq!(
            attrs.as_path.segments[0].asns()[1],
            if from2 { 65002 } else { 65003 }
        );
    }
    assert_eq!(r.counts(9).advertised, 50);
}

#[test]
fn down_peer_gets_nothing() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.peer_down(3);
    let c = r
        .announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert!(c.peers_with_output.is_empty());
    assert_eq!(r.take_output(3, 10), None);
}

/// An announcement the session could not encode went out as a withdraw:
/// the peer holds nothing, so a later withdraw of the route sends nothing
/// and a new best path is announced again (RFC 4271 9.2).
#[test]
fn not_advertised_prefixes_are_not_held_by_the_peer() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let Some(OutBatch::Announce {
        family, prefixes, ..
    }) = r.take_output(3, 10)
    else {
        panic!("no announcement");
    };
    assert_eq!(r.counts(3).advertised, 1);
    r.not_advertised(3, family, &prefixes);
    assert_eq!(r.counts(3).advertised, 0);
    // A new path for the prefix is tried again.
    r.announce(2, attrs(&[65002, 7], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert!(matches!(
        r.take_output(3, 10),
        Some(OutBatch::Announce { .. })
    ));
    r.not_advertised(3, family, &prefixes);
    // Gone: nothing to withdraw, the peer was never left holding it.
    r.withdraw(2, &[net(P)]);
    assert_eq!(r.take_output(3, 10), None);
    assert_eq!(r.counts(3).advertised, 0);
}

#[test]
fn output_taken_in_some_families_leaves_the_others_pending() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let mut v6 = attrs(&[65002], [10, 1, 1, 2]);
    v6.next_hop = v6nh("2001:db8::2");
    r.announce(2, v6, &[net("2001:db8:1::/48")]).unwrap();
    // Only IPv6 is taken; the IPv4 route stays pending.
    match r.take_output_of(3, 10, &[Family::Ipv6Unicast]) {
        Some(OutBatch::Announce {
            family, prefixes, ..
        }) => {
            assert_eq!(family, Family::Ipv6Unicast);
            assert_eq!(prefixes, vec![net("2001:db8:1::/48")]);
        }
        other => panic!("expected the IPv6 announcement, got {other:?}"),
    }
    assert_eq!(r.take_output_of(3, 10, &[Family::Ipv6Unicast]), None);
    assert_eq!(r.take_output_of(3, 10, &[]), None);
    let to3 = drained(&mut r, 3);
    assert_eq!(to3.0.keys().collect::<Vec<_>>(), vec![&net(P)]);
}
