//! The session's states (RFC 4271 8.2.2), what an OPEN from the peer means
//! for us (negotiation and its errors), and which connection survives a
//! collision (6.8). The transitions between the states are in `machine`.
use crate::model::Family;
use crate::wire::{Capabilities, GracefulRestartCap, Notification, Open, OpenExpect};
use std::fmt;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// RFC 4271 8.2.2 session states, numbered as in the BGP MIB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    Idle = 1,
    Connect = 2,
    Active = 3,
    OpenSent = 4,
    OpenConfirm = 5,
    Established = 6,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Idle => "Idle",
            State::Connect => "Connect",
            State::Active => "Active",
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
        })
    }
}

impl From<State> for tartan_api::bgp::SessionState {
    fn from(s: State) -> Self {
        use tartan_api::bgp::SessionState as S;
        match s {
            State::Idle => S::Idle,
            State::Connect => S::Connect,
            State::Active => S::Active,
            State::OpenSent => S::OpenSent,
            State::OpenConfirm => S::OpenConfirm,
            State::Established => S::Established,
        }
    }
}

/// What we say about ourselves in OPEN, and what we expect of the peer.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalParams {
    pub asn: u32,
    pub router_id: Ipv4Addr,
    pub hold_time: u16,
    pub families: Vec<Family>,
    pub peer_asn: u32,
    /// Our restart time when graceful restart is on for this neighbor.
    pub graceful_restart: Option<u16>,
    /// RFC 4724 R bit: we restarted and kept forwarding state. Shared
    /// with the instance, which ends it for every session at once.
    pub restarting: RestartFlag,
    /// RFC 4724 F bit for each family: our forwarding state was kept
    /// since the session before this one (or the run before this one).
    pub forwarding_preserved: bool,
    /// Our routes go to the kernel and stay there while we run: once a
    /// session has been Established, the next one's F bit is set.
    pub installs_routes: bool,
}

impl LocalParams {
    /// What the peer's OPEN must say about its AS and identifier.
    pub fn expect(&self) -> OpenExpect {
        OpenExpect {
            peer_as: self.peer_asn,
            local_as: self.asn,
            local_id: self.router_id,
        }
    }

    pub fn open(&self) -> Open {
        let graceful_restart = self
            .graceful_restart
            .map(|restart_time| GracefulRestartCap {
                restarting: self.restarting.get(),
                notification: false,
                restart_time,
                families: self
                    .families
                    .iter()
                    .map(|f| (*f, self.forwarding_preserved))
                    .collect(),
            });
        Open {
            version: 4,
            asn: self.asn,
            my_as_field: u16::try_from(self.asn).unwrap_or(23456),
            hold_time: self.hold_time,
            router_id: self.router_id,
            caps: Capabilities {
                families: self.families.clone(),
                four_octet_as: Some(self.asn),
                route_refresh: true,
                graceful_restart,
                ..Default::default()
            },
        }
    }
}

/// The Restart State bit (RFC 4724 3) of our OPENs: set from a restart
/// with our forwarding state kept until route selection is done. The
/// instance and every peer task share it, and every OPEN reads it when it
/// is sent, so the end of the restart is never lost to a full command
/// queue.
#[derive(Debug, Clone, Default)]
pub struct RestartFlag(Arc<AtomicBool>);

