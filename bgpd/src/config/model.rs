//! The checked configuration, with every default filled in.
use crate::filter::PeerFilters;
use crate::model::{Family, NextHopMode};
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub router_id: Ipv4Addr,
    pub asn: u32,
    /// RFC 4456 cluster id; the router id when not set.
    pub cluster_id: Ipv4Addr,
    /// Where to accept sessions. Empty: accept nothing (every neighbor
    /// is then dialled by us).
    pub listen: Vec<SocketAddr>,
    pub kernel_install: bool,
    /// Prefixes inside these are never installed in the kernel (another
    /// program routes them: felix, for pools with encapsulation).
    pub kernel_exclude: Vec<IpNet>,
    pub graceful_restart: GracefulRestart,
    /// How long to wait before dialling a neighbor again.
    pub connect_retry: Duration,
    pub neighbors: Vec<Neighbor>,
    pub announce: Vec<Announce>,
    /// The log filter the configuration asks for (the datastore's
    /// `logSeverityScreen`); None: the daemon's default.
    pub log_level: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GracefulRestart {
    /// Restart time we advertise (RFC 4724 4.2): how long peers should keep
    /// our routes while we restart.
    pub restart_time: u16,
    /// As a helper: how long a restarted peer's stale routes stay after
    /// its session is back, waiting for its End-of-RIB.
    pub stale_routes_time: Duration,
    /// The Selection_Deferral_Timer of RFC 4724 4.1: how long after a
    /// restart we hold our routes and End-of-RIB back at the longest while
    /// waiting for the peers' End-of-RIB, and keep the kernel routes of
    /// the previous run not learned again. Shorter than `stale_routes_time`,
    /// so that a helper that keeps our routes as long from its session's
    /// start has them again before it gives up on them.
    pub selection_deferral: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Neighbor {
    pub address: IpAddr,
    pub port: u16,
    pub asn: u32,
    pub description: Option<String>,
    pub passive: bool,
    pub password: Option<String>,
    /// RFC 5082: send with TTL 255 and accept only TTL 255 (one hop).
    pub ttl_security: bool,
    /// eBGP TTL (hops); 1 for directly connected peers.
    pub multihop: u8,
    pub route_reflector_client: bool,
    pub hold_time: u16,
    pub graceful_restart: bool,
    /// The longest time the neighbor's routes are kept while it restarts
    /// (seconds); None: the time it announces (RFC 4724).
    pub max_restart_time: Option<u16>,
    /// The restart time announced to this neighbor (RFC 4724: how long it
    /// keeps our routes while we restart), seconds; None: the speaker's
    /// `graceful_restart.restart_time`.
    pub restart_time: Option<u16>,
    pub max_prefix: Option<u32>,
    pub families: Vec<Family>,
    /// What we put in NEXT_HOP of the routes we send it.
    pub next_hop: NextHopMode,
    /// Import and export rules; changed without a session reset.
    pub filters: Arc<PeerFilters>,
    /// Send routes to this neighbor (false: receive only).
    pub export: bool,
    /// Source address for our outgoing connection.
    pub local_address: Option<IpAddr>,
    /// BFD (RFC 5880/5881, or multihop RFC 5883 as `bfd::Hops` decides)
    /// for this session; None: off. While set, the session is opened only
    /// with BFD Up and closed when it goes Down, except when the peer took
    /// BFD down administratively (RFC 5882 3.2).
    pub bfd: Option<crate::bfd::SessionConfig>,
}

impl Neighbor {
    /// Settings whose change needs the session to be reset (everything
    /// except the description and the filters).
    pub fn session_settings_equal(&self, other: &Neighbor) -> bool {
        let mut a = self.clone();
        a.description = other.description.clone();
        a.filters = other.filters.clone();
        // New BFD timers go to the running BFD session (a Poll sequence);
        // only turning BFD on or off restarts the BGP session.
        if a.bfd.is_some() && other.bfd.is_some() {
            a.bfd = other.bfd;
        }
        a == *other
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Announce {
    pub prefix: IpNet,
    pub communities: Vec<u32>,
    pub large_communities: Vec<[u32; 3]>,
    pub next_hop: Option<IpAddr>,
}
