//! Route selection deferral as the restarting speaker (RFC 4724 4.1).
//!
//! After a restart with our forwarding state kept (`Daemon::restarting`:
//! R and F bits in our OPENs), nothing goes out to any peer for a family,
//! neither the table nor End-of-RIB, until every neighbor that is to send
//! its End-of-RIB for that family has sent it, or the Selection_Deferral
//! Timer (bgpd: `graceful_restart.selection_deferral_time`, from the start) is
//! over. Each peer then gets the table as selected from all of them, then
//! End-of-RIB. So a helper never sees our End-of-RIB before we have
//! relearned what we had sent it, and never sweeps a route we were about
//! to send again.
//!
//! Waited for, per family: every configured neighbor with graceful restart
//! on, for the families it is configured with while it is not up (RFC
//! 4724 4.1 speaks of all the peers; one not yet reconnected may still
//! come back within the timer), and, once up, for the families
//! negotiated, unless it did not advertise graceful restart or set the
//! Restart State bit (it is restarting too and waits for us: RFC 4724
//! 4.1's exclusions). An End-of-RIB counts once received during the
//! deferral, also if that session goes down later.
//!
//! Only what is sent is held: the RIB learns and the kernel installs as
//! usual. A peer that comes up after its families are released gets its
//! table at once, as on a cold start.
use super::instance::Daemon;
use crate::config::Neighbor;
use crate::model::Family;
use crate::rib::PeerId;
use crate::session::Negotiated;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Instant;
use tracing::info;

/// The deferral under way.
#[derive(Debug)]
pub(super) struct Deferral {
    /// The Selection_Deferral_Timer: when every family is released anyway.
    pub until: Instant,
    /// The families still held.
    pub held: Vec<Family>,
    /// End-of-RIB received meanwhile, per peer.
    pub eor: HashMap<PeerId, HashSet<Family>>,
}

impl Deferral {
    pub(super) fn new(until: Instant) -> Deferral {
        Deferral {
            until,
            held: Family::ALL.to_vec(),
            eor: HashMap::new(),
        }
    }
}

/// Whether the deferral of `family` waits for this neighbor's End-of-RIB:
/// `up` is its session's parameters, None while it is not up.
pub(super) fn waits_for(n: &Neighbor, up: Option<&Negotiated>, family: Family) -> bool {
    if !n.graceful_restart {
        // We do not announce the capability: no helper of ours.
        return false;
    }
    match up {
        None => n.families.contains(&family),
        Some(s) => {
            s.families.contains(&family)
                && s.peer_graceful_restart
                    .as_ref()
                    .is_some_and(|g| !g.restarting)
        }
    }
}

impl Daemon {
    /// Whether what goes out in `family` is held back.
    pub(super) fn deferred(&self, family: Family) -> bool {
        self.deferral
            .as_ref()
            .is_some_and(|d| d.held.contains(&family))
    }

    /// The addresses of the neighbors `family` still waits for.
    fn waiting_for(&self, d: &Deferral, family: Family) -> Vec<IpAddr> {
        let mut w: Vec<IpAddr> = self
            .peers
            .iter()
            .filter(|(id, p)| {
                waits_for(&p.neighbor, p.up.as_ref().map(|u| &u.negotiated), family)
                    && !d.eor.get(id).is_some_and(|e| e.contains(&family))
            })
            .map(|(_, p)| p.neighbor.address)
            .collect();
        w.sort();
        w
    }

    /// A neighbor sent End-of-RIB for `family`.
    pub(super) fn deferral_eor(&mut self, id: PeerId, family: Family) {
        if let Some(d) = self.deferral.as_mut() {
            d.eor.entry(id).or_default().insert(family);
            self.check_deferral();
        }
    }

