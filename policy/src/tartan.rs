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
//! - Service accounts, as Calico has them (libcalico-go's
//!   `updateprocessors`): felix labels each pod's endpoint with its
//!   service account's name ([`SERVICE_ACCOUNT_LABEL`]) and, once it has
//!   read the ServiceAccount, with its labels under [`SA_LABEL_PREFIX`].
//!   A policy's `serviceAccountSelector` is its selector over those
//!   labels, and'ed to `selector` (in a GlobalNetworkPolicy `all()` there
//!   means "has a service account"). A rule end's `serviceAccounts` is
//!   `names` (the name is one of them) and `selector` (over the labels),
//!   and'ed to the end's `selector`: the same namespace scope, and pods
//!   only (a network set has no service account).

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

/// The label felix gives every endpoint: its namespace (Calico's
/// `projectcalico.org/namespace`).
pub const NAMESPACE_LABEL: &str = "projectcalico.org/namespace";
/// The label felix gives a pod's endpoint: its service account's name
/// (Calico's `projectcalico.org/serviceaccount`).
pub const SERVICE_ACCOUNT_LABEL: &str = "projectcalico.org/serviceaccount";
/// The prefix of the labels felix copies onto a pod's endpoint from its
/// ServiceAccount (Calico's `pcsa.`).
pub const SA_LABEL_PREFIX: &str = "pcsa.";
/// Among those, the service account's name (Calico's
/// `pcsa.projectcalico.org/name`): present once felix has read the
/// ServiceAccount.
pub const SA_NAME_LABEL: &str = "pcsa.projectcalico.org/name";

/// A selector over a service account's labels as one over its pods'
/// endpoints' labels; `all` stands for `all()`.
pub fn service_account_selector(s: &Selector, all: &Selector) -> Selector {
    s.with_key_prefix(SA_LABEL_PREFIX, all)
}

/// Calico's `ServiceAccountMatch` as a selector over endpoints' labels:
/// the name is one of `names` (when given) and the labels match
/// `selector` (when given); `None` when neither is given.
pub fn service_account_match(names: &[String], selector: Option<&Selector>) -> Option<Selector> {
    let names = (!names.is_empty()).then(|| {
        Selector::In(
            SERVICE_ACCOUNT_LABEL.to_string(),
            names.iter().cloned().collect(),
        )
    });
    let labels = selector.map(|s| service_account_selector(s, &Selector::All));
    match (labels, names) {
        (Some(l), Some(n)) => Some(Selector::And(Box::new(l), Box::new(n))),
        (l, n) => l.or(n),
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
    // serviceAccounts narrows the end's selector (Calico: `(sa) && (sel)`,
    // then in the same namespace scope); nothing given matches nothing,
    // never everything.
    let sa = e.service_accounts.as_ref().map(|m| {
        let sel = m
            .given_selector()
            .and_then(|s| p.selector(&format!("{field}.serviceAccounts.selector"), s));
        service_account_match(&m.names, sel.as_ref())
            .unwrap_or(Selector::Not(Box::new(Selector::All)))
    });
    let pods = match (sa.clone(), pods) {
        (Some(sa), Some(pods)) => Some(Selector::And(Box::new(sa), Box::new(pods))),
        (sa, pods) => sa.or(pods),
    };
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
    if let Some(mut sel) = scope(own, ns.clone(), pods) {
        // Service accounts belong to pods.
        sel.net_sets &= sa.is_none();
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

/// A policy's `serviceAccountSelector` over endpoints' labels (`None`:
/// absent or empty, no narrowing).
fn sa_selector(text: Option<&str>, all: &Selector, p: &mut Problems) -> Option<Selector> {
    let text = text.filter(|t| !t.is_empty())?;
    let s = p.selector("spec.serviceAccountSelector", text)?;
    Some(service_account_selector(&s, all))
}

fn and_sa(pods: Selector, sa: Option<Selector>) -> Selector {
    match sa {
        Some(sa) => Selector::And(Box::new(pods), Box::new(sa)),
        None => pods,
    }
}

/// A Tartan NetworkPolicy in the IR; every problem at once if it does not
/// convert.
pub fn from_network_policy(np: &NetworkPolicy) -> Result<Policy, PolicyError> {
    let ns = np.metadata.namespace.as_deref().unwrap_or("default");
    let name = np.metadata.name.as_deref().unwrap_or("");
    let s = &np.spec;
    let mut p = Problems(Vec::new());
    let sa = sa_selector(
        s.service_account_selector.as_deref(),
        &Selector::All,
        &mut p,
    );
    let applies_to = p
        .selector("spec.selector", &s.selector)
        .map(|pods| and_sa(pods, sa))
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
    // Calico reads `all()` in a GlobalNetworkPolicy's
    // serviceAccountSelector as "has a service account".
    let has_sa = Selector::Has(SERVICE_ACCOUNT_LABEL.to_string());
    let sa = sa_selector(s.service_account_selector.as_deref(), &has_sa, &mut p);
    let pods = p
        .selector("spec.selector", &s.selector)
        .map(|pods| and_sa(pods, sa));
    // Calico reads a non-empty namespaceSelector as one over the
    // endpoint's namespace: even `all()` means "has a namespace", so such
    // a policy never selects a host endpoint. Only an absent (or empty)
    // one stays `Selector::All`, the mark `compile::host::selects_host`
    // looks for; a given `all()` is recorded as "has the namespace name
    // label", which every namespace has (and which selects the same pods).
    let namespaces = match s.namespace_selector.as_deref() {
        None => Some(Selector::All),
        Some("") => Some(Selector::All),
        Some(t) => p.selector("spec.namespaceSelector", t).map(|ns| match ns {
            Selector::All => Selector::Has(crate::compile::NAMESPACE_NAME_LABEL.to_string()),
            ns => ns,
        }),
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
