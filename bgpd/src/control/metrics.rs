//! Prometheus metrics of the speaker. The daemon updates them; scrapes read
//! them through [`super::serve_metrics`]. Every update is an atomic op.
use super::durations::Durations;
use crate::model::Family as AddressFamily;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::IpAddr;
use tartan_api::bgp::{MessageCounts, MessageTypeCounts, PrefixCounts, SessionState};

/// BGP message types (RFC 4271 4.1, RFC 2918).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    Open,
    Update,
    Notification,
    Keepalive,
    RouteRefresh,
}

impl MessageType {
    pub const ALL: [MessageType; 5] = [
        MessageType::Open,
        MessageType::Update,
        MessageType::Notification,
        MessageType::Keepalive,
        MessageType::RouteRefresh,
    ];

    /// From the type octet of the message header.
    pub fn from_code(code: u8) -> Option<MessageType> {
        Self::ALL.get(usize::from(code).checked_sub(1)?).copied()
    }

    /// The `type` label value.
    pub fn label(self) -> &'static str {
        match self {
            MessageType::Open => "open",
            MessageType::Update => "update",
            MessageType::Notification => "notification",
            MessageType::Keepalive => "keepalive",
            MessageType::RouteRefresh => "route_refresh",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Sent,
    Received,
}

impl Direction {
    fn label(self) -> &'static str {
        match self {
            Direction::Sent => "sent",
            Direction::Received => "received",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PeerLabels {
    peer: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MessageLabels {
    peer: String,
    direction: &'static str,
    r#type: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FamilyLabels {
    family: &'static str,
}

/// The metrics of one BFD session, updated by the BFD runtime.
#[derive(Debug, Clone)]
pub struct BfdMetrics {
    pub state: Gauge,
    pub transitions: Counter,
}

/// All of the speaker's metrics and the registry that exposes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    peer_state: Family<PeerLabels, Gauge>,
    prefixes_received: Family<PeerLabels, Gauge>,
    prefixes_accepted: Family<PeerLabels, Gauge>,
    prefixes_advertised: Family<PeerLabels, Gauge>,
    prefixes_filtered: Family<PeerLabels, Gauge>,
    messages: Family<MessageLabels, Counter>,
    treat_as_withdraw: Family<PeerLabels, Counter>,
    kernel_installed: Gauge,
    kernel_removed: Counter,
    kernel_failed: Counter,
    rib_prefixes: Family<FamilyLabels, Gauge>,
    selection_deferred: Family<FamilyLabels, Gauge>,
    restarting: Gauge,
    bfd_state: Family<PeerLabels, Gauge>,
    bfd_transitions: Family<PeerLabels, Counter>,
    bfd_multihop: Family<PeerLabels, Gauge>,
    durations: Durations,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::default(),
            peer_state: Family::default(),
            prefixes_received: Family::default(),
            prefixes_accepted: Family::default(),
            prefixes_advertised: Family::default(),
            prefixes_filtered: Family::default(),
            messages: Family::default(),
            treat_as_withdraw: Family::default(),
            kernel_installed: Gauge::default(),
            kernel_removed: Counter::default(),
            kernel_failed: Counter::default(),
            rib_prefixes: Family::default(),
            selection_deferred: Family::default(),
            restarting: Gauge::default(),
            bfd_state: Family::default(),
            bfd_transitions: Family::default(),
            bfd_multihop: Family::default(),
            durations: Durations::default(),
        };
        m.register()
    }

