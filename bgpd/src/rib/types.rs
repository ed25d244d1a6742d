//! The RIB's public vocabulary: configuration in, changes and batches out.

use crate::filter::PeerFilters;
use crate::model::{Family, NextHop, NextHopMode, PathAttrs};
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// A peer as the caller names it. Stable for a configured neighbour across
/// sessions (graceful restart keys on it).
pub type PeerId = u32;

/// The pseudo-peer that owns locally originated routes.
pub const LOCAL: PeerId = u32::MAX;

/// An ECMP next-hop set, sorted and without duplicates. Shared: the common
/// single-path case costs no allocation per prefix.
pub type NextHops = Arc<[NextHop]>;

#[derive(Clone, Debug)]
pub struct LocalConfig {
    pub asn: u32,
    pub router_id: Ipv4Addr,
    /// RFC 4456 CLUSTER_ID: the router id unless configured.
    pub cluster_id: Ipv4Addr,
}

#[derive(Clone, Debug)]
pub struct PeerConfig {
    pub id: PeerId,
    pub asn: u32,
    /// The BGP identifier from its OPEN.
    pub router_id: Ipv4Addr,
    pub address: IpAddr,
    pub ibgp: bool,
    pub rr_client: bool,
    pub next_hop: NextHopMode,
    /// The connected network of our address on this session, when the
    /// peer is on it too (one hop away): a next hop inside it can be
    /// passed on as it is (RFC 4271 5.1.3).
    pub shared_subnet: Option<IpNet>,
    /// Our addresses on this session: the next hop we send (eBGP, or
    /// next-hop-self, or our own routes).
    pub local_v4: Option<Ipv4Addr>,
    pub local_v6: Option<Ipv6Addr>,
    pub local_v6_link_local: Option<Ipv6Addr>,
    /// Negotiated families.
    pub families: Vec<Family>,
    pub max_prefix: Option<u32>,
    /// Import and export rules (BGPFilter); empty: everything passes.
    pub filters: Arc<PeerFilters>,
}

/// Why an UPDATE was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// Accepting would take the peer over its limit; nothing was applied.
    /// The session sends a Cease, subcode 1 (RFC 4486).
    #[error("maximum prefix limit {limit} exceeded")]
    MaxPrefix { limit: u32 },
    #[error("unknown peer {0}")]
    UnknownPeer(PeerId),
}

/// What an operation changed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Changes {
    /// New ECMP next-hop set of the best route, or None to remove it. Only
    /// routes learned from peers: our own originated routes never appear.
    pub kernel: Vec<(IpNet, Option<NextHops>)>,
    /// Peers whose output queue got new work: wake their writers.
    pub peers_with_output: Vec<PeerId>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.kernel.is_empty() && self.peers_with_output.is_empty()
    }
}

/// One UPDATE's worth of output for a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum OutBatch {
    Announce {
        family: Family,
        /// Already rewritten for that peer (AS_PATH, NEXT_HOP, ...).
        attrs: Arc<PathAttrs>,
        prefixes: Vec<IpNet>,
    },
    Withdraw {
        family: Family,
        prefixes: Vec<IpNet>,
    },
}

/// Per-peer counters for the control API.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PeerCounts {
    /// Prefixes announced by the peer since its session came up.
    pub received: u64,
    /// Paths from the peer held now in the RIB.
    pub accepted: u64,
    /// Prefixes the peer holds from us now (announced and not withdrawn).
    pub advertised: u64,
    /// Prefixes dropped on import as loops (own AS, originator, cluster).
    pub looped: u64,
    /// Prefixes rejected by the import rules.
    pub filtered: u64,
}

/// The chosen route for a prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct BestView {
    pub prefix: IpNet,
    pub peer: PeerId,
    pub attrs: Arc<PathAttrs>,
    pub stale: bool,
    /// The next hops of the multipath set (empty for our own routes).
    pub next_hops: Vec<NextHop>,
}

/// One path of a prefix, as `tartanctl bgp routes` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PathView {
    pub peer: PeerId,
    pub attrs: Arc<PathAttrs>,
    pub best: bool,
    /// Member of the multipath (ECMP) set.
    pub multipath: bool,
    pub stale: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RouteView {
    pub prefix: IpNet,
    pub paths: Vec<PathView>,
}
