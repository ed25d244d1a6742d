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
//! deferral, by neighbor address, as long as the routes it completed are
//! in the RIB: also when that session goes down gracefully (its routes
//! stay as stale). It counts no more once they are gone: the session
//! ended without graceful restart, the neighbor was reconfigured or
//! removed, its stale routes timed out, or a family's were swept because
//! the peer came back without keeping its forwarding state; the neighbor
//! is then waited for again.
//!
//! Once selection is done for every family (every End-of-RIB waited for,
//! or the timer), later OPENs carry no Restart State bit (RFC 4724 3).
//! When nobody is waited for (no graceful-restart neighbor, or none that
//! can send End-of-RIB), that is at once: there is nothing to defer.
//!
//! The kernel routes of the previous run not learned again have their own
//! condition (RFC 4724 4.1: forwarding state not updated by selection is
//! deleted; BIRD prunes the kernel when its recovery ends): they go once
//! every configured neighbor is up and has sent End-of-RIB on its current
//! session, whether we waited for it or not (Tartan, BIRD, FRR and GoBGP
//! send End-of-RIB also without graceful restart), or at the deferral's
//! end, whichever comes first. So a neighbor not waited for still has the
//! time to send its routes again before the old ones go, and no order of
//! events removes them earlier. A drain lets the held output go at once
//! (the peers must get the GRACEFUL_SHUTDOWN routes) but decides nothing
//! else.
//!
//! Only what is sent is held: the RIB learns and the kernel installs as
//! usual. A peer that comes up after its families are released gets its
//! table at once, as on a cold start. What the operator sees of it is in
//! `deferral_view.rs`.
use super::instance::Daemon;
use super::restart::all_resent;
use crate::config::Neighbor;
use crate::model::Family;
use crate::rib::PeerId;
use crate::session::Negotiated;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::time::Instant;
use tracing::info;

/// Why the deferral of a family is over: every End-of-RIB waited for
/// has come, or nobody was waited for.
const ALL_RESENT: &str = "every neighbor waited for has sent End-of-RIB";
const NOBODY_WAITED_FOR: &str = "no neighbor to wait for";

/// The deferral under way.
#[derive(Debug)]
pub(super) struct Deferral {
    /// The families whose selection still waits for End-of-RIBs.
    pub pending: Vec<Family>,
    /// A drain let the pending families' output go.
    pub output_released: bool,
    /// End-of-RIB received meanwhile, per neighbor address (an address
    /// outlives the neighbor's sessions and its reconfiguration).
    pub eor: HashMap<IpAddr, HashSet<Family>>,
}

