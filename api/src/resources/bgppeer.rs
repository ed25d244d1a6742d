//! BGPPeer: a BGP session nodes make besides the node-to-node mesh.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::bfd::BfdSpec;
use super::bgpconfiguration::MAX_RESTART_SECONDS;
use super::common::{
    Problem, Problems, SecretSource, check_as_number, check_duration, check_selector, dns_subdomain,
};
use super::schema_rules;

/// What this node puts in NEXT_HOP of routes it sends the peer.
///
/// `Auto`: for eBGP, a next hop on the subnet shared with the peer is kept
/// (a third-party next hop, RFC 4271 5.1.3), any other becomes itself; for
/// iBGP, unchanged. `Self`: always itself. `Keep`: never changed. The
/// node's own routes always carry its address.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum NextHopMode {
    #[default]
    Auto,
    #[serde(rename = "Self")]
    SelfAddress,
    Keep,
}

/// The local address of the session. `UseNodeIP`: the node's BGP address.
/// `None`: whatever the kernel picks.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SourceAddress {
    #[default]
    #[serde(rename = "UseNodeIP")]
    UseNodeIp,
    None,
}

/// A BGP peer for some or all nodes: a router at `peerIP`, or the nodes
/// matched by `peerSelector` (e.g. route reflectors).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "BGPPeer",
    plural = "bgppeers",
    root = "BgpPeer",
    derive = "PartialEq",
    doc = "A BGP peer of some or all nodes."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.peerIP) != has(self.peerSelector)", "message": "set exactly one of peerIP and peerSelector"},
    {"rule": "!(has(self.node) && has(self.nodeSelector))", "message": "set at most one of node and nodeSelector"},
    {"rule": "!has(self.peerIP) || has(self.asNumber)", "message": "peerIP needs asNumber"},
    {"rule": "!has(self.peerSelector) || !has(self.asNumber)", "message": "asNumber must be empty when peerSelector is specified; the selected nodes' own AS numbers are used"}
]))]
pub struct BgpPeerSpec {
    /// The one node that makes this session. Default: all nodes (or those
    /// nodeSelector picks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::dns_name)]
    pub node: Option<String>,
    /// The nodes that make this session. Default: all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub node_selector: Option<String>,
    /// The peer's address: `192.0.2.1`, `2001:db8::1`, `192.0.2.1:1179`
    /// or `[2001:db8::1]:1179` (port default 179).
    #[serde(default, rename = "peerIP", skip_serializing_if = "Option::is_none")]
    #[schemars(transform = peer_ip_rules)]
    pub peer_ip: Option<String>,
    /// The peer's AS number; required with peerIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::as_number)]
    pub as_number: Option<u32>,
    /// Peer with the nodes this selects (at their own AS), instead of peerIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub peer_selector: Option<String>,
    /// TCP MD5 password (RFC 2385). Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<SecretSource>,
    /// Accept the peer's packets only from at most this many hops away
    /// (RFC 5082). 1 to 255; 0 (as in Calico) or absent: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_security: Option<u8>,
    /// NEXT_HOP handling. Default `Auto`.
    #[serde(default)]
    pub next_hop_mode: NextHopMode,
    /// The restart time announced to this peer (RFC 4724: how long it
    /// keeps this node's routes while the node's speaker restarts), e.g.
    /// `120s`; at most 4095s. Default: BGPConfiguration
    /// `gracefulRestartTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::max_restart_time)]
    pub max_restart_time: Option<String>,
    /// Names of BGPFilters applied to this session, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::dns_name_set)]
    pub filters: Vec<String>,
    /// Local address of the session. Default `UseNodeIP`.
    #[serde(default)]
    pub source_address: SourceAddress,
    /// BFD for this session (single hop, RFC 5881). Default off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<BfdSpec>,
}

