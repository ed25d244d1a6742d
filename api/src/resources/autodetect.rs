//! How a node finds its own BGP address when its Node carries no
//! `tartan.dev/bgp-ipv4-address` (or `-ipv6-`) annotation: the method
//! (BGPConfiguration `nodeAddressAutodetectionV4`/`V6`) and the pure choice
//! among the node's interface addresses. bgpd runs the choice at start on
//! the node and writes the result back as the annotation, so operators and
//! the other nodes see it.

use std::net::IpAddr;

use ipnet::IpNet;
use regex::Regex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problems, parse_network};
use super::schema_rules;

/// Which of a Node's addresses Kubernetes reports to use.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum KubernetesAddress {
    /// The Node's `status.addresses` entry of type InternalIP (of the
    /// family being detected).
    #[serde(rename = "NodeInternalIP")]
    NodeInternalIp,
}

/// One way to find the node's address; exactly one field is set. Left out
/// entirely, IPv4 uses `kubernetes: NodeInternalIP`, and IPv6 does the same
/// when the Node has an IPv6 InternalIP (else the node has no IPv6 BGP
/// address). An address an operator wrote into the annotation is kept
/// unless a method is configured explicitly.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.kubernetes) ? 1 : 0) + (has(self.interface) ? 1 : 0) + (has(self.skipInterface) ? 1 : 0) + (has(self.canReach) ? 1 : 0) + (has(self.cidrs) ? 1 : 0) + (has(self.firstFound) ? 1 : 0) == 1",
    "message": "set exactly one of kubernetes, interface, skipInterface, canReach, cidrs, firstFound"
}]))]
pub struct AddressAutodetection {
    /// Take the address Kubernetes reports for the Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<KubernetesAddress>,
    /// The first address on an interface whose whole name matches this
    /// regular expression, e.g. `eth.*|ens.*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub interface: Option<String>,
    /// As `firstFound`, also skipping interfaces whose whole name matches
    /// this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub skip_interface: Option<String>,
    /// The address the node's routing table uses as source towards this
    /// address (a router or another node), e.g. `192.0.2.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::address)]
    pub can_reach: Option<String>,
    /// The first address inside any of these networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::network_list, length(min = 1))]
    pub cidrs: Option<Vec<String>>,
    /// The first address on an interface that is not a loopback, container,
    /// bridge or tunnel device (lo, docker*, veth*, cni*, tartan.*, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [true]))]
    pub first_found: Option<bool>,
}

/// The address family being detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(a: &IpAddr) -> Family {
        if a.is_ipv4() { Family::V4 } else { Family::V6 }
    }

    fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

/// An address on one of the node's interfaces, with its prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalAddress {
    pub interface: String,
    pub address: IpNet,
}

/// Interfaces `firstFound` never picks: loopback, and devices of
/// containers, bridges, tunnels and other networks' agents.
const SKIPPED_BY_DEFAULT: &str = r"lo|docker.*|cbr.*|dummy.*|virbr.*|lxcbr.*|veth.*|cni.*|flannel.*|kube-ipvs.*|cali.*|tunl.*|tartan\..*|tar[0-9a-f]{11}";

/// A whole-name match of `pattern`.
fn whole(pattern: &str) -> Result<Regex, String> {
    Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("{pattern:?} is not a regular expression: {e}"))
}

impl AddressAutodetection {
    /// The method used when none is configured.
    pub fn node_internal_ip() -> AddressAutodetection {
        AddressAutodetection {
            kubernetes: Some(KubernetesAddress::NodeInternalIp),
            ..Default::default()
        }
    }

    /// The address `canReach` names, if that is the method.
    pub fn reach_target(&self) -> Option<IpAddr> {
        self.can_reach.as_deref().and_then(|s| s.parse().ok())
    }

