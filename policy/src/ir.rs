//! The rule IR every policy source is converted to before compilation: a
//! rule is a list of conditions that must all hold, and an action. Pure.
//!
//! Kubernetes NetworkPolicy rules (peers OR'd, ports OR'd) become one IR
//! rule per peer and port; Tartan rules map one-to-one (but for port lists
//! that mix numbers and names, which split).

use std::fmt;

use ipnet::IpNet;

use crate::Selector;
use crate::model::{self, Action, Namespaces, Peer, PortSel};

/// Endpoints picked by labels: pods matching `pods` in the namespaces
/// `namespaces` names or selects and, with `net_sets`, the network sets
/// matching `pods` in those namespaces (and the global network sets when
/// a selected scope takes in [`Selector::matches_global`]). The
/// dataplane turns each distinct one into a set of addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointSel {
    pub namespaces: Namespaces,
    pub pods: Selector,
    /// Whether network sets are picked too: only by a Tartan rule's
    /// `selector`, `notSelector` and `namespaceSelector` (never by a
    /// Kubernetes peer, nor by the pods a policy applies to).
    pub net_sets: bool,
}

impl fmt::Display for EndpointSel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespaces {
            Namespaces::Named(n) => write!(f, "namespace {n:?}, pods {}", self.pods)?,
            Namespaces::Selected(s) => write!(f, "namespaces {s}, pods {}", self.pods)?,
        }
        // Part of the text that names its nft sets: a selector that picks
        // network sets never shares a set with one that does not.
        if self.net_sets {
            f.write_str(", network sets")?;
        }
        Ok(())
    }
}

/// Which end of the packet a condition looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Source,
    Destination,
}

/// An address condition's operand.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Addrs {
    /// In one of these networks.
    Nets(Vec<IpNet>),
    /// The address of one of these endpoints.
    Endpoints(EndpointSel),
}

/// One condition of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cond {
    /// IPv4 (4) or IPv6 (6) only.
    IpVersion(u8),
    /// The IP protocol is (`negate`: is not) this number.
    Protocol { number: u8, negate: bool },
    /// ICMP (or ICMPv6 with `v6`) type, and code within it.
    Icmp {
        v6: bool,
        icmp_type: u8,
        code: Option<u8>,
        negate: bool,
    },
    Addr {
        side: Side,
        addrs: Addrs,
        negate: bool,
    },
    /// The port is in (not in) one of these inclusive ranges. The rule
    /// also has a protocol condition with ports.
    Ports {
        side: Side,
        ranges: Vec<(u16, u16)>,
        negate: bool,
    },
    /// The (address, protocol, port) of this side is one of an endpoint's
    /// container ports called `name`: resolved per endpoint, so one rule
    /// serves pods that number the port differently.
    NamedPort {
        side: Side,
        name: String,
        negate: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    pub conds: Vec<Cond>,
}

/// Where a policy came from; its text is the tie-breaker between policies
/// of equal order, and names it in logs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// `networking.k8s.io/v1` NetworkPolicy (namespace, name).
    Kubernetes(String, String),
    /// Tartan's NetworkPolicy (namespace, name).
    Namespaced(String, String),
    /// Tartan's GlobalNetworkPolicy.
    Global(String),
    /// A policy of any of the three that could not be read, standing in
    /// for it as an isolation (see [`crate::isolate`]): (what it was,
    /// `namespace/name` or `name`).
    Unreadable(String, String),
}

impl Source {
    /// Evaluated among the Kubernetes NetworkPolicies, where a Pass does
    /// not skip it. An unreadable policy stands there too, so that no
    /// Tartan policy's Pass can skip its isolation.
    pub fn is_kubernetes(&self) -> bool {
        matches!(self, Source::Kubernetes(..) | Source::Unreadable(..))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Kubernetes(ns, n) => write!(f, "knp:{ns}/{n}"),
            Source::Namespaced(ns, n) => write!(f, "tnp:{ns}/{n}"),
            Source::Global(n) => write!(f, "gnp:{n}"),
            Source::Unreadable(what, n) => write!(f, "unreadable:{what}:{n}"),
        }
    }
}

/// Where Kubernetes NetworkPolicies stand among Tartan's ordered policies.
pub const KUBERNETES_ORDER: f64 = 1000.0;

/// A policy ready to compile.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub source: Source,
    /// Lower first; `f64::INFINITY` for Tartan policies without an order.
    pub order: f64,
    pub applies_to: EndpointSel,
    /// `Some`: governs traffic to the selected endpoints.
    pub ingress: Option<Vec<Rule>>,
    /// `Some`: governs traffic from them.
    pub egress: Option<Vec<Rule>>,
}

