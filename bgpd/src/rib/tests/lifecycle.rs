//! Graceful restart (stale paths), attribute interning, kernel changes.

use super::super::attrs::AttrId;
use super::*;

const P: &str = "172.16.0.0/24";
const Q: &str = "172.16.1.0/24";

#[test]
fn stale_paths_are_kept_then_swept() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    let a = attrs(&[65002], [10, 1, 1, 2]);
    let mut a6 = a.clone();
    a6.next_hop = v6nh("2001:db8::2");
    r.announce(2, a.clone(), &[net(P), net(Q)]).unwrap();
    r.announce(2, a6.clone(), &[net("2001:db8:7::/48")])
        .unwrap();
    let mut to3 = drained(&mut r, 3);
    r.mark_stale(2, &Family::ALL);
    assert!(r.best(&net(P)).unwrap().stale);
    // Peer 3 keeps the routes: nothing to send.
    assert_eq!(r.take_output(3, 10), None);
    // The peer comes back and re-announces P only.
    r.peer_up(ebgp(2));
    r.announce(2, a, &[net(P)]).unwrap();
    assert!(!r.best(&net(P)).unwrap().stale);
    assert!(r.best(&net(Q)).unwrap().stale);
    // End-of-RIB for IPv4 sweeps Q, not the IPv6 route.
    let c = r.sweep_stale(2, Some(Family::Ipv4Unicast));
    assert_eq!(c.kernel, vec![(net(Q), None)]);
    assert!(r.best(&net(Q)).is_none());
    assert!(r.best(&net(P)).is_some());
    assert!(r.best(&net("2001:db8:7::/48")).unwrap().stale);
    to3.drain(&mut r, 3, 10);
    assert_eq!(to3.0.len(), 2);
    assert!(!to3.0.contains_key(&net(Q)));
    r.sweep_stale(2, None);
    assert_eq!(r.prefix_count(Family::Ipv6Unicast), 0);
    assert_eq!(r.counts(2).accepted, 1);
}

#[test]
fn only_the_families_of_the_capability_are_kept_stale() {
    // RFC 4724 4.2: the peer's capability listed IPv4 only.
    let mut r = rib();
    r.peer_up(ebgp(2));
    let a = attrs(&[65002], [10, 1, 1, 2]);
    let mut a6 = a.clone();
    a6.next_hop = v6nh("2001:db8::2");
    r.announce(2, a, &[net(P)]).unwrap();
    r.announce(2, a6, &[net("2001:db8:7::/48")]).unwrap();
    let c = r.mark_stale(2, &[Family::Ipv4Unicast]);
    assert_eq!(c.kernel, vec![(net("2001:db8:7::/48"), None)]);
    assert!(r.best(&net("2001:db8:7::/48")).is_none());
    assert!(r.best(&net(P)).unwrap().stale);
    // No family at all: nothing is kept.
    let c = r.mark_stale(2, &[]);
    assert_eq!(c.kernel, vec![(net(P), None)]);
    assert_eq!(r.prefix_count(Family::Ipv4Unicast), 0);
}

#[test]
fn routes_still_stale_from_a_restart_go_at_the_next_one() {
    // RFC 4724 4.2, consecutive restarts: a route previously marked stale
    // MUST be deleted.
    let mut r = rib();
    r.peer_up(ebgp(2));
    let a = attrs(&[65002], [10, 1, 1, 2]);
    r.announce(2, a.clone(), &[net(P), net(Q)]).unwrap();
    r.mark_stale(2, &Family::ALL);
    // Back, P sent again, no End-of-RIB, and down again.
    r.peer_up(ebgp(2));
    r.announce(2, a, &[net(P)]).unwrap();
    let c = r.mark_stale(2, &Family::ALL);
    assert_eq!(c.kernel, vec![(net(Q), None)]);
    assert!(r.best(&net(Q)).is_none());
    assert!(
        r.best(&net(P)).unwrap().stale,
        "sent again, so kept once more"
    );
}

