//! Runs of Allow (or Deny) rules written as one set lookup, and the boxes
//! of any rule of that shape (a Log rule's, a guard's union). Pure.
//!
//! Within a run of rules with the same deciding action, order does not
//! matter: the packet is decided if any rule matches. When every rule of
//! the run looks only at the peer's address, the protocol and the
//! destination port, the run is the union of boxes in (address,
//! protocol, port) space, and one lookup in an interval set holding that
//! union decides it, whatever the number of rules: a packet's cost stops
//! growing with the number of policies.
//!
//! Two shapes of set per run and family: `address . protocol` for rules
//! without ports, and `address . protocol . port` for rules with ports.
//! A rule without ports must not read the transport header (a packet of
//! a protocol without ports may not have the bytes), hence the split.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use super::boxes::{self, Intervals, Piece};
use super::{Endpoint, NamedPort, NamespaceLabels, NetSet};
use crate::ir::{Addrs, Cond, EndpointSel, Rule, Side};
use crate::model::{Action, Namespaces};

/// Whether `r` can be part of a run written as a set lookup, in the
/// direction `ingress` (the peer is the source for ingress, the
/// destination for egress; ports are always the destination's).
pub fn mergeable(r: &Rule, ingress: bool) -> bool {
    match r.action {
        Action::Allow | Action::Deny => box_shaped(r, ingress),
        // A Log rule is a run of its own (two Log rules matching one
        // packet log twice); one matching everything is a plain `log`.
        Action::Log => box_shaped(r, ingress) && !universal(r),
        Action::Pass => false,
    }
}

/// Whether the packets `r` matches are a union of (peer address,
/// protocol, destination port) boxes, whatever its action: what a run
/// and a guard (see the compiler's stretches) can hold.
pub fn box_shaped(r: &Rule, ingress: bool) -> bool {
    let peer = peer_side(ingress);
    let mut has_protocol = false;
    let mut has_ports = false;
    let mut named = 0;
    for c in &r.conds {
        match c {
            Cond::IpVersion(_) => {}
            Cond::Protocol { negate: false, .. } => has_protocol = true,
            Cond::Addr {
                side,
                addrs: Addrs::Nets(_),
                ..
            } if *side == peer => {}
            Cond::Addr {
                side,
                addrs: Addrs::Endpoints(_),
                negate: false,
            } if *side == peer => {}
            Cond::Ports {
                side: Side::Destination,
                ..
            } => has_ports = true,
            Cond::NamedPort {
                side: Side::Destination,
                negate: false,
                ..
            } => named += 1,
            _ => return false,
        }
    }
    named <= 1 && (!has_ports || has_protocol)
}

fn peer_side(ingress: bool) -> Side {
    if ingress {
        Side::Source
    } else {
        Side::Destination
    }
}

/// Whether a box-shaped rule matches every packet of a family (no
/// condition but the IP version): a guard holding it would skip nothing.
pub fn universal(r: &Rule) -> bool {
    r.conds.iter().all(|c| matches!(c, Cond::IpVersion(_)))
}

/// Whether a mergeable rule has ports (written in the port-shaped set).
pub fn has_ports(r: &Rule) -> bool {
    r.conds
        .iter()
        .any(|c| matches!(c, Cond::Ports { .. } | Cond::NamedPort { .. }))
}

/// Whether a mergeable rule can match in family `v6` at all, whatever
/// the endpoints (an IPv4-only network list never matches IPv6).
pub fn possible_in(r: &Rule, v6: bool) -> bool {
    r.conds.iter().all(|c| match c {
        Cond::IpVersion(v) => (*v == 6) == v6,
        Cond::Addr {
            addrs: Addrs::Nets(nets),
            negate: false,
            ..
        } => nets.iter().any(|n| matches!(n, ipnet::IpNet::V6(_)) == v6),
        _ => true,
    })
}

/// The addresses of endpoints, and the networks of network sets,
/// memoised per compile.
pub struct Resolver<'a> {
    namespaces: &'a NamespaceLabels,
    net_sets: &'a [NetSet],
    /// Made at the first selector confined to a namespace: a compile with
    /// none (no policy at all) does not sort the cluster's endpoints.
    by_namespace: Option<BTreeMap<&'a str, Vec<&'a Endpoint>>>,
    all: Vec<&'a Endpoint>,
    selected: HashMap<(EndpointSel, bool), Intervals>,
    /// Named port → (protocol, port) → the addresses that number it so.
    named: HashMap<(String, bool), BTreeMap<(u8, u16), Intervals>>,
}

