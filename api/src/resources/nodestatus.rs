//! BGPNodeStatus: one node's BGP sessions as its bgpd last reported them,
//! readable from anywhere (`tartanctl node status`). Written by bgpd only.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, dns_subdomain};
use super::schema_rules;
use crate::bgp::SessionState;

/// The report of one node's bgpd, named after the node. bgpd rewrites it
/// when a session changes (at most once a second) and every
/// `refreshSeconds` regardless, so a report older than that (plus a
/// margin) means the node's bgpd is not running: readers show it stale.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "BGPNodeStatus",
    plural = "bgpnodestatuses",
    root = "BgpNodeStatus",
    derive = "PartialEq",
    doc = "One node's BGP sessions as its bgpd last reported them. Written by bgpd only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BgpNodeStatusSpec {
    /// The node reported on (also the object's name).
    #[schemars(transform = schema_rules::dns_name)]
    pub node: String,
    /// When bgpd wrote this report, in seconds since the Unix epoch.
    pub updated: u64,
    /// How often bgpd rewrites the report even when nothing changed, in
    /// seconds; a report older than this (plus a margin) is stale.
    #[schemars(range(min = 1))]
    pub refresh_seconds: u32,
    /// The speaker's router ID.
    #[serde(rename = "routerID")]
    pub router_id: String,
    /// The speaker's AS number.
    pub asn: u32,
    /// One entry per neighbor, ordered by address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub sessions: Vec<BgpSessionReport>,
}

/// One neighbor's session.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BgpSessionReport {
    /// The neighbor's address.
    #[schemars(transform = schema_rules::address)]
    pub peer: String,
    /// The neighbor's AS number.
    pub asn: u32,
    /// The RFC 4271 session state.
    pub state: SessionState,
    /// Established since (seconds since the Unix epoch); absent when not
    /// Established.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    /// Prefixes received from the neighbor.
    #[serde(default)]
    pub prefixes_received: u64,
    /// Prefixes advertised to the neighbor.
    #[serde(default)]
    pub prefixes_sent: u64,
    /// The last error of the session (a NOTIFICATION, a failed dial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The BFD session's state; absent when BFD is not configured for
    /// this neighbor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<String>,
}

impl BgpNodeStatusSpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        p.take("spec.node", dns_subdomain(&self.node));
        if self.refresh_seconds == 0 {
            p.add("spec.refreshSeconds", "must be at least 1");
        }
        if self.router_id.parse::<std::net::Ipv4Addr>().is_err() {
            p.add("spec.routerID", "not a dotted IPv4 address");
        }
        for (i, s) in self.sessions.iter().enumerate() {
            if s.peer.parse::<std::net::IpAddr>().is_err() {
                p.add(
                    format!("spec.sessions[{i}].peer"),
                    "not an IPv4 or IPv6 address",
                );
            }
        }
        p.0
    }

    /// Whether the report is older than its refresh period allows at
    /// `now` (seconds since the epoch): the writer missed a refresh and
    /// a margin of [`STALE_MARGIN_SECONDS`] or half the period, whichever
    /// is larger.
    pub fn is_stale(&self, now: u64) -> bool {
        let period = u64::from(self.refresh_seconds.max(1));
        let margin = STALE_MARGIN_SECONDS.max(period / 2);
        now.saturating_sub(self.updated) > period + margin
    }
}

/// The least slack a reader allows a writer beyond its refresh period
/// (clock skew between machines, a slow datastore write).
pub const STALE_MARGIN_SECONDS: u64 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    fn report(updated: u64, refresh_seconds: u32) -> BgpNodeStatusSpec {
        BgpNodeStatusSpec {
            node: "node-a".into(),
            updated,
            refresh_seconds,
            router_id: "192.0.2.1".into(),
            asn: 64512,
            sessions: vec![],
        }
    }

    #[test]
    fn stale_after_the_refresh_period_and_its_margin() {
        // 30 s period: margin 15 s; stale from 46 s on.
        let r = report(1000, 30);
        assert!(!r.is_stale(1000));
        assert!(!r.is_stale(1045));
        assert!(r.is_stale(1046));
        // A clock behind the writer's never makes it stale.
        assert!(!r.is_stale(900));
        // 1 s period: the least margin (2 s) applies.
        let r = report(1000, 1);
        assert!(!r.is_stale(1003));
        assert!(r.is_stale(1004));
    }
}
