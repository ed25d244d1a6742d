//! Tartan's NetworkPolicy and GlobalNetworkPolicy into the IR.
//!
//! - A NetworkPolicy applies to pods of its namespace matching `selector`;
//!   a GlobalNetworkPolicy to endpoints matching `selector` in the
//!   namespaces `namespaceSelector` picks (default: every namespace).
//! - In a rule's source or destination, `selector` alone means endpoints
//!   of the policy's namespace (NetworkPolicy) or of any namespace
//!   (GlobalNetworkPolicy); `namespaceSelector` limits it to the namespaces
//!   it picks, and alone means every endpoint there. `notSelector` is the
//!   same scope negated; in a NetworkPolicy, even alone, it keeps the end
//!   in the policy's namespace (a pod there that does not match).
//! - Endpoints there are pods and network sets alike: NetworkSets of the
//!   namespaces in scope, and GlobalNetworkSets when the scope is a
//!   selection that takes in `global()` (a GlobalNetworkPolicy's
//!   `selector` alone, or a `namespaceSelector` such as `global()` or
//!   `all()`). The pods a policy applies to are pods only.
//! - Every condition given must hold; a list (`nets`, `ports`) matches when
//!   one of its items does, a `not` list when none does.
//! - Policies without `order` come after every policy with one.

use ipnet::IpNet;
use tartan_api::resources::common::parse_network_or_address;
use tartan_api::resources::policy::{
    EntityRule, GlobalNetworkPolicy, NetworkPolicy, PolicyType, Port, Rule as ApiRule,
    effective_types,
};

use crate::ir::{Addrs, Cond, EndpointSel, Policy, Rule, Side, Source};
use crate::k8s::PolicyError;
use crate::model::{Action, Namespaces, PolicyProblem};
use crate::selector::Selector;

struct Problems(Vec<PolicyProblem>);

impl Problems {
    fn add(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(PolicyProblem {
            field: field.into(),
            message: message.into(),
        });
    }

    fn selector(&mut self, field: &str, text: &str) -> Option<Selector> {
        match Selector::parse(text) {
            Ok(s) => Some(s),
            Err(e) => {
                self.add(field, e.to_string());
                None
            }
        }
    }
}

fn action(a: tartan_api::resources::policy::Action) -> Action {
    use tartan_api::resources::policy::Action as A;
    match a {
        A::Allow => Action::Allow,
        A::Deny => Action::Deny,
        A::Pass => Action::Pass,
        A::Log => Action::Log,
    }
}

/// The scope of an endpoint rule's selectors: the policy's own namespace
/// (NetworkPolicy) or none (GlobalNetworkPolicy). A rule's selectors pick
/// network sets as they pick pods.
fn scope(
    own: Option<&str>,
    ns_selector: Option<Selector>,
    pods: Option<Selector>,
) -> Option<EndpointSel> {
    match (ns_selector, pods, own) {
        (None, None, _) => None,
        (Some(ns), pods, _) => Some(EndpointSel {
            namespaces: Namespaces::Selected(ns),
            pods: pods.unwrap_or(Selector::All),
            net_sets: true,
        }),
        (None, Some(pods), Some(own)) => Some(EndpointSel {
            namespaces: Namespaces::Named(own.to_string()),
            pods,
            net_sets: true,
        }),
        (None, Some(pods), None) => Some(EndpointSel {
            namespaces: Namespaces::Selected(everywhere()),
            pods,
            net_sets: true,
        }),
    }
}

/// A GlobalNetworkPolicy rule's scope when it names no namespaces: every
/// namespace and what is in none (GlobalNetworkSets). Written out, since
/// an explicit `namespaceSelector: all()` means every namespace only.
pub fn everywhere() -> Selector {
    Selector::Or(Box::new(Selector::All), Box::new(Selector::Global))
}

fn nets(list: &[String], field: &str, p: &mut Problems) -> Vec<IpNet> {
    list.iter()
        .enumerate()
        .filter_map(|(i, n)| match parse_network_or_address(n) {
            Ok(net) => Some(net),
            Err(e) => {
                p.add(format!("{field}[{i}]"), e);
                None
            }
        })
        .collect()
}