    /// Releases the families that wait for nobody any more.
    pub(super) fn check_deferral(&mut self) {
        let Some(d) = self.deferral.as_ref() else {
            return;
        };
        let done: Vec<Family> = d
            .held
            .iter()
            .copied()
            .filter(|f| self.waiting_for(d, *f).is_empty())
            .collect();
        for f in done {
            info!(family = %f, "every neighbor has sent End-of-RIB; route selection done, sending our routes (RFC 4724 4.1)");
            self.release(Some(f));
        }
    }

    /// The Selection_Deferral_Timer: everything still held goes.
    pub(super) fn deferral_timer(&mut self, now: Instant) {
        let Some(d) = self.deferral.as_ref().filter(|d| d.until <= now) else {
            return;
        };
        for f in &d.held {
            let waiting = self.waiting_for(d, *f);
            info!(family = %f, ?waiting, "selection deferral time over; sending our routes without these neighbors' End-of-RIB (RFC 4724 4.1)");
        }
        self.release(None);
    }

    /// Ends the deferral of `family` (None: of every family) and wakes the
    /// writers of the peers concerned.
    pub(super) fn release(&mut self, family: Option<Family>) {
        let Some(d) = self.deferral.as_mut() else {
            return;
        };
        d.held.retain(|f| family.is_some_and(|g| g != *f));
        if d.held.is_empty() {
            self.deferral = None;
        }
        for p in self.peers.values() {
            if let Some(up) = &p.up
                && family.is_none_or(|f| up.negotiated.families.contains(&f))
            {
                up.output.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::GracefulRestartCap;
    use std::time::Duration;

    fn neighbor(graceful_restart: bool) -> Neighbor {
        let c = crate::config::parse(
            "t",
            "router_id = \"10.0.0.1\"\nasn = 65000\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65000\n",
        )
        .unwrap();
        let mut n = c.neighbors[0].clone();
        n.graceful_restart = graceful_restart;
        n.families = vec![Family::Ipv4Unicast];
        n
    }

    fn session(gr: Option<bool>) -> Negotiated {
        Negotiated {
            peer_router_id: std::net::Ipv4Addr::new(10, 0, 0, 2),
            peer_asn: 65000,
            hold_time: Duration::from_secs(90),
            keepalive: Duration::from_secs(30),
            families: vec![Family::Ipv4Unicast],
            four_octet_as: true,
            route_refresh: true,
            peer_graceful_restart: gr.map(|restarting| GracefulRestartCap {
                restarting,
                notification: false,
                restart_time: 120,
                families: vec![(Family::Ipv4Unicast, true)],
            }),
        }
    }

    /// Whether `n` is waited for in IPv4 and in IPv6: not up (None), or
    /// up with this capability (Some(None): none; else its R bit).
    fn waited(n: &Neighbor, up: Option<Option<bool>>) -> (bool, bool) {
        let s = up.map(session);
        let w = |f| waits_for(n, s.as_ref(), f);
        (w(Family::Ipv4Unicast), w(Family::Ipv6Unicast))
    }

    #[test]
    fn a_neighbor_not_up_is_waited_for_in_its_configured_families() {
        assert_eq!(waited(&neighbor(true), None), (true, false));
    }

    #[test]
    fn only_a_graceful_restart_peer_that_is_not_restarting_is_waited_for() {
        let n = neighbor(true);
        // IPv6 is not negotiated.
        assert_eq!(waited(&n, Some(Some(false))), (true, false));
        // RFC 4724 4.1: no capability, or the Restart State bit set.
        assert_eq!(waited(&n, Some(None)), (false, false));
        assert_eq!(waited(&n, Some(Some(true))), (false, false));
    }

    #[test]
    fn a_neighbor_without_graceful_restart_on_our_side_is_not_waited_for() {
        let n = neighbor(false);
        assert_eq!(waited(&n, None), (false, false));
        assert_eq!(waited(&n, Some(Some(false))), (false, false));
    }

    #[test]
    fn a_new_deferral_holds_every_family() {
        let d = Deferral::new(Instant::now() + Duration::from_secs(1));
        assert_eq!(d.held, Family::ALL.to_vec());
        assert!(d.eor.is_empty());
    }
}