impl Deferral {
    /// Its timer is `Daemon::restart_until`, which outlasts it.
    pub(super) fn new() -> Deferral {
        Deferral {
            pending: Family::ALL.to_vec(),
            output_released: false,
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
    /// Logs the start and sets the gauges; at start, restarting or not.
    pub(super) fn deferral_started(&self) {
        if self.deferral.is_some()
            && let Some(until) = self.restart_until
        {
            let seconds = until.saturating_duration_since(Instant::now()).as_secs();
            info!(
                seconds,
                "restarted with our routes of the previous run in the kernel: route selection deferred, nothing sent to peers until every graceful-restart neighbor has sent End-of-RIB or the selection deferral time is over (RFC 4724 4.1)"
            );
        }
        self.publish_deferral();
    }

    /// Our OPENs carry the Restart State bit: route selection after our
    /// restart is not done yet.
    pub(super) fn restarting(&self) -> bool {
        self.deferral.is_some()
    }

    /// Whether what goes out in `family` is held back.
    pub(super) fn deferred(&self, family: Family) -> bool {
        self.deferral
            .as_ref()
            .is_some_and(|d| !d.output_released && d.pending.contains(&family))
    }

    /// The addresses of the neighbors `family` still waits for.
    pub(super) fn waiting_for(&self, d: &Deferral, family: Family) -> Vec<IpAddr> {
        let mut w: Vec<IpAddr> = (self.peers.values())
            .filter(|p| {
                let a = p.neighbor.address;
                waits_for(&p.neighbor, p.up.as_ref().map(|u| &u.negotiated), family)
                    && !d.eor.get(&a).is_some_and(|e| e.contains(&family))
            })
            .map(|p| p.neighbor.address)
            .collect();
        w.sort();
        w
    }

    /// A neighbor sent End-of-RIB for `family`.
    pub(super) fn deferral_eor(&mut self, id: PeerId, family: Family) {
        let Some(address) = self.peers.get(&id).map(|p| p.neighbor.address) else {
            return;
        };
        if let Some(d) = self.deferral.as_mut() {
            d.eor.entry(address).or_default().insert(family);
            self.check_deferral();
        }
        self.check_kernel_stale();
    }

    /// The routes of the neighbor at `address` left the RIB, in
    /// `families` (None: all): its End-of-RIB for them counts no more, and
    /// selection waits for it again. Checks nothing: the caller does once
    /// its change is complete (a reconfigured neighbor is removed, then
    /// added).
    pub(super) fn deferral_forget(&mut self, address: IpAddr, families: Option<&[Family]>) {
        let Some(d) = self.deferral.as_mut() else {
            return;
        };
        let Some(e) = d.eor.get_mut(&address) else {
            return;
        };
        match families {
            None => e.clear(),
            Some(fs) => e.retain(|f| !fs.contains(f)),
        }
        if e.is_empty() {
            d.eor.remove(&address);
        }
    }

    /// Completes the selection of the families that wait for nobody any
    /// more.
    pub(super) fn check_deferral(&mut self) {
        let Some(d) = self.deferral.as_ref() else {
            return;
        };
        let done: Vec<Family> = (d.pending.iter().copied())
            .filter(|f| self.waiting_for(d, *f).is_empty())
            .collect();
        if done.is_empty() {
            return;
        }
        // After a drain the routes went out already.
        let sending = if d.output_released {
            ""
        } else {
            "; sending our routes"
        };
        // Per family: nobody to wait for at all, nothing to defer; or
        // every End-of-RIB waited for has come.
        let reasons: Vec<(Family, &str)> = (done.iter().copied())
            .map(|f| {
                let waited = (self.peers.values())
                    .any(|p| waits_for(&p.neighbor, p.up.as_ref().map(|u| &u.negotiated), f));
                let reason = if waited {
                    ALL_RESENT
                } else {
                    NOBODY_WAITED_FOR
                };
                (f, reason)
            })
            .collect();
        for (f, reason) in &reasons {
            info!(family = %f, "route selection deferral over: {reason}{sending} (RFC 4724 4.1)");
        }
        // The End-of-RIBs, if any family waited for one.
        let why = if reasons.iter().any(|(_, r)| *r == ALL_RESENT) {
            ALL_RESENT
        } else {
            NOBODY_WAITED_FOR
        };
        if let Some(d) = self.deferral.as_mut() {
            d.pending.retain(|f| !done.contains(f));
        }
        for f in done {
            self.wake_writers(Some(f));
        }
        self.end_if_selected(why);
    }

    /// The Selection_Deferral_Timer: selection is done for every family.
    pub(super) fn deferral_timer(&mut self, now: Instant) {
        if self.restart_until.is_none_or(|t| t > now) {
            return;
        }
        let Some(d) = self.deferral.as_ref() else {
            return;
        };
        let sending = if d.output_released {
            "selection done"
        } else {
            "sending our routes"
        };
        for f in &d.pending {
            let waiting = self.waiting_for(d, *f);
            info!(family = %f, ?waiting, "route selection deferral over: selection deferral time over; {sending} without these neighbors' End-of-RIB (RFC 4724 4.1)");
        }
        if let Some(d) = self.deferral.as_mut() {
            d.pending.clear();
        }
        self.wake_writers(None);
        self.end_if_selected("selection deferral time over");
    }

    /// The same time for the kernel's leftovers, after `deferral_timer`.
    pub(super) fn kernel_stale_timer(&mut self, now: Instant) {
        if self.restart_until.is_some_and(|t| t <= now) {
            self.flush_kernel_stale("selection deferral time over");
        }
    }

    /// A drain: the held output goes now, selection goes on (`drain.rs`).
    pub(super) fn release_for_drain(&mut self) {
        let Some(d) = self.deferral.as_mut().filter(|d| !d.output_released) else {
            return;
        };
        d.output_released = true;
        info!(
            "route selection deferral over: draining, so the peers get the GRACEFUL_SHUTDOWN routes now; selection still waits for End-of-RIBs and the kernel keeps our routes of the previous run"
        );
        self.wake_writers(None);
        self.publish_deferral();
    }

    /// Once no family waits any more: route selection is done, and later
    /// sessions claim no restart (RFC 4724 3).
    fn end_if_selected(&mut self, why: &str) {
        if self.deferral.as_ref().is_some_and(|d| d.pending.is_empty()) {
            self.deferral = None;
            info!(
                reason = why,
                "route selection after our restart done: later OPENs clear the Restart State bit"
            );
            // Every peer task reads the flag when it sends an OPEN.
            self.restart_flag.end();
        }
        self.publish_deferral();
    }

    /// Removes the kernel routes of the previous run not learned again
    /// once every configured neighbor is up and has sent End-of-RIB for
    /// every family of its current session (at least one neighbor: a
    /// node without any waits for the timer, as its neighbors may come
    /// with the next configuration). Called after `check_deferral`: each
    /// End-of-RIB of a current session counts for the deferral too, so
    /// selection is done by then, and the deferral, whose timer is
    /// `restart_until`, never outlives it.
    pub(super) fn check_kernel_stale(&mut self) {
        if self.restart_until.is_none() || self.peers.is_empty() {
            return;
        }
        let resent = self.peers.values().all(|p| {
            (p.up.as_ref()).is_some_and(|u| all_resent(&u.negotiated.families, &u.eor_received))
        });
        if resent {
            self.flush_kernel_stale("every neighbor has sent End-of-RIB");
        }
    }

    /// The kernel routes of the previous run not learned again go: our
    /// restart is over.
    fn flush_kernel_stale(&mut self, why: &str) {
        if self.restart_until.take().is_none() {
            return;
        }
        debug_assert!(
            self.deferral.is_none(),
            "the kernel routes of the previous run went before route selection was done"
        );
        info!(
            reason = why,
            "restart over: removing kernel routes of the previous run not learned again"
        );
        if let Some(k) = &self.kernel {
            k.queue_flush_stale();
        }
        self.publish_deferral();
    }

    /// Wakes the writers of the peers with `family` (None: all).
    fn wake_writers(&self, family: Option<Family>) {
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
        let d = Deferral::new();
        assert_eq!(d.pending, Family::ALL.to_vec());
        assert!(!d.output_released);
        assert!(d.eor.is_empty());
    }
}