    // Counters get `_total` appended by the encoder.
    fn register(mut self) -> Metrics {
        let r = &mut self.registry;
        tartan_api::build_info::register(r, "tartan-bgpd");
        r.register(
            "tartan_bgp_peer_state",
            "BGP session state (1 Idle, 2 Connect, 3 Active, 4 OpenSent, 5 OpenConfirm, 6 Established)",
            self.peer_state.clone(),
        );
        r.register(
            "tartan_bgp_peer_prefixes_received",
            "Prefixes received from the peer, before import policy",
            self.prefixes_received.clone(),
        );
        r.register(
            "tartan_bgp_peer_prefixes_accepted",
            "Prefixes from the peer accepted by import policy",
            self.prefixes_accepted.clone(),
        );
        r.register(
            "tartan_bgp_peer_prefixes_advertised",
            "Prefixes advertised to the peer",
            self.prefixes_advertised.clone(),
        );
        r.register(
            "tartan_bgp_peer_prefixes_filtered",
            "Prefixes from the peer rejected by its import filters since the session came up",
            self.prefixes_filtered.clone(),
        );
        r.register(
            "tartan_bgp_messages",
            "BGP messages by peer, direction and type",
            self.messages.clone(),
        );
        r.register(
            "tartan_bgp_updates_treat_as_withdraw",
            "UPDATEs handled as withdrawals after a malformed attribute (RFC 7606)",
            self.treat_as_withdraw.clone(),
        );
        r.register(
            "tartan_bgp_kernel_routes_installed",
            "Routes currently installed in the kernel by tartan-bgpd",
            self.kernel_installed.clone(),
        );
        r.register(
            "tartan_bgp_kernel_routes_removed",
            "Routes removed from the kernel",
            self.kernel_removed.clone(),
        );
        r.register(
            "tartan_bgp_kernel_routes_failed",
            "Kernel route installs or removals that failed",
            self.kernel_failed.clone(),
        );
        r.register(
            "tartan_bgp_rib_prefixes",
            "Prefixes in the Loc-RIB by address family",
            self.rib_prefixes.clone(),
        );
        r.register(
            "tartan_bgp_selection_deferred",
            "1 while route selection after a restart is deferred (RFC 4724 4.1): nothing of the family sent to peers yet",
            self.selection_deferred.clone(),
        );
        r.register(
            "tartan_bgp_restarting",
            "1 while our graceful restart goes on (RFC 4724 4.1): kernel routes of the previous run not learned again are kept",
            self.restarting.clone(),
        );
        r.register(
            "tartan_bfd_session_state",
            "BFD session state (0 AdminDown, 1 Down, 2 Init, 3 Up, as RFC 5880 codes them)",
            self.bfd_state.clone(),
        );
        r.register(
            "tartan_bfd_session_transitions",
            "BFD session state changes",
            self.bfd_transitions.clone(),
        );
        r.register(
            "tartan_bfd_session_multihop",
            "1 for a multihop BFD session (RFC 5883, port 4784), 0 for single hop (RFC 5881)",
            self.bfd_multihop.clone(),
        );
        self.durations.register(r);
        self
    }

    /// The duration histograms, for the parts of the speaker that apply
    /// and sync.
    pub fn durations(&self) -> &Durations {
        &self.durations
    }

    /// The series of the BFD session towards `addr` (created at Down).
    pub fn bfd(&self, addr: IpAddr, multihop: bool) -> BfdMetrics {
        let labels = PeerLabels {
            peer: addr.to_string(),
        };
        let m = BfdMetrics {
            state: self.bfd_state.get_or_create_owned(&labels),
            transitions: self.bfd_transitions.get_or_create_owned(&labels),
        };
        m.state.set(1);
        self.bfd_multihop
            .get_or_create(&labels)
            .set(i64::from(multihop));
        m
    }

    /// The handle a session keeps for its hot path. Creates the peer's
    /// series (state Idle, zero counts) if they do not exist yet.
    pub fn peer(&self, addr: IpAddr) -> PeerMetrics {
        let labels = PeerLabels {
            peer: addr.to_string(),
        };
        let counters = |direction: Direction| {
            MessageType::ALL.map(|t| {
                self.messages.get_or_create_owned(&MessageLabels {
                    peer: labels.peer.clone(),
                    direction: direction.label(),
                    r#type: t.label(),
                })
            })
        };
        let handle = PeerMetrics {
            state: self.peer_state.get_or_create_owned(&labels),
            received: self.prefixes_received.get_or_create_owned(&labels),
            accepted: self.prefixes_accepted.get_or_create_owned(&labels),
            advertised: self.prefixes_advertised.get_or_create_owned(&labels),
            filtered: self.prefixes_filtered.get_or_create_owned(&labels),
            sent_msgs: counters(Direction::Sent),
            received_msgs: counters(Direction::Received),
            treat_as_withdraw: self.treat_as_withdraw.get_or_create_owned(&labels),
        };
        if handle.state.get() == 0 {
            handle.set_state(SessionState::Idle);
        }
        handle
    }