impl BgpPeerSpec {
    /// A peer at `peer_ip` in AS `as_number` for every node.
    pub fn new(peer_ip: &str, as_number: u32) -> Self {
        BgpPeerSpec {
            node: None,
            node_selector: None,
            peer_ip: Some(peer_ip.to_string()),
            as_number: Some(as_number),
            peer_selector: None,
            password: None,
            ttl_security: None,
            next_hop_mode: NextHopMode::Auto,
            max_restart_time: None,
            filters: vec![],
            source_address: SourceAddress::UseNodeIp,
            bfd: None,
        }
    }

    /// How many hops away TTL security (RFC 5082) lets the peer be;
    /// `None` when it is off (absent, or 0 as Calico writes off).
    pub fn ttl_security_hops(&self) -> Option<u8> {
        self.ttl_security.filter(|&h| h > 0)
    }

    /// The peer's address and port (179 unless given), when peerIP is set.
    pub fn peer_address(&self) -> Option<Result<SocketAddr, String>> {
        self.peer_ip.as_deref().map(parse_peer_ip)
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        match (&self.peer_ip, &self.peer_selector) {
            (Some(_), Some(_)) => p.add(
                "spec.peerSelector",
                "both peerIP and peerSelector are set; choose one",
            ),
            (None, None) => p.add(
                "spec.peerIP",
                "missing; set peerIP (a router) or peerSelector (nodes)",
            ),
            _ => {}
        }
        if let Some(ip) = &self.peer_ip {
            p.take("spec.peerIP", parse_peer_ip(ip));
            if self.as_number.is_none() {
                p.add(
                    "spec.asNumber",
                    "missing; a peer at peerIP needs its AS number",
                );
            }
        }
        if let Some(asn) = self.as_number {
            if self.peer_selector.is_some() {
                // As Calico: the selected nodes' own AS numbers are used,
                // so a number here would be silently ignored.
                p.add(
                    "spec.asNumber",
                    "must be empty when peerSelector is specified; the selected nodes' own AS numbers are used",
                );
            } else {
                p.take("spec.asNumber", check_as_number(asn));
            }
        }
        if self.node.is_some() && self.node_selector.is_some() {
            p.add(
                "spec.nodeSelector",
                "both node and nodeSelector are set; choose one",
            );
        }
        if let Some(n) = &self.node {
            p.take("spec.node", dns_subdomain(n));
        }
        if let Some(s) = &self.node_selector {
            check_selector("spec.nodeSelector", s, &mut p);
        }
        if let Some(s) = &self.peer_selector {
            check_selector("spec.peerSelector", s, &mut p);
        }
        if let Some(pw) = &self.password {
            pw.check("spec.password", &mut p);
        }
        if let Some(t) = &self.max_restart_time {
            check_duration("spec.maxRestartTime", t, 0, MAX_RESTART_SECONDS, &mut p);
        }
        if let Some(b) = &self.bfd {
            b.check("spec.bfd", &mut p);
        }
        let mut seen = HashSet::new();
        for (i, f) in self.filters.iter().enumerate() {
            let field = format!("spec.filters[{i}]");
            if let Err(e) = dns_subdomain(f) {
                p.add(field, format!("{e} (a BGPFilter name)"));
            } else if !seen.insert(f.as_str()) {
                p.add(field, format!("{f:?} is listed twice"));
            }
        }
        p.0
    }
}