impl RestartFlag {
    pub fn new(restarting: bool) -> RestartFlag {
        RestartFlag(Arc::new(AtomicBool::new(restarting)))
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Our restart is over: later OPENs, of every holder, clear the bit.
    pub fn end(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// By value: two parameter sets are equal when their OPENs would be.
impl PartialEq for RestartFlag {
    fn eq(&self, other: &RestartFlag) -> bool {
        self.get() == other.get()
    }
}

/// The outcome of an accepted OPEN exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiated {
    pub peer_router_id: Ipv4Addr,
    pub peer_asn: u32,
    /// Zero: no keepalives and no hold timer (RFC 4271 4.2).
    pub hold_time: Duration,
    pub keepalive: Duration,
    pub families: Vec<Family>,
    pub four_octet_as: bool,
    pub route_refresh: bool,
    /// The peer's graceful restart capability, when both sides have it.
    pub peer_graceful_restart: Option<GracefulRestartCap>,
}

/// Checks the peer's OPEN against ours (RFC 4271 6.2) and works out the
/// session's parameters. The error is the NOTIFICATION to send. (The
/// handshake's decoder has made these checks already, in the RFC's order
/// among the others; here they hold for any `Open`.)
pub fn negotiate(local: &LocalParams, open: &Open) -> Result<Negotiated, Notification> {
    let expect = local.expect();
    expect.check_as(open.asn, open.my_as_field)?;
    expect.check_id(open.asn, open.router_id)?;
    let hold = open.hold_time.min(local.hold_time);
    let hold_time = Duration::from_secs(u64::from(hold));
    let families: Vec<Family> = local
        .families
        .iter()
        .copied()
        .filter(|f| {
            // RFC 4760 8: a speaker without the MP capability is taken to
            // support IPv4 unicast only.
            if open.caps.families.is_empty() && open.caps.unknown_families.is_empty() {
                *f == Family::Ipv4Unicast
            } else {
                open.caps.families.contains(f)
            }
        })
        .collect();
    Ok(Negotiated {
        peer_router_id: open.router_id,
        peer_asn: open.asn,
        hold_time,
        keepalive: hold_time / 3,
        families,
        four_octet_as: open.caps.four_octet_as.is_some(),
        route_refresh: open.caps.route_refresh || open.caps.enhanced_route_refresh,
        peer_graceful_restart: if local.graceful_restart.is_some() {
            open.caps.graceful_restart.clone()
        } else {
            None
        },
    })
}

/// RFC 4271 6.8: on a collision the connection opened by the speaker with
/// the higher BGP identifier survives; with equal identifiers (possible
/// between ASes, RFC 6286 2.3) the one opened by the speaker with the
/// larger AS number. True: keep the connection the peer opened to us (and
/// close ours).
pub fn keep_incoming(
    local_id: Ipv4Addr,
    local_asn: u32,
    remote_id: Ipv4Addr,
    remote_asn: u32,
) -> bool {
    (u32::from(local_id), local_asn) < (u32::from(remote_id), remote_asn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> LocalParams {
        LocalParams {
            asn: 65000,
            router_id: "10.0.0.1".parse().unwrap(),
            hold_time: 90,
            families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
            peer_asn: 65001,
            graceful_restart: Some(120),
            restarting: RestartFlag::new(false),
            forwarding_preserved: true,
            installs_routes: true,
        }
    }

    fn peer_open() -> Open {
        let mut p = local();
        p.asn = 65001;
        p.router_id = "10.0.0.2".parse().unwrap();
        p.hold_time = 30;
        p.families = vec![Family::Ipv4Unicast];
        p.open()
    }

    #[test]
    fn negotiates_lower_hold_time_and_common_families() {
        let n = negotiate(&local(), &peer_open()).unwrap();
        assert_eq!(n.hold_time, Duration::from_secs(30));
        assert_eq!(n.keepalive, Duration::from_secs(10));
        assert_eq!(n.families, vec![Family::Ipv4Unicast]);
        assert!(n.four_octet_as && n.route_refresh);
        assert_eq!(n.peer_graceful_restart.unwrap().restart_time, 120);
    }

    #[test]
    fn zero_hold_time_means_no_keepalives() {
        let mut o = peer_open();
        o.hold_time = 0;
        let n = negotiate(&local(), &o).unwrap();
        assert_eq!(n.hold_time, Duration::ZERO);
        assert_eq!(n.keepalive, Duration::ZERO);
    }

    #[test]
    fn wrong_peer_as_is_bad_peer_as() {
        let mut o = peer_open();
        o.asn = 65009;
        o.my_as_field = 65009;
        let e = negotiate(&local(), &o).unwrap_err();
        assert_eq!((e.code, e.subcode), (2, 2));
    }

    #[test]
    fn same_router_id_is_refused_on_ibgp_only() {
        let mut l = local();
        l.peer_asn = 65000;
        let mut o = peer_open();
        o.asn = 65000;
        o.router_id = l.router_id;
        assert_eq!(negotiate(&l, &o).unwrap_err().subcode, 3);
        // eBGP with the same identifier is allowed (RFC 6286).
        let mut o = peer_open();
        o.router_id = l.router_id;
        assert!(negotiate(&local(), &o).is_ok());
    }

    #[test]
    fn peer_without_mp_capability_gets_ipv4_only() {
        let mut o = peer_open();
        o.caps.families.clear();
        let n = negotiate(&local(), &o).unwrap();
        assert_eq!(n.families, vec![Family::Ipv4Unicast]);
    }

    #[test]
    fn no_graceful_restart_unless_we_have_it_too() {
        let mut l = local();
        l.graceful_restart = None;
        assert!(
            negotiate(&l, &peer_open())
                .unwrap()
                .peer_graceful_restart
                .is_none()
        );
    }

    #[test]
    fn collision_keeps_the_higher_identifiers_connection() {
        let low: Ipv4Addr = "1.1.1.1".parse().unwrap();
        let high: Ipv4Addr = "2.2.2.2".parse().unwrap();
        assert!(keep_incoming(low, 65000, high, 65001));
        assert!(!keep_incoming(high, 65001, low, 65000));
        // The identifier decides before the AS number.
        assert!(keep_incoming(low, 65001, high, 65000));
        // RFC 6286 2.3: equal identifiers, so the larger AS's connection.
        assert!(keep_incoming(low, 65000, low, 65001));
        assert!(!keep_incoming(low, 65001, low, 65000));
    }
}
