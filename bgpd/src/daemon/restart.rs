//! Graceful restart (RFC 4724) on the instance's side. As helper: a
//! restarting peer's routes are kept as stale for its restart time (bounded
//! by the operator), swept family by family on End-of-RIB, or all at once
//! when the time is over. As the restarting speaker: what we send waits
//! for route selection, and the kernel routes of our previous run stay
//! until every neighbor has resent its routes, or the selection deferral
//! time is over (`deferral.rs`). The decisions are the pure functions at the
//! end; the methods apply them to the RIB and the kernel.
use super::instance::Daemon;
use crate::config::Neighbor;
use crate::model::Family;
use crate::rib::PeerId;
use crate::wire::GracefulRestartCap;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tracing::{debug, info};

impl Daemon {
    pub(super) fn on_timers(&mut self) {
        let now = Instant::now();
        self.close_if_drained(now);
        let expired: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| p.stale_until.is_some_and(|t| t <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            if let Some(p) = self.peers.get_mut(&id) {
                p.stale_until = None;
                info!(peer = %p.neighbor.address, "graceful restart time over; removing the peer's stale routes");
                let address = p.neighbor.address;
                // Only the End-of-RIBs of the routes that go count no more.
                let gone = families_swept(p.up.as_ref().map(|u| &u.eor_received));
                self.deferral_forget(address, Some(&gone));
            }
            let c = self.rib.sweep_stale(id, None);
            self.apply(c);
        }
        self.deferral_timer(now);
        self.kernel_stale_timer(now);
    }

    pub(super) fn on_end_of_rib(&mut self, id: PeerId, family: Family) {
        debug!(peer = id, %family, "End-of-RIB received");
        let c = self.rib.sweep_stale(id, Some(family));
        self.apply(c);
        let Some(slot) = self.peers.get_mut(&id) else {
            return;
        };
        if let Some(up) = slot.up.as_mut() {
            up.eor_received.insert(family);
            if all_resent(&up.negotiated.families, &up.eor_received) {
                slot.stale_until = None;
            }
        }
        // Restarting: the last End-of-RIB waited for ends route
        // selection, the last one of all the kernel's leftovers
        // (`deferral.rs`).
        self.deferral_eor(id, family);
    }

    pub(super) fn on_down(&mut self, id: PeerId, graceful: bool, reason: &str) {
        let Some(slot) = self.peers.get_mut(&id) else {
            return;
        };
        let (peer_gr, eor_received) = slot.up.take().map_or((None, HashSet::new()), |u| {
            (u.negotiated.peer_graceful_restart, u.eor_received)
        });
        let now = Instant::now();
        let c = match keep_stale_until(
            graceful,
            peer_gr.as_ref(),
            slot.neighbor.max_restart_time,
            now,
        ) {
            Some(until) => {
                let restart_time = until.duration_since(now).as_secs();
                let families = peer_gr.as_ref().map(families_kept).unwrap_or_default();
                info!(peer = %slot.neighbor.address, restart_time, ?families, "peer may be restarting; keeping its routes as stale (RFC 4724)");
                slot.stale_until = Some(until);
                // The routes of the other families go now, and so do
                // those still stale from an earlier restart: the
                // End-of-RIBs that completed them count no more.
                let address = slot.neighbor.address;
                let gone = families_removed_at_restart(&families, &eor_received);
                self.deferral_forget(address, Some(&gone));
                self.rib.mark_stale(id, &families)
            }
            None => {
                debug!(peer = %slot.neighbor.address, %reason, "removing the peer's routes");
                slot.stale_until = None;
                let address = slot.neighbor.address;
                self.deferral_forget(address, None);
                self.rib.peer_down(id)
            }
        };
        self.apply(c);
    }
}

/// The restart time this speaker announces to `n` (RFC 4724), None
/// without graceful restart: the neighbor's own, else the speaker's.
pub(super) fn announced_restart_time(n: &Neighbor, speaker: u16) -> Option<u16> {
    n.graceful_restart
        .then_some(n.restart_time.unwrap_or(speaker))
}

