//! A policy's rules for one direction as profile chains take them: runs
//! of rules each written as one set lookup (see [`super::merge`]), and
//! rules written as they are, with the sets they refer to. Pure.

use std::collections::BTreeSet;

use ipnet::IpNet;
use nftables::expr::{Expression, MetaKey};
use nftables::stmt::Statement;

use super::stmt::*;
use super::{Families, merge, named_port_set, selector_set};
use crate::ir::{Addrs, Cond, EndpointSel, Policy, Rule, Side};
use crate::model::Action;

/// Sets the compiled rules refer to.
#[derive(Default)]
pub(super) struct Needs {
    pub(super) selectors: BTreeSet<EndpointSel>,
    pub(super) named_ports: BTreeSet<String>,
    /// The IP families to write rules and sets for: those some endpoint
    /// has an address of (a pod without an IPv6 address sends and
    /// receives no IPv6 packet, so rules for it would be dead weight).
    pub(super) families: Vec<bool>,
    /// Selector address sets in their interval form (some network set
    /// has networks; see [`super::SetKind::Addr`]).
    pub(super) ranges: bool,
}

impl Needs {
    pub(super) fn for_families(f: Families) -> Needs {
        Needs {
            families: [(f.v4, false), (f.v6, true)]
                .into_iter()
                .filter_map(|(has, v6)| has.then_some(v6))
                .collect(),
            ..Needs::default()
        }
    }
}

pub(super) fn addr_field(v6: bool, side: Side) -> Expression<'static> {
    let proto = if v6 { "ip6" } else { "ip" };
    match side {
        Side::Source => payload(proto, "saddr"),
        Side::Destination => payload(proto, "daddr"),
    }
}

pub(super) fn port_field(side: Side) -> Expression<'static> {
    match side {
        Side::Source => payload("th", "sport"),
        Side::Destination => payload("th", "dport"),
    }
}

fn family_specific(r: &Rule) -> bool {
    r.conds.iter().any(|c| {
        matches!(
            c,
            Cond::IpVersion(_) | Cond::Icmp { .. } | Cond::Addr { .. } | Cond::NamedPort { .. }
        )
    })
}

/// Stands for a Pass rule's verdict until the profile it lands in is
/// known (a Pass goes on to that profile's Kubernetes policies).
pub(super) const PASS_TARGET: &str = "\u{0}pass";

