//! Wire types of tartan-bgpd's control API (HTTP + JSON on a Unix socket),
//! shared by the server in `tartan-bgpd` and the client in `tartanctl`.
//!
//! JSON field names are camelCase. Optional fields are always present
//! (`null` when unknown) so that scripts can rely on the shape.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

/// Where tartan-bgpd listens unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/tartan/bgpd.sock";
/// `GET` → [`SpeakerStatus`].
pub const PATH_STATUS: &str = "/v1/status";
/// `GET` → `Vec<PeerStatus>`.
pub const PATH_PEERS: &str = "/v1/peers";
/// `GET ?family=ipv4-unicast&prefix=10.0.0.0/24` → `Vec<RouteEntry>`.
pub const PATH_ROUTES: &str = "/v1/routes";
/// `POST` a [`DrainRequest`] → [`DrainStatus`]: RFC 8326 graceful
/// shutdown of every session; `GET` → [`DrainStatus`].
pub const PATH_DRAIN: &str = "/v1/drain";

/// Drain the node: re-advertise every route with GRACEFUL_SHUTDOWN now,
/// close every session (Cease, Administrative Shutdown) after the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DrainRequest {
    /// Seconds between the re-advertisement and the close.
    pub wait_seconds: u64,
}

/// Where a drain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    /// Routes go out with GRACEFUL_SHUTDOWN.
    pub draining: bool,
    /// Seconds until the sessions close; `None` when not draining or
    /// already closed.
    pub close_in_seconds: Option<u64>,
    /// The sessions have been closed and stay down until bgpd restarts.
    pub closed: bool,
}

/// Body of every non-2xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a human.
    pub error: String,
}

/// RFC 4271 section 8.2.2 session states. Serialized by name
/// (`"Established"`); [`SessionState::number`] gives 1..=6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum SessionState {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

impl SessionState {
    /// The numbering of the BGP4-MIB `bgpPeerState` (RFC 4273): Idle = 1 …
    /// Established = 6. Used as the value of the peer-state metric.
    pub fn number(self) -> u8 {
        match self {
            SessionState::Idle => 1,
            SessionState::Connect => 2,
            SessionState::Active => 3,
            SessionState::OpenSent => 4,
            SessionState::OpenConfirm => 5,
            SessionState::Established => 6,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SessionState::Idle => "Idle",
            SessionState::Connect => "Connect",
            SessionState::Active => "Active",
            SessionState::OpenSent => "OpenSent",
            SessionState::OpenConfirm => "OpenConfirm",
            SessionState::Established => "Established",
        }
    }
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Internal or external peering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PeerKind {
    Ibgp,
    Ebgp,
}

impl fmt::Display for PeerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PeerKind::Ibgp => "ibgp",
            PeerKind::Ebgp => "ebgp",
        })
    }
}

/// One configured or dynamic (listen-range) neighbour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    /// The neighbour's address.
    pub address: IpAddr,
    /// Remote TCP port of the current connection; `None` when not connected.
    pub port: Option<u16>,
    /// The neighbour's AS number (4 octets, RFC 6793).
    pub asn: u32,
    /// Our AS number on this session.
    pub local_asn: u32,
    pub kind: PeerKind,
    pub state: SessionState,
    /// Seconds since the session reached Established; `None` otherwise.
    pub uptime_seconds: Option<u64>,
    /// The neighbour's BGP identifier, once its OPEN was received.
    pub router_id: Option<Ipv4Addr>,
    /// Negotiated hold time in seconds, once OPENs were exchanged.
    pub hold_time: Option<u16>,
    /// Negotiated address families, e.g. `"ipv4-unicast"`.
    pub families: Vec<String>,
    pub prefixes: PrefixCounts,
    /// The last error on this session (a NOTIFICATION sent or received, a
    /// connection failure), for a human.
    pub last_error: Option<String>,
    pub messages: MessageCounts,
    /// Graceful restart (RFC 4724), when both sides negotiated it.
    pub graceful_restart: Option<GracefulRestartStatus>,
    /// We reflect routes to this peer (RFC 4456).
    pub rr_client: bool,
    /// Free text from the configuration.
    pub description: Option<String>,
    /// The BFD session (RFC 5880), when BFD is configured for this peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<BfdPeerStatus>,
}

/// The BFD session of a peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BfdPeerStatus {
    /// `admindown`, `down`, `init` or `up`.
    pub state: String,
    /// The last diagnostic (RFC 5880 4.1), e.g. `ControlDetectionTimeExpired`.
    pub diagnostic: String,
    /// Negotiated transmit interval in milliseconds, once known.
    pub tx_interval_ms: Option<u64>,
    /// Detection time in force in milliseconds, once the peer was heard.
    pub detection_time_ms: Option<u64>,
    /// State changes since the session was made.
    pub transitions: u64,
    /// A multihop session (RFC 5883) rather than single hop (RFC 5881).
    #[serde(default)]
    pub multihop: bool,
    /// The diagnostic the peer last sent (why its side went down, e.g.
    /// `NeighborSignaledSessionDown`); empty from an older bgpd.
    #[serde(default)]
    pub remote_diagnostic: String,
}

/// Prefix counts of one peer, over all its families.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixCounts {
    /// Prefixes in the peer's Adj-RIB-In, before import policy.
    pub received: u64,
    /// Received prefixes that import policy accepted.
    pub accepted: u64,
    /// Prefixes in the Adj-RIB-Out towards the peer.
    pub advertised: u64,
}

/// Messages of each type on one session, counted since the daemon started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    pub sent: MessageTypeCounts,
    pub received: MessageTypeCounts,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageTypeCounts {
    pub open: u64,
    pub update: u64,
    pub notification: u64,
    pub keepalive: u64,
    pub route_refresh: u64,
}