/// How long a restarting peer's routes are kept: the time it announced,
/// bounded by the operator's `max_restart_time`.
pub(super) fn bounded_restart_time(announced: u16, max: Option<u16>) -> u16 {
    max.map_or(announced, |m| announced.min(m))
}

/// When a session goes down: until when the peer's routes are kept as
/// stale, or None when they go now. Only a graceful end (a transport
/// failure, or a new connection's accepted OPEN) keeps them, and only when
/// the peer's capability lists a family (RFC 4724 4.2).
pub(super) fn keep_stale_until(
    graceful: bool,
    peer: Option<&GracefulRestartCap>,
    max_restart_time: Option<u16>,
    now: Instant,
) -> Option<Instant> {
    let peer = peer.filter(|g| !g.families.is_empty())?;
    let t = bounded_restart_time(peer.restart_time, max_restart_time);
    graceful.then(|| now + Duration::from_secs(u64::from(t)))
}

/// RFC 4724 4.2: the families whose routes are kept over the peer's
/// restart, those of its capability (whatever their F bit: that one counts
/// in the OPEN after the restart).
pub(super) fn families_kept(peer: &GracefulRestartCap) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| peer.families.iter().any(|(g, _)| g == f))
        .collect()
}

/// When a session ends with the peer's routes kept (`kept`, of
/// `families_kept`): the families whose routes, or some of them, go at
/// once, so that an End-of-RIB that completed them counts no more
/// (`deferral.rs`). RFC 4724 4.2: the routes of a family not in the
/// capability are not retained; in a family kept, the routes still stale
/// from an earlier restart are deleted (`Rib::mark_stale`), which is where
/// the session that ends sent no End-of-RIB (one sweeps them): an
/// End-of-RIB recorded for such a family came on an earlier session, and
/// its routes are those stale ones.
pub(super) fn families_removed_at_restart(
    kept: &[Family],
    eor_received: &HashSet<Family>,
) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| !kept.contains(f) || !eor_received.contains(f))
        .collect()
}

/// RFC 4724 4.2: when the peer is back, its stale routes of the families it
/// no longer keeps forwarding for (no capability, or F bit clear) go at
/// once.
pub(super) fn families_not_preserved(peer: Option<&GracefulRestartCap>) -> Vec<Family> {
    let preserved: Vec<Family> = peer
        .map(|g| {
            g.families
                .iter()
                .filter(|(_, f)| *f)
                .map(|(fam, _)| *fam)
                .collect()
        })
        .unwrap_or_default();
    Family::ALL
        .into_iter()
        .filter(|f| !preserved.contains(f))
        .collect()
}

/// The families whose routes a peer's stale-routes timeout removes:
/// every one while it is down (`eor_received` None: all its routes are
/// stale), else those without End-of-RIB on its current session (one that
/// came swept that family's stale routes already: its routes are current).
pub(super) fn families_swept(eor_received: Option<&HashSet<Family>>) -> Vec<Family> {
    Family::ALL
        .into_iter()
        .filter(|f| eor_received.is_none_or(|e| !e.contains(f)))
        .collect()
}