    /// Drops a peer's series (a dynamic peer went away or was unconfigured).
    /// Handles still held keep counting but are no longer exported.
    pub fn remove_peer(&self, addr: IpAddr) {
        let labels = PeerLabels {
            peer: addr.to_string(),
        };
        for family in [
            &self.peer_state,
            &self.prefixes_received,
            &self.prefixes_accepted,
            &self.prefixes_advertised,
            &self.prefixes_filtered,
        ] {
            family.remove(&labels);
        }
        self.treat_as_withdraw.remove(&labels);
        for direction in [Direction::Sent, Direction::Received] {
            for t in MessageType::ALL {
                self.messages.remove(&MessageLabels {
                    peer: labels.peer.clone(),
                    direction: direction.label(),
                    r#type: t.label(),
                });
            }
        }
    }

    /// Slow-path convenience; sessions should use [`PeerMetrics::set_state`].
    pub fn set_peer_state(&self, addr: IpAddr, state: SessionState) {
        self.peer(addr).set_state(state);
    }

    pub fn set_kernel_installed(&self, routes: u64) {
        self.kernel_installed.set(saturating_i64(routes));
    }

    pub fn inc_kernel_removed(&self) {
        self.kernel_removed.inc();
    }

    pub fn inc_kernel_failed(&self) {
        self.kernel_failed.inc();
    }

    pub fn set_rib_prefixes(&self, family: AddressFamily, prefixes: u64) {
        let labels = FamilyLabels {
            family: family.name(),
        };
        self.rib_prefixes
            .get_or_create(&labels)
            .set(saturating_i64(prefixes));
    }

    /// Whether `family`'s output waits for route selection after our
    /// restart (RFC 4724 4.1).
    pub fn set_selection_deferred(&self, family: AddressFamily, deferred: bool) {
        let labels = FamilyLabels {
            family: family.name(),
        };
        (self.selection_deferred.get_or_create(&labels)).set(i64::from(deferred));
    }

    /// Whether our graceful restart goes on: kernel routes of the previous
    /// run kept.
    pub fn set_restarting(&self, restarting: bool) {
        self.restarting.set(i64::from(restarting));
    }

    /// The text exposition (OpenMetrics) of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// One peer's metrics, resolved once so that the per-message cost is one
/// atomic increment. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PeerMetrics {
    state: Gauge,
    received: Gauge,
    accepted: Gauge,
    advertised: Gauge,
    filtered: Gauge,
    sent_msgs: [Counter; 5],
    received_msgs: [Counter; 5],
    treat_as_withdraw: Counter,
}

impl PeerMetrics {
    pub fn set_state(&self, state: SessionState) {
        self.state.set(i64::from(state.number()));
    }

    pub fn inc_message(&self, direction: Direction, t: MessageType) {
        let counters = match direction {
            Direction::Sent => &self.sent_msgs,
            Direction::Received => &self.received_msgs,
        };
        counters[t as usize].inc();
    }

    pub fn inc_sent(&self, t: MessageType) {
        self.inc_message(Direction::Sent, t);
    }

    pub fn inc_received(&self, t: MessageType) {
        self.inc_message(Direction::Received, t);
    }

    pub fn inc_treat_as_withdraw(&self) {
        self.treat_as_withdraw.inc();
    }

    pub fn set_prefixes(&self, counts: PrefixCounts) {
        self.received.set(saturating_i64(counts.received));
        self.accepted.set(saturating_i64(counts.accepted));
        self.advertised.set(saturating_i64(counts.advertised));
    }

    /// Prefixes the import filters rejected since the session came up.
    pub fn set_filtered(&self, prefixes: u64) {
        self.filtered.set(saturating_i64(prefixes));
    }

    /// The message counters as the control API shows them, so the daemon
    /// need not count twice.
    pub fn message_counts(&self) -> MessageCounts {
        let read = |c: &[Counter; 5]| MessageTypeCounts {
            open: c[0].get(),
            update: c[1].get(),
            notification: c[2].get(),
            keepalive: c[3].get(),
            route_refresh: c[4].get(),
        };
        MessageCounts {
            sent: read(&self.sent_msgs),
            received: read(&self.received_msgs),
        }
    }
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