impl Policy {
    /// The evaluation order: by `order`, then by the source's text.
    pub fn sort_key(&self) -> (OrderKey, String) {
        (OrderKey(self.order), self.source.to_string())
    }

    /// The endpoint selectors of its rules' conditions (ingress, then
    /// egress; negated or not), not the one it applies to.
    pub fn rule_selectors(&self) -> impl Iterator<Item = &EndpointSel> {
        [&self.ingress, &self.egress]
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|r| &r.conds)
            .filter_map(|c| match c {
                Cond::Addr {
                    addrs: Addrs::Endpoints(sel),
                    ..
                } => Some(sel),
                _ => None,
            })
    }

    /// Whether any rule in `dir` can Pass.
    pub fn can_pass(&self, ingress: bool) -> bool {
        let rules = if ingress { &self.ingress } else { &self.egress };
        rules.iter().flatten().any(|r| r.action == Action::Pass)
    }
}

/// A total order on policy orders (NaN cannot occur: orders are parsed
/// from JSON numbers or are the constants above).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OrderKey(pub f64);

impl Eq for OrderKey {}

impl PartialOrd for OrderKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

fn peer_conds(p: &Peer, side: Side) -> Vec<Cond> {
    match p {
        Peer::Pods { namespaces, pods } => vec![Cond::Addr {
            side,
            addrs: Addrs::Endpoints(EndpointSel {
                namespaces: namespaces.clone(),
                pods: pods.clone(),
                net_sets: false,
            }),
            negate: false,
        }],
        Peer::Net { cidr, except } => {
            let mut c = vec![Cond::Addr {
                side,
                addrs: Addrs::Nets(vec![*cidr]),
                negate: false,
            }];
            if !except.is_empty() {
                c.push(Cond::Addr {
                    side,
                    addrs: Addrs::Nets(except.clone()),
                    negate: true,
                });
            }
            c
        }
    }
}

fn port_conds(m: &model::PortMatch) -> Vec<Cond> {
    let number = match m.protocol {
        model::Protocol::Tcp => 6,
        model::Protocol::Udp => 17,
        model::Protocol::Sctp => 132,
    };
    let mut c = vec![Cond::Protocol {
        number,
        negate: false,
    }];
    match &m.ports {
        PortSel::Any => {}
        PortSel::Range(a, b) => c.push(Cond::Ports {
            side: Side::Destination,
            ranges: vec![(*a, *b)],
            negate: false,
        }),
        PortSel::Named(n) => c.push(Cond::NamedPort {
            side: Side::Destination,
            name: n.clone(),
            negate: false,
        }),
    }
    c
}

/// A Kubernetes-shaped rule (peers OR'd, ports OR'd) as IR rules. `side`
/// is where the peer is: the source for ingress, the destination for
/// egress. Ports are always the destination's.
pub fn from_model_rule(r: &model::Rule, side: Side) -> Vec<Rule> {
    let peers: Vec<Vec<Cond>> = if r.peers.is_empty() {
        vec![vec![]]
    } else {
        r.peers.iter().map(|p| peer_conds(p, side)).collect()
    };
    let ports: Vec<Vec<Cond>> = if r.ports.is_empty() {
        vec![vec![]]
    } else {
        r.ports.iter().map(port_conds).collect()
    };
    let mut out = Vec::new();
    for p in &peers {
        for q in &ports {
            let mut conds = p.clone();
            conds.extend(q.iter().cloned());
            out.push(Rule {
                action: r.action,
                conds,
            });
        }
    }
    out
}

/// A converted Kubernetes NetworkPolicy (see [`crate::k8s`]) as an IR
/// policy at [`KUBERNETES_ORDER`].
pub fn from_kubernetes(p: &model::Policy) -> Policy {
    let (namespace, name) = p.name.split_once('/').unwrap_or(("", &p.name));
    let applies_to = match &p.applies_to {
        Peer::Pods { namespaces, pods } => EndpointSel {
            namespaces: namespaces.clone(),
            pods: pods.clone(),
            net_sets: false,
        },
        // The Kubernetes conversion always selects pods.
        Peer::Net { .. } => EndpointSel {
            namespaces: Namespaces::Named(namespace.to_string()),
            pods: Selector::Not(Box::new(Selector::All)),
            net_sets: false,
        },
    };
    let conv = |rules: &Option<Vec<model::Rule>>, side| {
        rules
            .as_ref()
            .map(|rs| rs.iter().flat_map(|r| from_model_rule(r, side)).collect())
    };
    Policy {
        source: Source::Kubernetes(namespace.to_string(), name.to_string()),
        order: KUBERNETES_ORDER,
        applies_to,
        ingress: conv(&p.ingress, Side::Source),
        egress: conv(&p.egress, Side::Destination),
    }
}