/// Whether End-of-RIB has come for every one of `families`.
pub(super) fn all_resent(families: &[Family], eor_received: &HashSet<Family>) -> bool {
    families.iter().all(|f| eor_received.contains(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(restart_time: u16, families: &[(Family, bool)]) -> GracefulRestartCap {
        GracefulRestartCap {
            restarting: true,
            notification: false,
            restart_time,
            families: families.to_vec(),
        }
    }

    #[test]
    fn a_neighbor_may_be_announced_its_own_restart_time() {
        let c = crate::config::parse(
            "t",
            "router_id = \"10.0.0.1\"\nasn = 65000\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65001\n",
        )
        .unwrap();
        let mut n = c.neighbors[0].clone();
        assert_eq!(announced_restart_time(&n, 120), Some(120));
        n.restart_time = Some(30);
        assert_eq!(announced_restart_time(&n, 120), Some(30));
        n.graceful_restart = false;
        assert_eq!(announced_restart_time(&n, 120), None);
    }

    #[test]
    fn the_restart_time_is_bounded_by_the_operator() {
        assert_eq!(bounded_restart_time(120, None), 120);
        assert_eq!(bounded_restart_time(120, Some(30)), 30);
        assert_eq!(bounded_restart_time(10, Some(30)), 10);
        assert_eq!(bounded_restart_time(120, Some(0)), 0);
    }

    #[test]
    fn routes_are_kept_for_the_restart_time_only_on_a_graceful_end() {
        let now = Instant::now();
        let c = cap(120, &[(Family::Ipv4Unicast, true)]);
        assert_eq!(
            keep_stale_until(true, Some(&c), None, now),
            Some(now + Duration::from_secs(120))
        );
        assert_eq!(
            keep_stale_until(true, Some(&c), Some(30), now),
            Some(now + Duration::from_secs(30))
        );
        // A NOTIFICATION either way, or no capability: removed now.
        assert_eq!(keep_stale_until(false, Some(&c), None, now), None);
        assert_eq!(keep_stale_until(true, None, None, now), None);
        // A capability without families keeps nothing (RFC 4724 4.2).
        assert_eq!(
            keep_stale_until(true, Some(&cap(120, &[])), None, now),
            None
        );
    }

    #[test]
    fn only_the_families_of_the_peers_capability_are_kept() {
        let c = cap(120, &[(Family::Ipv6Unicast, false)]);
        assert_eq!(families_kept(&c), vec![Family::Ipv6Unicast]);
        let c = cap(
            120,
            &[
                (Family::Ipv4Unicast, true),
                (Family::Ipv6Unicast, true),
                (Family::Ipv4Unicast, false),
            ],
        );
        assert_eq!(
            families_kept(&c),
            vec![Family::Ipv4Unicast, Family::Ipv6Unicast]
        );
    }

    #[test]
    fn at_a_graceful_end_the_families_not_kept_or_not_resent_lose_routes() {
        let mut eor = HashSet::new();
        eor.insert(Family::Ipv4Unicast);
        eor.insert(Family::Ipv6Unicast);
        // IPv6 is not in the capability: its routes go.
        assert_eq!(
            families_removed_at_restart(&[Family::Ipv4Unicast], &eor),
            vec![Family::Ipv6Unicast]
        );
        assert_eq!(families_removed_at_restart(&Family::ALL, &eor), vec![]);
        // IPv4 kept, but not resent on this session: its routes still
        // stale from an earlier restart go.
        eor.remove(&Family::Ipv4Unicast);
        assert_eq!(
            families_removed_at_restart(&Family::ALL, &eor),
            vec![Family::Ipv4Unicast]
        );
        assert_eq!(
            families_removed_at_restart(&[], &HashSet::new()),
            Family::ALL.to_vec()
        );
    }

    #[test]
    fn stale_routes_of_families_not_preserved_go_when_the_peer_is_back() {
        let c = cap(
            120,
            &[(Family::Ipv4Unicast, true), (Family::Ipv6Unicast, false)],
        );
        assert_eq!(families_not_preserved(Some(&c)), vec![Family::Ipv6Unicast]);
        assert_eq!(families_not_preserved(None), Family::ALL.to_vec());
    }

    #[test]
    fn the_stale_routes_timeout_removes_only_the_families_not_resent() {
        assert_eq!(families_swept(None), Family::ALL.to_vec());
        let mut eor = HashSet::new();
        assert_eq!(families_swept(Some(&eor)), Family::ALL.to_vec());
        eor.insert(Family::Ipv4Unicast);
        assert_eq!(families_swept(Some(&eor)), vec![Family::Ipv6Unicast]);
        eor.insert(Family::Ipv6Unicast);
        assert_eq!(families_swept(Some(&eor)), vec![]);
    }

    #[test]
    fn the_stale_routes_stay_until_every_family_has_its_end_of_rib() {
        let fams = [Family::Ipv4Unicast, Family::Ipv6Unicast];
        let mut eor = HashSet::new();
        assert!(!all_resent(&fams, &eor));
        eor.insert(Family::Ipv4Unicast);
        assert!(!all_resent(&fams, &eor));
        eor.insert(Family::Ipv6Unicast);
        assert!(all_resent(&fams, &eor));
        assert!(all_resent(&[], &HashSet::new()));
    }
}