/// Graceful restart state of one session (RFC 4724).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GracefulRestartStatus {
    /// The restart time the peer advertised, in seconds.
    pub restart_time: u16,
    /// The peer said it restarted (the R bit of its capability).
    pub peer_restarting: bool,
    /// Families for which the peer preserved its forwarding state.
    pub preserved_families: Vec<String>,
    /// Routes from this peer held as stale while it restarts.
    pub stale_routes: u64,
}

/// All paths the Loc-RIB holds for one prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteEntry {
    pub prefix: IpNet,
    /// `"ipv4-unicast"` or `"ipv6-unicast"`.
    pub family: String,
    /// Best path first.
    pub paths: Vec<PathView>,
}

/// One path to a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathView {
    /// Chosen by the decision process.
    pub best: bool,
    /// Installed beside the best path (ECMP).
    pub multipath: bool,
    /// Kept from a restarting peer (RFC 4724) until it refreshes it.
    pub stale: bool,
    /// The peer it was learned from; `None` for a locally originated path.
    pub peer: Option<IpAddr>,
    pub next_hop: Option<IpAddr>,
    /// AS_PATH as text: `"65001 65002 {65003 65004}"`, empty when local.
    pub as_path: String,
    /// `"igp"`, `"egp"` or `"incomplete"`.
    pub origin: String,
    pub med: Option<u32>,
    pub local_pref: Option<u32>,
    /// RFC 1997 communities as `"65000:100"` or a well-known name
    /// (`"no-export"`).
    pub communities: Vec<String>,
    /// RFC 8092 large communities as `"1:2:3"`.
    pub large_communities: Vec<String>,
    /// RFC 4456 ORIGINATOR_ID.
    pub originator_id: Option<Ipv4Addr>,
    /// RFC 4456 CLUSTER_LIST, nearest cluster first.
    pub cluster_list: Vec<Ipv4Addr>,
}

/// The speaker as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeakerStatus {
    pub router_id: Ipv4Addr,
    pub asn: u32,
    /// Configured and dynamic peers.
    pub peers: usize,
    /// Peers in Established.
    pub established_peers: usize,
    /// Loc-RIB sizes keyed by family name (`"ipv4-unicast"`).
    pub routes: BTreeMap<String, RouteCounts>,
    pub kernel: KernelCounts,
    /// When the daemon started, in seconds since the Unix epoch.
    pub started_at: u64,
    pub uptime_seconds: u64,
    /// The daemon's version.
    pub version: String,
    /// Our own graceful restart (RFC 4724 4.1), from a start that found
    /// our routes of the previous run in the kernel until route selection
    /// is done and those routes not learned again are removed; `None`
    /// otherwise (absent from an older bgpd: `None`).
    #[serde(default)]
    pub restart: Option<RestartStatus>,
}

/// Our own restart (RFC 4724 4.1): until route selection is done our
/// OPENs carry the Restart State bit; the kernel routes of the previous
/// run stay until every neighbor has sent End-of-RIB on its session, or
/// the selection deferral time is over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartStatus {
    /// Seconds until the Selection_Deferral_Timer ends the wait anyway.
    pub seconds_left: u64,
    /// The kernel routes of the previous run not learned again are still
    /// there (a document without the field reads as false).
    #[serde(default)]
    pub kernel_routes_kept: bool,
    /// Per family name (`"ipv4-unicast"`).
    pub families: BTreeMap<String, FamilyDeferral>,
}

/// One family's route selection after our restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FamilyDeferral {
    /// Nothing of this family has been sent to any neighbor yet, End-of-RIB
    /// included. False once selection is done, or after a drain.
    pub deferred: bool,
    /// The neighbors whose End-of-RIB selection still waits for; empty
    /// once done.
    pub waiting_for: Vec<IpAddr>,
}

/// Size of one family's Loc-RIB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteCounts {
    pub prefixes: u64,
    pub paths: u64,
}

/// Kernel route sync counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KernelCounts {
    /// Routes currently installed by tartan-bgpd.
    pub installed: u64,
    /// Routes removed since start.
    pub removed: u64,
    /// Install or remove operations that failed since start.
    pub failed: u64,
}

/// Well-known communities and their names (RFC 1997, 3765, 7999, 8326,
/// and the IANA registry).
const WELL_KNOWN_COMMUNITIES: [(u32, &str); 9] = [
    (0xFFFF_0000, "graceful-shutdown"),
    (0xFFFF_0001, "accept-own"),
    (0xFFFF_0006, "llgr-stale"),
    (0xFFFF_0007, "no-llgr"),
    (0xFFFF_029A, "blackhole"),
    (0xFFFF_FF01, "no-export"),
    (0xFFFF_FF02, "no-advertise"),
    (0xFFFF_FF03, "no-export-subconfed"),
    (0xFFFF_FF04, "no-peer"),
];

/// Text form of an RFC 1997 community: a well-known name or `"asn:value"`.
/// The value of a well-known community name (`no-export`, …), the inverse
/// of what [`format_community`] prints for it.
pub fn well_known_community(name: &str) -> Option<u32> {
    WELL_KNOWN_COMMUNITIES
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(v, _)| *v)
}

pub fn format_community(c: u32) -> String {
    match WELL_KNOWN_COMMUNITIES.iter().find(|(v, _)| *v == c) {
        Some((_, name)) => (*name).to_string(),
        None => format!("{}:{}", c >> 16, c & 0xFFFF),
    }
}

/// Text form of an RFC 8092 large community.
pub fn format_large_community(c: [u32; 3]) -> String {
    format!("{}:{}:{}", c[0], c[1], c[2])
}

#[cfg(test)]
mod tests;