/// Port alternatives for the positive `ports` list: one condition with
/// every numeric range, and one per name (a rule matches if any does).
fn port_alternatives(side: Side, ports: &[Port]) -> Vec<Cond> {
    let mut ranges = Vec::new();
    let mut out = Vec::new();
    for port in ports {
        match port {
            Port::Number(n) => ranges.push((*n, *n)),
            Port::Range(a, b) => ranges.push((*a, *b)),
            Port::Named(n) => out.push(Cond::NamedPort {
                side,
                name: n.clone(),
                negate: false,
            }),
        }
    }
    if !ranges.is_empty() {
        out.insert(
            0,
            Cond::Ports {
                side,
                ranges,
                negate: false,
            },
        );
    }
    out
}

/// The conditions of one end, and its port alternatives (empty: any).
fn entity(
    e: &EntityRule,
    side: Side,
    own: Option<&str>,
    field: &str,
    p: &mut Problems,
) -> (Vec<Cond>, Vec<Cond>) {
    let mut conds = Vec::new();
    let ns = e
        .namespace_selector
        .as_deref()
        .and_then(|s| p.selector(&format!("{field}.namespaceSelector"), s));
    let pods = e
        .selector
        .as_deref()
        .and_then(|s| p.selector(&format!("{field}.selector"), s));
    let not_pods = e
        .not_selector
        .as_deref()
        .and_then(|s| p.selector(&format!("{field}.notSelector"), s));
    let positive = nets(&e.nets, &format!("{field}.nets"), p);
    if !positive.is_empty() {
        conds.push(Cond::Addr {
            side,
            addrs: Addrs::Nets(positive),
            negate: false,
        });
    }
    let negative = nets(&e.not_nets, &format!("{field}.notNets"), p);
    if !negative.is_empty() {
        conds.push(Cond::Addr {
            side,
            addrs: Addrs::Nets(negative),
            negate: true,
        });
    }
    // In a NetworkPolicy any selector field, a lone notSelector included,
    // keeps the end inside the policy's namespace (as Calico does): a
    // lone notSelector means "a pod of this namespace that does not match".
    let pods = match (&pods, &not_pods, own) {
        (None, Some(_), Some(_)) => Some(Selector::All),
        _ => pods,
    };
    if let Some(sel) = scope(own, ns.clone(), pods) {
        conds.push(Cond::Addr {
            side,
            addrs: Addrs::Endpoints(sel),
            negate: false,
        });
    }
    if let Some(not) = not_pods
        && let Some(sel) = scope(own, ns, Some(not))
    {
        conds.push(Cond::Addr {
            side,
            addrs: Addrs::Endpoints(sel),
            negate: true,
        });
    }
    let mut not_ranges = Vec::new();
    for port in &e.not_ports {
        match port {
            Port::Number(n) => not_ranges.push((*n, *n)),
            Port::Range(a, b) => not_ranges.push((*a, *b)),
            Port::Named(n) => conds.push(Cond::NamedPort {
                side,
                name: n.clone(),
                negate: true,
            }),
        }
    }
    if !not_ranges.is_empty() {
        conds.push(Cond::Ports {
            side,
            ranges: not_ranges,
            negate: true,
        });
    }
    (conds, port_alternatives(side, &e.ports))
}

fn rule(r: &ApiRule, own: Option<&str>, field: &str, p: &mut Problems) -> Vec<Rule> {
    let mut conds = Vec::new();
    if let Some(v) = r.ip_version {
        conds.push(Cond::IpVersion(v));
    }
    if let Some(proto) = r.protocol {
        conds.push(Cond::Protocol {
            number: proto.number(),
            negate: false,
        });
    }
    if let Some(proto) = r.not_protocol {
        conds.push(Cond::Protocol {
            number: proto.number(),
            negate: true,
        });
    }
    let v6 = r.protocol.is_some_and(|x| x.number() == 58);
    for (m, negate) in [(&r.icmp, false), (&r.not_icmp, true)] {
        if let Some(m) = m
            && let Some(t) = m.icmp_type
        {
            conds.push(Cond::Icmp {
                v6,
                icmp_type: t,
                code: m.code,
                negate,
            });
        }
    }
    let (src, src_ports) = entity(&r.source, Side::Source, own, &format!("{field}.source"), p);
    let (dst, dst_ports) = entity(
        &r.destination,
        Side::Destination,
        own,
        &format!("{field}.destination"),
        p,
    );
    conds.extend(src);
    conds.extend(dst);
    let alts = |v: Vec<Cond>| -> Vec<Option<Cond>> {
        if v.is_empty() {
            vec![None]
        } else {
            v.into_iter().map(Some).collect()
        }
    };
    let action = action(r.action);
    let (src_alts, dst_alts) = (alts(src_ports), alts(dst_ports));
    let mut out = Vec::new();
    for (i, s) in src_alts.iter().enumerate() {
        for (j, d) in dst_alts.iter().enumerate() {
            let mut c = conds.clone();
            c.extend(s.clone());
            c.extend(d.clone());
            // A packet matching several alternatives of a Log rule (port
            // 80 and a name numbered 80) is logged once: by the first
            // source and the first destination alternative it matches.
            if action == Action::Log {
                let earlier = src_alts[..i].iter().chain(&dst_alts[..j]);
                c.extend(earlier.flatten().map(negated));
            }
            out.push(Rule { action, conds: c });
        }
    }
    out
}