/// `r` as statements for one family (`v6`), or for both when `v6` is
/// `None`; `None` when the rule cannot match in that family.
fn render_rule(r: &Rule, v6: Option<bool>, log_prefix: &str, needs: &mut Needs) -> Option<Stmts> {
    let mut out: Stmts = Vec::new();
    if let Some(v6) = v6 {
        out.push(nfproto(v6));
    }
    for c in &r.conds {
        match c {
            Cond::IpVersion(v) => {
                if v6.is_some_and(|v6| (*v == 6) != v6) {
                    return None;
                }
            }
            Cond::Protocol { number, negate } => out.push(matches(
                meta(MetaKey::L4proto),
                Expression::Number(u32::from(*number)),
                !negate,
            )),
            Cond::Icmp {
                v6: icmp6,
                icmp_type,
                code,
                negate,
            } => {
                if v6 != Some(*icmp6) {
                    if *negate {
                        continue;
                    }
                    return None;
                }
                let proto = if *icmp6 { "icmpv6" } else { "icmp" };
                let t = Expression::Number(u32::from(*icmp_type));
                match (code, negate) {
                    (None, _) => out.push(matches(payload(proto, "type"), t, !negate)),
                    (Some(c), false) => {
                        out.push(matches(payload(proto, "type"), t, true));
                        out.push(matches(
                            payload(proto, "code"),
                            Expression::Number(u32::from(*c)),
                            true,
                        ));
                    }
                    // nft takes a concatenation compared with a set, not
                    // with a single value.
                    (Some(c), true) => out.push(matches(
                        concat(vec![payload(proto, "type"), payload(proto, "code")]),
                        Expression::Named(nftables::expr::NamedExpression::Set(vec![
                            nftables::expr::SetItem::Element(concat(vec![
                                t,
                                Expression::Number(u32::from(*c)),
                            ])),
                        ])),
                        false,
                    )),
                }
            }
            Cond::Addr {
                side,
                addrs,
                negate,
            } => {
                let v6 = v6?;
                match addrs {
                    Addrs::Nets(nets) => {
                        let of_family: Vec<&IpNet> = nets
                            .iter()
                            .filter(|n| matches!(n, IpNet::V6(_)) == v6)
                            .collect();
                        if of_family.is_empty() {
                            if *negate {
                                continue;
                            }
                            return None;
                        }
                        if *negate {
                            // Not in any: one match per network (no
                            // anonymous set, which only `nft` writes).
                            for n in of_family {
                                out.push(matches(addr_field(v6, *side), prefix(n), false));
                            }
                        } else {
                            out.push(matches(
                                addr_field(v6, *side),
                                one_or_set(of_family.into_iter().map(prefix).collect()),
                                true,
                            ));
                        }
                    }
                    Addrs::Endpoints(sel) => {
                        needs.selectors.insert(sel.clone());
                        out.push(matches(
                            addr_field(v6, *side),
                            s(format!("@{}", selector_set(sel, v6, needs.ranges))),
                            !negate,
                        ));
                    }
                }
            }
            Cond::Ports {
                side,
                ranges,
                negate,
            } => {
                if *negate {
                    for (a, b) in ranges {
                        out.push(matches(port_field(*side), port_range(*a, *b), false));
                    }
                } else {
                    out.push(matches(
                        port_field(*side),
                        one_or_set(ranges.iter().map(|(a, b)| port_range(*a, *b)).collect()),
                        true,
                    ));
                }
            }
            Cond::NamedPort { side, name, negate } => {
                let v6 = v6?;
                needs.named_ports.insert(name.clone());
                out.push(matches(
                    concat(vec![
                        addr_field(v6, *side),
                        meta(MetaKey::L4proto),
                        port_field(*side),
                    ]),
                    s(format!("@{}", named_port_set(name, v6))),
                    !negate,
                ));
            }
        }
    }
    match r.action {
        Action::Allow => out.push(accept()),
        Action::Deny => out.push(drop()),
        Action::Pass => out.push(goto(PASS_TARGET)),
        Action::Log => out.push(log(log_prefix)),
    }
    Some(out)
}

pub(super) fn nfproto(v6: bool) -> Statement<'static> {
    matches(
        meta(MetaKey::Nfproto),
        s(if v6 { "ipv6" } else { "ipv4" }),
        true,
    )
}

/// A policy's rules for one direction, in order: runs of rules written
/// as one set lookup, and rules written as they are.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Run {
    /// Consecutive mergeable rules with the same action, Allow or Deny,
    /// or one mergeable Log rule (see [`merge`]).
    Merged { action: Action, rules: Vec<Rule> },
    /// One rule, as statements for each IP family it needs (a Pass rule's
    /// verdict still [`PASS_TARGET`]).
    Written(Vec<Stmts>),
}

/// What a policy's Log rules write before the packet's headers.
pub(super) fn log_prefix(p: &Policy, ingress: bool) -> String {
    format!(
        "tartan {} {}: ",
        p.source,
        if ingress { "in" } else { "out" }
    )
}

pub(super) fn policy_runs(p: &Policy, ingress: bool, needs: &mut Needs) -> Vec<Run> {
    let rules = if ingress { &p.ingress } else { &p.egress };
    let prefix = log_prefix(p, ingress);
    let mut out: Vec<Run> = Vec::new();
    for r in rules.iter().flatten() {
        if merge::mergeable(r, ingress) {
            if let Some(Run::Merged { action, rules }) = out.last_mut()
                && *action == r.action
                && r.action != Action::Log
            {
                rules.push(r.clone());
                continue;
            }
            out.push(Run::Merged {
                action: r.action,
                rules: vec![r.clone()],
            });
            continue;
        }
        let written: Vec<Stmts> = if family_specific(r) {
            needs
                .families
                .clone()
                .into_iter()
                .filter_map(|v6| render_rule(r, Some(v6), &prefix, needs))
                .collect()
        } else {
            render_rule(r, None, &prefix, needs).into_iter().collect()
        };
        out.push(Run::Written(written));
    }
    out
}