impl<'a> Resolver<'a> {
    pub fn new<E: Borrow<Endpoint>>(
        endpoints: &'a [E],
        net_sets: &'a [NetSet],
        namespaces: &'a NamespaceLabels,
    ) -> Resolver<'a> {
        Resolver {
            namespaces,
            net_sets,
            by_namespace: None,
            all: endpoints.iter().map(Borrow::borrow).collect(),
            selected: HashMap::new(),
            named: HashMap::new(),
        }
    }

    /// The addresses (of family `v6`) of the pods `sel` selects.
    pub fn addresses(&mut self, sel: &EndpointSel, v6: bool) -> Vec<IpAddr> {
        // A selector in one namespace need only look at that namespace.
        let pool: &[&Endpoint] = match &sel.namespaces {
            Namespaces::Named(n) => {
                let all = &self.all;
                self.by_namespace
                    .get_or_insert_with(|| {
                        let mut by: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
                        for &ep in all {
                            by.entry(&*ep.namespace).or_default().push(ep);
                        }
                        by
                    })
                    .get(n.as_str())
                    .map_or(&[], Vec::as_slice)
            }
            Namespaces::Selected(_) => &self.all,
        };
        pool.iter()
            .filter(|ep| sel.matches(ep, self.namespaces))
            .flat_map(|ep| ep.addrs.iter().copied())
            .filter(|a| a.is_ipv6() == v6)
            .collect()
    }

    /// The addresses (of family `v6`) `sel` stands for: those of the pods
    /// it selects and, when it picks network sets, the networks of the
    /// sets it selects, merged.
    pub fn selected(&mut self, sel: &EndpointSel, v6: bool) -> Intervals {
        if let Some(iv) = self.selected.get(&(sel.clone(), v6)) {
            return iv.clone();
        }
        let mut ranges: Vec<(u128, u128)> = self
            .addresses(sel, v6)
            .into_iter()
            .map(|a| (boxes::addr_number(a), boxes::addr_number(a)))
            .collect();
        if sel.net_sets {
            ranges.extend(
                self.net_sets
                    .iter()
                    .filter(|set| sel.matches_set(set, self.namespaces))
                    .flat_map(|set| set.nets.iter())
                    .filter(|n| matches!(n, ipnet::IpNet::V6(_)) == v6)
                    .map(boxes::net_range),
            );
        }
        let iv = Intervals::from_ranges(ranges);
        self.selected.insert((sel.clone(), v6), iv.clone());
        iv
    }

    fn named(&mut self, name: &str, v6: bool) -> &BTreeMap<(u8, u16), Intervals> {
        let endpoints = &self.all;
        self.named.entry((name.to_string(), v6)).or_insert_with(|| {
            let mut points: BTreeMap<(u8, u16), Vec<u128>> = BTreeMap::new();
            for ep in endpoints {
                for p in ep.ports.iter().filter(|p| p.name == name) {
                    for a in ep.addrs.iter().filter(|a| a.is_ipv6() == v6) {
                        points
                            .entry((p.protocol, p.port))
                            .or_default()
                            .push(boxes::addr_number(*a));
                    }
                }
            }
            points
                .into_iter()
                .map(|(k, v)| (k, Intervals::from_points(v)))
                .collect()
        })
    }
}

/// What a run's boxes depend on besides its rules: the addresses its
/// selectors pick (with the networks of the network sets they pick) and,
/// for egress, who numbers its named ports how.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Selected(Intervals),
    Named(BTreeMap<(u8, u16), Intervals>),
}

/// The endpoint-dependent inputs of `rules` (a run's) in `families`: two
/// compiles with equal rules, local ports and inputs give equal boxes.
pub fn run_inputs(
    rules: &[Rule],
    families: &[bool],
    ingress: bool,
    res: &mut Resolver<'_>,
) -> Vec<Input> {
    let mut out = Vec::new();
    for &v6 in families {
        for c in rules.iter().flat_map(|r| &r.conds) {
            match c {
                Cond::Addr {
                    addrs: Addrs::Endpoints(sel),
                    ..
                } => out.push(Input::Selected(res.selected(sel, v6))),
                Cond::NamedPort { name, .. } if !ingress => {
                    out.push(Input::Named(res.named(name, v6).clone()))
                }
                _ => {}
            }
        }
    }
    out
}

/// A mergeable rule as boxes: addresses × ranges of the second field
/// (`protocol` for the portless shape, `protocol << 16 | port` for the
/// other). Empty when it matches nothing.
type Entry = (Intervals, Vec<(u32, u32)>);