/// The CRD's rules on peerIP, which [`parse_peer_ip`] also applies: the
/// forms, the port, a unicast address.
fn peer_ip_rules(schema: &mut schemars::Schema) {
    const HOST: &str = "(isIP(self) ? self : self.startsWith('[') ? self.substring(1, self.lastIndexOf(']')) : self.substring(0, self.lastIndexOf(':')))";
    let rules = serde_json::json!([
        {
            "rule": "isIP(self) || (self.matches('^[0-9.]+:[0-9]+$') && isIP(self.substring(0, self.lastIndexOf(':'))) && ip(self.substring(0, self.lastIndexOf(':'))).family() == 4) || (self.matches('^\\\\[[0-9a-fA-F:.]+\\\\]:[0-9]+$') && isIP(self.substring(1, self.lastIndexOf(']'))) && ip(self.substring(1, self.lastIndexOf(']'))).family() == 6)",
            "message": "is not a peer address; expected 192.0.2.1, 2001:db8::1, 192.0.2.1:179 or [2001:db8::1]:179"
        },
        {
            "rule": "isIP(self) || !self.matches(':[0-9]+$') || (int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535)",
            "message": "the port is out of range; allowed 1 to 65535"
        },
        {
            "rule": format!("!(isIP(self) || self.matches('^[0-9.]+:[0-9]+$') || self.matches('^\\\\[[0-9a-fA-F:.]+\\\\]:[0-9]+$')) || !isIP({HOST}) || !(ip({HOST}).isUnspecified() || cidr('224.0.0.0/4').containsIP(ip({HOST})) || cidr('ff00::/8').containsIP(ip({HOST})))"),
            "message": "is not a unicast address; a peer needs one"
        }
    ]);
    schema.insert("maxLength".into(), schema_rules::ADDRESS_MAX.into());
    schema.insert("x-kubernetes-validations".into(), rules);
}

/// `IPv4`, `IPv6`, `IPv4:port` or `[IPv6]:port`; 179 when no port is
/// given.
pub fn parse_peer_ip(s: &str) -> Result<SocketAddr, String> {
    let (ip, port) = peer_ip_and_port(s)?;
    Ok(SocketAddr::new(ip, port.unwrap_or(179)))
}

/// [`parse_peer_ip`], with the port only if the text gives one.
pub fn peer_ip_and_port(s: &str) -> Result<(IpAddr, Option<u16>), String> {
    let (ip, port) = match s.parse::<IpAddr>() {
        Ok(ip) => (ip, None),
        Err(_) => {
            let a = s.parse::<SocketAddr>().map_err(|_| {
                format!(
                    "{s:?} is not a peer address; expected 192.0.2.1, 2001:db8::1, 192.0.2.1:179 or [2001:db8::1]:179"
                )
            })?;
            (a.ip(), Some(a.port()))
        }
    };
    if port == Some(0) {
        return Err(format!("{s:?}: port 0 is not allowed; allowed 1 to 65535"));
    }
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(format!("{s:?} is not a unicast address; a peer needs one"));
    }
    Ok((ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calico writes 0 for off; bgpd reads the hops from here.
    #[test]
    fn ttl_security_zero_is_off() {
        let mut p = BgpPeerSpec::new("192.0.2.1", 65001);
        assert_eq!(p.ttl_security_hops(), None);
        p.ttl_security = Some(0);
        assert_eq!(p.ttl_security_hops(), None);
        assert!(p.check().is_empty(), "{:?}", p.check());
        p.ttl_security = Some(3);
        assert_eq!(p.ttl_security_hops(), Some(3));
    }

    #[test]
    fn peer_addresses() {
        assert_eq!(
            parse_peer_ip("192.0.2.1"),
            Ok("192.0.2.1:179".parse().unwrap())
        );
        assert_eq!(
            parse_peer_ip("[2001:db8::1]:1179"),
            Ok("[2001:db8::1]:1179".parse().unwrap())
        );
        assert_eq!(parse_peer_ip("2001:db8::1").unwrap().port(), 179);
        for bad in [
            "192.0.2.1:0",
            "2001:db8::1:179:x",
            "0.0.0.0",
            "router",
            "192.0.2.1:70000",
        ] {
            assert!(parse_peer_ip(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn defaults_fill_in() {
        let s: BgpPeerSpec =
            serde_json::from_str(r#"{"peerIP": "192.0.2.1", "asNumber": 65001}"#).unwrap();
        assert_eq!(s, BgpPeerSpec::new("192.0.2.1", 65001));
        assert_eq!(s.next_hop_mode, NextHopMode::Auto);
        assert_eq!(s.source_address, SourceAddress::UseNodeIp);
        assert!(s.check().is_empty());
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["nextHopMode"], "Auto");
        assert_eq!(json["sourceAddress"], "UseNodeIP");
    }
}