#[test]
fn stale_path_from_multipath_prefix() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    r.announce(3, attrs(&[65003], [10, 1, 1, 3]), &[net(P)])
        .unwrap();
    r.mark_stale(3, &Family::ALL);
    let c = r.sweep_stale(3, None);
    let one: NextHops = Arc::from(vec![nh([10, 1, 1, 2])]);
    assert_eq!(c.kernel, vec![(net(P), Some(one))]);
    assert_eq!(best_peer(&r, P), Some(2));
}

#[test]
fn interning_shares_and_frees() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    let a = attrs(&[65002], [10, 1, 1, 2]);
    r.announce(2, a.clone(), &[net(P)]).unwrap();
    r.announce(2, a.clone(), &[net(Q)]).unwrap();
    assert_eq!(r.attr_set_count(), 1);
    let (bp, bq) = (r.best(&net(P)).unwrap(), r.best(&net(Q)).unwrap());
    assert!(Arc::ptr_eq(&bp.attrs, &bq.attrs));
    let id = r.attrs_id_of(&a);
    assert_eq!(r.attrs.refs(id), 2);
    // A different set from another peer: two sets.
    r.announce(3, attrs(&[65003], [10, 1, 1, 3]), &[net(P)])
        .unwrap();
    assert_eq!(r.attr_set_count(), 2);
    // Replace P's path from peer 2 with a new set: still referenced by Q.
    r.announce(2, attrs(&[65002, 1], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert_eq!(r.attr_set_count(), 3);
    assert_eq!(r.attrs.refs(id), 1);
    r.withdraw(2, &[net(Q)]);
    assert_eq!(r.attr_set_count(), 2);
    r.peer_down(2);
    r.peer_down(3);
    assert_eq!(r.attr_set_count(), 0);
    assert_eq!(r.prefix_count(Family::Ipv4Unicast), 0);
}

#[test]
fn slots_are_reused_after_the_withdraw_goes_out() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.peer_up(ebgp(3));
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let mut to3 = drained(&mut r, 3);
    r.withdraw(2, &[net(P)]);
    // The slot must survive until peer 3 got the withdraw.
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(Q)])
        .unwrap();
    to3.drain(&mut r, 3, 10);
    assert_eq!(to3.0.keys().collect::<Vec<_>>(), vec![&net(Q)]);
    r.withdraw(2, &[net(Q)]);
    to3.drain(&mut r, 3, 10);
    assert!(to3.0.is_empty());
    assert_eq!(r.v4.slot_count(), 2);
    r.announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net("172.16.2.0/24")])
        .unwrap();
    assert_eq!(r.v4.slot_count(), 2);
}

#[test]
fn kernel_changes_only_when_next_hops_change() {
    let mut r = rib();
    r.peer_up(ebgp(2));
    let c = r
        .announce(2, attrs(&[65002], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    let one: NextHops = Arc::from(vec![nh([10, 1, 1, 2])]);
    assert_eq!(c.kernel, vec![(net(P), Some(one))]);
    // New attributes, same next hop: nothing for the kernel.
    let c = r
        .announce(2, attrs(&[65002, 5], [10, 1, 1, 2]), &[net(P)])
        .unwrap();
    assert!(c.kernel.is_empty());
    let c = r
        .announce(2, attrs(&[65002, 5], [10, 1, 1, 9]), &[net(P)])
        .unwrap();
    assert_eq!(c.kernel.len(), 1);
    // Originated routes never reach the kernel.
    let c = r.originate(attrs(&[], [0; 4]), net(Q));
    assert!(c.kernel.is_empty());
}

impl Rib {
    /// The id under which `a` is interned (test helper: scans the ids).
    fn attrs_id_of(&self, a: &PathAttrs) -> AttrId {
        (0..1000)
            .map(AttrId)
            .find(|&id| self.attrs.refs(id) > 0 && *self.attrs.get(id).attrs == *a)
            .unwrap()
    }
}