fn proto_port(proto: u8, a: u16, b: u16) -> (u32, u32) {
    let p = u32::from(proto) << 16;
    (p | u32::from(a), p | u32::from(b))
}

/// The port ranges of a ports condition, normalised, and complemented
/// for `negate`.
fn port_ranges(ranges: &[(u16, u16)], negate: bool) -> Intervals {
    let iv = Intervals::from_ranges(
        ranges
            .iter()
            .map(|&(a, b)| (u128::from(a), u128::from(b)))
            .collect(),
    );
    if negate {
        Intervals::from_ranges(vec![(0, 0xffff)]).subtract(&iv)
    } else {
        iv
    }
}

/// `r` (mergeable) in family `v6`: its boxes. `local_ports` are the
/// named ports of the endpoints the rule protects (ingress).
fn entries(
    r: &Rule,
    v6: bool,
    ingress: bool,
    local_ports: &[NamedPort],
    res: &mut Resolver<'_>,
) -> Vec<Entry> {
    let peer = peer_side(ingress);
    let mut addrs = Intervals::all(v6);
    let mut proto: Option<u8> = None;
    let mut ports: Option<Intervals> = None;
    let mut named: Option<&str> = None;
    for c in &r.conds {
        match c {
            Cond::IpVersion(v) => {
                if (*v == 6) != v6 {
                    return Vec::new();
                }
            }
            Cond::Protocol { number, .. } => {
                if proto.is_some_and(|p| p != *number) {
                    return Vec::new();
                }
                proto = Some(*number);
            }
            Cond::Addr {
                side,
                addrs: Addrs::Nets(nets),
                negate,
            } if *side == peer => {
                let iv = Intervals::from_ranges(
                    nets.iter()
                        .filter(|n| matches!(n, ipnet::IpNet::V6(_)) == v6)
                        .map(boxes::net_range)
                        .collect(),
                );
                addrs = if *negate {
                    addrs.subtract(&iv)
                } else {
                    addrs.intersect(&iv)
                };
            }
            Cond::Addr {
                addrs: Addrs::Endpoints(sel),
                ..
            } => addrs = addrs.intersect(&res.selected(sel, v6)),
            Cond::Ports { ranges, negate, .. } => {
                let iv = port_ranges(ranges, *negate);
                ports = Some(match ports {
                    Some(p) => p.intersect(&iv),
                    None => iv,
                });
            }
            Cond::NamedPort { name, .. } => named = Some(name),
            // Not mergeable: never asked.
            Cond::Icmp { .. } | Cond::Addr { .. } => return Vec::new(),
        }
    }
    if addrs.is_empty() {
        return Vec::new();
    }
    let port_ok = |q: u16| ports.as_ref().is_none_or(|p| p.contains(u128::from(q)));
    let Some(name) = named else {
        let second = match (proto, &ports) {
            (None, _) => vec![(0, 255)],
            (Some(p), None) => vec![(u32::from(p), u32::from(p))],
            (Some(p), Some(iv)) => iv
                .ranges()
                .iter()
                // Port numbers: below 2^16.
                .map(|&(a, b)| proto_port(p, a as u16, b as u16))
                .collect(),
        };
        return vec![(addrs, second)];
    };
    let fits = |p: u8, q: u16| proto.is_none_or(|x| x == p) && port_ok(q);
    if ingress {
        local_ports
            .iter()
            .filter(|np| np.name == name && fits(np.protocol, np.port))
            .map(|np| {
                (
                    addrs.clone(),
                    vec![proto_port(np.protocol, np.port, np.port)],
                )
            })
            .collect()
    } else {
        res.named(name, v6)
            .iter()
            .filter(|((p, q), _)| fits(*p, *q))
            .map(|((p, q), holders)| (addrs.intersect(holders), vec![proto_port(*p, *q, *q)]))
            .filter(|(a, _)| !a.is_empty())
            .collect()
    }
}

/// The elements of a run's two sets in family `v6` (the rules' actions
/// play no part): the portless shape
/// (address × protocol range) and the port shape (address × protocol ×
/// port range), as disjoint boxes.
pub fn run_pieces(
    rules: &[Rule],
    v6: bool,
    ingress: bool,
    local_ports: &[NamedPort],
    res: &mut Resolver<'_>,
) -> (Vec<Piece>, Vec<Piece>) {
    let mut portless = Vec::new();
    let mut ported = Vec::new();
    for r in rules {
        let e = entries(r, v6, ingress, local_ports, res);
        if has_ports(r) {
            ported.extend(e);
        } else {
            portless.extend(e);
        }
    }
    (boxes::disjoint(&portless, 8), boxes::disjoint(&ported, 16))
}