    /// Problems with this method for `family`; fields named from `field`.
    pub(crate) fn check(&self, field: &str, family: Family, p: &mut Problems) {
        let set = [
            self.kubernetes.is_some(),
            self.interface.is_some(),
            self.skip_interface.is_some(),
            self.can_reach.is_some(),
            self.cidrs.is_some(),
            self.first_found.is_some(),
        ]
        .into_iter()
        .filter(|s| *s)
        .count();
        if set != 1 {
            p.add(
                field,
                format!(
                    "{set} methods set; set exactly one of kubernetes, interface, skipInterface, canReach, cidrs, firstFound"
                ),
            );
        }
        for (name, re) in [
            ("interface", &self.interface),
            ("skipInterface", &self.skip_interface),
        ] {
            if let Some(re) = re {
                p.take(&format!("{field}.{name}"), whole(re));
            }
        }
        if let Some(a) = &self.can_reach {
            match a.parse::<IpAddr>() {
                Ok(ip) if Family::of(&ip) == family => {}
                Ok(_) => p.add(
                    format!("{field}.canReach"),
                    format!("{a} is not an {} address", family.name()),
                ),
                Err(_) => p.add(
                    format!("{field}.canReach"),
                    format!("{a:?} is not an IP address"),
                ),
            }
        }
        if let Some(cidrs) = &self.cidrs {
            if cidrs.is_empty() {
                p.add(format!("{field}.cidrs"), "give at least one network");
            }
            for (i, c) in cidrs.iter().enumerate() {
                let f = format!("{field}.cidrs[{i}]");
                if let Some(n) = p.take(&f, parse_network(c))
                    && Family::of(&n.addr()) != family
                {
                    p.add(f, format!("{c} is not an {} network", family.name()));
                }
            }
        }
        if self.first_found == Some(false) {
            p.add(
                format!("{field}.firstFound"),
                "false is not a method; leave the field out or set it to true",
            );
        }
    }

    /// The node's address of `family` by this method. `internal` are the
    /// Node's InternalIP addresses; `local` the node's interface addresses in
    /// the kernel's order; `reach_source` the source address the routing
    /// table picks towards `canReach` (looked up by the caller).
    pub fn choose(
        &self,
        family: Family,
        internal: &[IpAddr],
        local: &[LocalAddress],
        reach_source: Option<IpAddr>,
    ) -> Result<IpNet, String> {
        let usable = |l: &&LocalAddress| {
            let a = l.address.addr();
            Family::of(&a) == family && !a.is_loopback() && !is_link_local(&a)
        };
        let on_interface = |a: IpAddr, what: &str| {
            local
                .iter()
                .find(|l| l.address.addr() == a)
                .map(|l| l.address)
                .ok_or_else(|| format!("{what} {a} is on none of this node's interfaces"))
        };
        let first = |skip: &[Regex], only: Option<&Regex>, what: &str| {
            local
                .iter()
                .filter(usable)
                .find(|l| {
                    only.is_none_or(|r| r.is_match(&l.interface))
                        && !skip.iter().any(|r| r.is_match(&l.interface))
                })
                .map(|l| l.address)
                .ok_or_else(|| format!("no {} address on {what}", family.name()))
        };
        if self.kubernetes.is_some() {
            let a = internal
                .iter()
                .find(|a| Family::of(a) == family)
                .ok_or_else(|| format!("the Node has no {} InternalIP", family.name()))?;
            return on_interface(*a, "the Node's InternalIP");
        }
        if let Some(re) = &self.interface {
            return first(
                &[],
                Some(&whole(re)?),
                &format!("an interface matching {re:?}"),
            );
        }
        if let Some(target) = &self.can_reach {
            let src = reach_source.ok_or_else(|| format!("no route from this node to {target}"))?;
            return on_interface(src, &format!("the source address towards {target},"));
        }
        if let Some(cidrs) = &self.cidrs {
            let nets: Vec<IpNet> = cidrs.iter().filter_map(|c| parse_network(c).ok()).collect();
            return local
                .iter()
                .filter(usable)
                .find(|l| nets.iter().any(|n| n.contains(&l.address.addr())))
                .map(|l| l.address)
                .ok_or_else(|| {
                    format!("no {} address inside {}", family.name(), cidrs.join(", "))
                });
        }
        let mut skip = vec![whole(SKIPPED_BY_DEFAULT)?];
        if let Some(re) = &self.skip_interface {
            skip.push(whole(re)?);
        }
        first(&skip, None, "any interface that is not skipped")
    }
}

fn is_link_local(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

#[cfg(test)]
#[path = "autodetect_tests.rs"]
mod tests;