/// A port alternative's opposite.
fn negated(c: &Cond) -> Cond {
    let mut c = c.clone();
    if let Cond::Ports { negate, .. } | Cond::NamedPort { negate, .. } = &mut c {
        *negate = !*negate;
    }
    c
}

#[allow(clippy::too_many_arguments)]
fn convert(
    source: Source,
    order: Option<f64>,
    applies_to: Option<EndpointSel>,
    own: Option<&str>,
    types: &[PolicyType],
    ingress: &[ApiRule],
    egress: &[ApiRule],
    mut p: Problems,
) -> Result<Policy, PolicyError> {
    let types = effective_types(types, ingress, egress);
    let mut conv = |rules: &[ApiRule], field: &str| -> Vec<Rule> {
        rules
            .iter()
            .enumerate()
            .flat_map(|(i, r)| rule(r, own, &format!("{field}[{i}]"), &mut p))
            .collect()
    };
    let ingress = conv(ingress, "spec.ingress");
    let egress = conv(egress, "spec.egress");
    if let Some(o) = order
        && !o.is_finite()
    {
        p.add("spec.order", format!("{o} is not a finite number"));
    }
    match applies_to {
        Some(applies_to) if p.0.is_empty() => Ok(Policy {
            source,
            order: order.unwrap_or(f64::INFINITY),
            applies_to,
            ingress: types.contains(&PolicyType::Ingress).then_some(ingress),
            egress: types.contains(&PolicyType::Egress).then_some(egress),
        }),
        _ => Err(PolicyError {
            name: source.to_string(),
            problems: p.0,
        }),
    }
}

/// A Tartan NetworkPolicy in the IR; every problem at once if it does not
/// convert.
pub fn from_network_policy(np: &NetworkPolicy) -> Result<Policy, PolicyError> {
    let ns = np.metadata.namespace.as_deref().unwrap_or("default");
    let name = np.metadata.name.as_deref().unwrap_or("");
    let s = &np.spec;
    let mut p = Problems(Vec::new());
    let applies_to = p
        .selector("spec.selector", &s.selector)
        .map(|pods| EndpointSel {
            namespaces: Namespaces::Named(ns.to_string()),
            pods,
            net_sets: false,
        });
    convert(
        Source::Namespaced(ns.to_string(), name.to_string()),
        s.order,
        applies_to,
        Some(ns),
        &s.types,
        &s.ingress,
        &s.egress,
        p,
    )
}

/// A GlobalNetworkPolicy in the IR.
pub fn from_global_network_policy(g: &GlobalNetworkPolicy) -> Result<Policy, PolicyError> {
    let name = g.metadata.name.as_deref().unwrap_or("");
    let s = &g.spec;
    let mut p = Problems(Vec::new());
    let pods = p.selector("spec.selector", &s.selector);
    let namespaces = match s.namespace_selector.as_deref() {
        None => Some(Selector::All),
        Some(t) => p.selector("spec.namespaceSelector", t),
    };
    let applies_to = match (pods, namespaces) {
        (Some(pods), Some(ns)) => Some(EndpointSel {
            namespaces: Namespaces::Selected(ns),
            pods,
            net_sets: false,
        }),
        _ => None,
    };
    convert(
        Source::Global(name.to_string()),
        s.order,
        applies_to,
        None,
        &s.types,
        &s.ingress,
        &s.egress,
        p,
    )
}
