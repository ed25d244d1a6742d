//! RFC 8326 graceful shutdown: draining re-advertises every route with
//! GRACEFUL_SHUTDOWN (LOCAL_PREF 0 to internal peers only); a received
//! route carrying it gets LOCAL_PREF 0 and loses to any other path.

use super::*;
use crate::model::well_known::GRACEFUL_SHUTDOWN;

const OWN: &str = "10.244.1.0/26";
const LEARNED: &str = "198.51.100.0/24";

#[test]
fn draining_re_advertises_every_route_marked_and_undrain_unmarks() {
    let mut r = rib();
    r.originate(attrs(&[], [0, 0, 0, 0]), net(OWN));
    r.peer_up(ibgp(2));
    r.peer_up(ebgp(3));
    r.announce(3, attrs(&[65003], [192, 0, 2, 3]), &[net(LEARNED)])
        .unwrap();
    let mut to_ibgp = drained(&mut r, 2);
    let mut to_ebgp = drained(&mut r, 3);
    assert!(
        to_ibgp
            .0
            .values()
            .all(|a| !a.communities.contains(&GRACEFUL_SHUTDOWN))
    );
    assert_eq!(to_ibgp.0[&net(OWN)].local_pref, Some(100));

    r.set_draining(true);
    assert!(r.draining());
    // Everything goes out again, nothing is withdrawn.
    let batches = to_ibgp.drain(&mut r, 2, 1000);
    assert!(
        batches
            .iter()
            .all(|b| matches!(b, OutBatch::Announce { .. })),
        "{batches:?}"
    );
    assert_eq!(
        to_ibgp.0.len(),
        2,
        "own and learned routes to the iBGP peer"
    );
    for (p, a) in &to_ibgp.0 {
        assert!(a.communities.contains(&GRACEFUL_SHUTDOWN), "{p}");
        assert_eq!(a.local_pref, Some(0), "{p}: LOCAL_PREF 0 to iBGP");
    }
    to_ebgp.drain(&mut r, 3, 1000);
    // The eBGP peer gets only our own route back (not its own), with the
    // community and no LOCAL_PREF.
    let own = &to_ebgp.0[&net(OWN)];
    assert!(own.communities.contains(&GRACEFUL_SHUTDOWN));
    assert_eq!(own.local_pref, None);

    // Draining again changes nothing; undraining takes the marks off.
    r.set_draining(true);
    assert!(drained(&mut r, 2).0.is_empty());
    r.set_draining(false);
    to_ibgp.drain(&mut r, 2, 1000);
    assert!(
        to_ibgp
            .0
            .values()
            .all(|a| !a.communities.contains(&GRACEFUL_SHUTDOWN) && a.local_pref == Some(100))
    );
}

#[test]
fn the_community_is_added_once() {
    let mut r = rib();
    let mut a = attrs(&[], [0, 0, 0, 0]);
    a.communities = vec![GRACEFUL_SHUTDOWN];
    r.originate(a, net(OWN));
    r.peer_up(ibgp(2));
    r.set_draining(true);
    let sent = drained(&mut r, 2);
    assert_eq!(sent.0[&net(OWN)].communities, vec![GRACEFUL_SHUTDOWN]);
}

#[test]
fn a_received_graceful_shutdown_path_loses() {
    for (a, b) in [(ibgp(2), ibgp(3)), (ebgp(2), ebgp(3))] {
        let (ida, idb) = (a.id, b.id);
        let mut r = rib();
        r.peer_up(a);
        r.peer_up(b);
        // Peer a's path would win (shorter AS path, lower router id) ...
        let mut via_a = attrs(&[], [192, 0, 2, ida as u8]);
        via_a.as_path = AsPath {
            segments: vec![AsSegment::Sequence(vec![65000 + ida])],
        };
        let via_b = attrs(&[65000 + idb, 65100], [192, 0, 2, idb as u8]);
        r.announce(ida, via_a.clone(), &[net(LEARNED)]).unwrap();
        r.announce(idb, via_b, &[net(LEARNED)]).unwrap();
        assert_eq!(best_peer(&r, LEARNED), Some(ida));
        // ... until it is marked for graceful shutdown.
        via_a.communities.push(GRACEFUL_SHUTDOWN);
        r.announce(ida, via_a, &[net(LEARNED)]).unwrap();
        assert_eq!(best_peer(&r, LEARNED), Some(idb));
        let paths: Vec<_> = r.routes(Family::Ipv4Unicast).collect();
        let lp: Vec<_> = paths[0]
            .paths
            .iter()
            .map(|p| (p.peer, p.attrs.local_pref))
            .collect();
        assert!(lp.contains(&(ida, Some(0))), "{lp:?}");
    }
}
