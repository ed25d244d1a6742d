//! Compilation: from IR policies and the cluster's endpoints to the
//! nftables objects one node needs. Pure.
//!
//! The shape (table `inet tartan`, see [`render`]):
//! - every distinct endpoint selector a rule uses becomes a named set of
//!   addresses per IP family (`s<hash>4`, `s<hash>6`), shared by every rule
//!   that uses it; every named port a rule uses becomes a set of
//!   `address . protocol . port` (`n<hash>4`, `n<hash>6`);
//! - each policy that applies to an endpoint of this node has a chain per
//!   direction it governs (`pi<hash>`, `pe<hash>`), named after the policy,
//!   so a changed policy changes only its chains;
//! - endpoints with the same ordered list of policies share a profile
//!   chain (`qi<hash>`, `qe<hash>`) that jumps to each policy in order;
//!   verdict maps keyed by interface send a packet to its endpoint's
//!   profile, so a pod created or relabelled into an existing profile
//!   changes only set and map elements.
//!
//! Semantics, per direction and endpoint: the policies that select the
//! endpoint and govern the direction are taken in order (lower `order`
//! first, Kubernetes NetworkPolicies at 1000, Tartan policies without an
//! order last; ties by name). The first Allow or Deny decides; Log logs
//! and goes on; Pass skips the remaining Tartan policies (Kubernetes
//! policies still apply, and with none selecting the endpoint the packet
//! is allowed). When no rule decides, the packet is dropped. An endpoint
//! no policy selects in a direction is open in that direction.

pub mod render;
pub mod stmt;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use nftables::expr::{Expression, MetaKey};

use crate::ir::{Addrs, Cond, EndpointSel, Policy, Rule, Side};
use crate::model::{Action, Namespaces};
use stmt::*;

/// The label Kubernetes gives every namespace: its name. Assumed for a
/// namespace whose object has not been seen.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A container port with a name, for policies that name ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NamedPort {
    pub name: String,
    /// IP protocol number (6, 17, 132).
    pub protocol: u8,
    pub port: u16,
}

/// One pod interface anywhere in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub addrs: Vec<IpAddr>,
    pub ports: Vec<NamedPort>,
    /// The host end of its veth when it is on this node.
    pub interface: Option<String>,
}

/// Namespace name → its labels.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

impl EndpointSel {
    pub fn matches(&self, ep: &Endpoint, namespaces: &NamespaceLabels) -> bool {
        let ns_ok = match &self.namespaces {
            Namespaces::Named(n) => *n == ep.namespace,
            Namespaces::Selected(sel) => match namespaces.get(&ep.namespace) {
                Some(labels) => sel.matches(labels),
                None => sel.matches(&BTreeMap::from([(
                    NAMESPACE_NAME_LABEL.to_string(),
                    ep.namespace.clone(),
                )])),
            },
        };
        ns_ok && self.pods.matches(&ep.labels)
    }
}

/// The element type of a named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetKind {
    /// `ipv4_addr` / `ipv6_addr`.
    Addr { v6: bool },
    /// `ipv4_addr . inet_proto . inet_service` (or IPv6).
    Port { v6: bool },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    Addr(IpAddr),
    Port(IpAddr, u8, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDef {
    pub kind: SetKind,
    pub elements: BTreeSet<Element>,
}

/// What one node's policy table should hold (besides its fixed chains).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ruleset {
    pub sets: BTreeMap<String, SetDef>,
    /// Policy and profile chains: name → rules (shared with the compile
    /// cache, so an unchanged chain is not copied).
    pub chains: BTreeMap<String, Arc<Vec<Stmts>>>,
    /// Interface → chain for traffic to the endpoint (ingress).
    pub to_endpoint: BTreeMap<String, String>,
    /// Interface → chain for traffic from the endpoint (egress).
    pub from_endpoint: BTreeMap<String, String>,
}

/// The chain of an endpoint no policy selects in a direction: empty, so
/// the packet goes on.
pub const OPEN_CHAIN: &str = "open";

/// A short stable name part (FNV-1a, 48 bits): the same input gives the
/// same name in every felix, across restarts and versions.
pub fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:012x}", h & 0xffff_ffff_ffff)
}

fn fam(v6: bool) -> &'static str {
    if v6 { "6" } else { "4" }
}

pub fn selector_set(sel: &EndpointSel, v6: bool) -> String {
    format!("s{}{}", hash(&sel.to_string()), fam(v6))
}

pub fn named_port_set(name: &str, v6: bool) -> String {
    format!("n{}{}", hash(name), fam(v6))
}

/// The chain of `policy` for one direction.
pub fn policy_chain(p: &Policy, ingress: bool) -> String {
    format!(
        "p{}{}",
        if ingress { "i" } else { "e" },
        hash(&p.source.to_string())
    )
}

/// Sets the compiled rules refer to.
#[derive(Default)]
struct Needs {
    selectors: BTreeSet<EndpointSel>,
    named_ports: BTreeSet<String>,
    /// The IP families to write rules and sets for: those some endpoint
    /// has an address of (a pod without an IPv6 address sends and
    /// receives no IPv6 packet, so rules for it would be dead weight).
    families: Vec<bool>,
}

impl Needs {
    fn for_endpoints(endpoints: &[Endpoint]) -> Needs {
        let mut families = Vec::new();
        for v6 in [false, true] {
            if endpoints
                .iter()
                .any(|e| e.addrs.iter().any(|a| a.is_ipv6() == v6))
            {
                families.push(v6);
            }
        }
        Needs {
            families,
            ..Needs::default()
        }
    }
}

fn addr_field(v6: bool, side: Side) -> Expression<'static> {
    let proto = if v6 { "ip6" } else { "ip" };
    match side {
        Side::Source => payload(proto, "saddr"),
        Side::Destination => payload(proto, "daddr"),
    }
}

fn port_field(side: Side) -> Expression<'static> {
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

/// `r` as statements for one family (`v6`), or for both when `v6` is
/// `None`; `None` when the rule cannot match in that family.
fn render_rule(r: &Rule, v6: Option<bool>, log_prefix: &str, needs: &mut Needs) -> Option<Stmts> {
    let mut out: Stmts = Vec::new();
    if let Some(v6) = v6 {
        out.push(matches(
            meta(MetaKey::Nfproto),
            s(if v6 { "ipv6" } else { "ipv4" }),
            true,
        ));
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
                    (Some(c), true) => out.push(matches(
                        concat(vec![payload(proto, "type"), payload(proto, "code")]),
                        concat(vec![t, Expression::Number(u32::from(*c))]),
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
                        out.push(matches(
                            addr_field(v6, *side),
                            one_or_set(of_family.into_iter().map(prefix).collect()),
                            !negate,
                        ));
                    }
                    Addrs::Endpoints(sel) => {
                        needs.selectors.insert(sel.clone());
                        out.push(matches(
                            addr_field(v6, *side),
                            s(format!("@{}", selector_set(sel, v6))),
                            !negate,
                        ));
                    }
                }
            }
            Cond::Ports {
                side,
                ranges,
                negate,
            } => out.push(matches(
                port_field(*side),
                one_or_set(ranges.iter().map(|(a, b)| port_range(*a, *b)).collect()),
                !negate,
            )),
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
        Action::Allow => out.extend([set_mark(MARK_ALLOW), ret()]),
        Action::Deny => out.push(drop()),
        Action::Pass => out.extend([set_mark(MARK_PASS), ret()]),
        Action::Log => out.push(log(log_prefix)),
    }
    Some(out)
}

/// A policy's rules for one direction, as a chain's rules.
pub fn policy_rules(p: &Policy, ingress: bool) -> Vec<Stmts> {
    let mut needs = Needs {
        families: vec![false, true],
        ..Needs::default()
    };
    policy_rules_needing(p, ingress, &mut needs)
}

fn policy_rules_needing(p: &Policy, ingress: bool, needs: &mut Needs) -> Vec<Stmts> {
    let rules = if ingress { &p.ingress } else { &p.egress };
    let prefix = format!(
        "tartan {} {}: ",
        p.source,
        if ingress { "in" } else { "out" }
    );
    let mut out = Vec::new();
    for r in rules.iter().flatten() {
        if family_specific(r) {
            for v6 in needs.families.clone() {
                out.extend(render_rule(r, Some(v6), &prefix, needs));
            }
        } else {
            out.extend(render_rule(r, None, &prefix, needs));
        }
    }
    out
}

/// A profile chain: the policies (indices into the sorted list) in order.
fn profile_rules(policies: &[&Policy], list: &[usize], ingress: bool) -> Vec<Stmts> {
    let mut out = vec![vec![clear_marks()]];
    let mut may_have_passed = false;
    for &i in list {
        let p = policies[i];
        let chain = policy_chain(p, ingress);
        if may_have_passed && !p.source.is_kubernetes() {
            out.push(vec![mark_is(MARK_PASS, false), jump(&chain)]);
        } else {
            out.push(vec![jump(&chain)]);
        }
        out.push(vec![mark_is(MARK_ALLOW, true), ret()]);
        may_have_passed |= p.can_pass(ingress);
    }
    if may_have_passed && !list.iter().any(|&i| policies[i].source.is_kubernetes()) {
        out.push(vec![mark_is(MARK_PASS, true), ret()]);
    }
    out.push(vec![drop()]);
    out
}

/// A policy chain as rendered, with the sets its rules use.
#[derive(Debug, Clone)]
struct CachedChain {
    policy: Policy,
    families: Vec<bool>,
    rules: Arc<Vec<Stmts>>,
    selectors: Vec<EndpointSel>,
    named_ports: Vec<String>,
}

/// Policy chains rendered by earlier compiles, kept by whoever compiles
/// again and again (felix): a chain whose policy and IP families are
/// unchanged is reused, not rendered afresh. Rendering every chain was
/// most of a compile at 2,000 policies. Entries not used by the latest
/// compile are dropped.
#[derive(Debug, Default, Clone)]
pub struct CompileCache {
    chains: std::collections::HashMap<(String, bool), CachedChain>,
}

/// `p`'s rules for one direction, from `cache` when it holds them for
/// this policy and these families; the sets they use added to `needs`.
fn cached_policy_rules(
    cache: &mut CompileCache,
    name: &str,
    p: &Policy,
    ingress: bool,
    needs: &mut Needs,
) -> Arc<Vec<Stmts>> {
    use std::collections::hash_map::Entry;
    let render = |needs: &Needs| {
        let mut own = Needs {
            families: needs.families.clone(),
            ..Needs::default()
        };
        let rules = Arc::new(policy_rules_needing(p, ingress, &mut own));
        CachedChain {
            policy: p.clone(),
            families: needs.families.clone(),
            rules,
            selectors: own.selectors.into_iter().collect(),
            named_ports: own.named_ports.into_iter().collect(),
        }
    };
    let c = match cache.chains.entry((name.to_string(), ingress)) {
        Entry::Occupied(mut e) => {
            if e.get().policy != *p || e.get().families != needs.families {
                e.insert(render(needs));
            }
            e.into_mut()
        }
        Entry::Vacant(e) => e.insert(render(needs)),
    };
    needs.selectors.extend(c.selectors.iter().cloned());
    needs.named_ports.extend(c.named_ports.iter().cloned());
    c.rules.clone()
}

/// The union of two ascending lists of indices, ascending.
fn merge_sorted(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let take_a = j == b.len() || (i < a.len() && a[i] <= b[j]);
        if take_a {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out
}

/// Everything this node's table should hold. `endpoints` are every
/// endpoint of the cluster (for the address sets); those with an
/// interface are this node's.
pub fn compile<'a>(
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[Endpoint],
    namespaces: &NamespaceLabels,
) -> Ruleset {
    compile_cached(
        &mut CompileCache::default(),
        policies,
        endpoints,
        namespaces,
    )
}

/// [`compile`], reusing the policy chains in `cache` that are unchanged.
pub fn compile_cached<'a>(
    cache: &mut CompileCache,
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[Endpoint],
    namespaces: &NamespaceLabels,
) -> Ruleset {
    let mut sorted: Vec<&Policy> = policies.into_iter().collect();
    // The key formats the policy's name: once per policy, not per
    // comparison.
    sorted.sort_by_cached_key(|p| p.sort_key());
    // Chain names hash the policy's name: once per policy and direction.
    let mut chain_names: Vec<[Option<String>; 2]> = vec![[None, None]; sorted.len()];
    let mut chain_name = |i: usize, ingress: bool| -> String {
        chain_names[i][usize::from(ingress)]
            .get_or_insert_with(|| policy_chain(sorted[i], ingress))
            .clone()
    };
    // Most policies apply in one namespace only: index them so an
    // endpoint is tested against its namespace's policies and the
    // cluster-wide ones, not against every policy (2,000 policies × 50
    // local endpoints × 2 directions was most of a compile).
    let mut in_namespace: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut cluster_wide: Vec<usize> = Vec::new();
    for (i, p) in sorted.iter().enumerate() {
        match &p.applies_to.namespaces {
            Namespaces::Named(n) => in_namespace.entry(n.as_str()).or_default().push(i),
            Namespaces::Selected(_) => cluster_wide.push(i),
        }
    }
    let mut rs = Ruleset::default();
    let mut needs = Needs::for_endpoints(endpoints);
    let mut compiled: BTreeSet<(usize, bool)> = BTreeSet::new();
    for ep in endpoints {
        let Some(iface) = &ep.interface else { continue };
        let own = in_namespace
            .get(ep.namespace.as_str())
            .map_or(&[][..], Vec::as_slice);
        let candidates = merge_sorted(own, &cluster_wide);
        for ingress in [true, false] {
            let list: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    let p = sorted[i];
                    (if ingress { &p.ingress } else { &p.egress }).is_some()
                        && p.applies_to.matches(ep, namespaces)
                })
                .collect();
            let chain = if list.is_empty() {
                OPEN_CHAIN.to_string()
            } else {
                let names: Vec<String> = list.iter().map(|&i| chain_name(i, ingress)).collect();
                let name = format!(
                    "q{}{}",
                    if ingress { "i" } else { "e" },
                    hash(&names.join(","))
                );
                if !rs.chains.contains_key(&name) {
                    rs.chains.insert(
                        name.clone(),
                        Arc::new(profile_rules(&sorted, &list, ingress)),
                    );
                }
                for (&i, name) in list.iter().zip(names) {
                    if compiled.insert((i, ingress)) {
                        let rules =
                            cached_policy_rules(cache, &name, sorted[i], ingress, &mut needs);
                        rs.chains.insert(name, rules);
                    }
                }
                name
            };
            let map = if ingress {
                &mut rs.to_endpoint
            } else {
                &mut rs.from_endpoint
            };
            map.insert(iface.clone(), chain);
        }
    }
    // Keep only what this compile used.
    // (A policy chain's name already tells its direction.)
    cache
        .chains
        .retain(|(name, _), _| rs.chains.contains_key(name));
    let mut by_namespace: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for ep in endpoints {
        by_namespace
            .entry(ep.namespace.as_str())
            .or_default()
            .push(ep);
    }
    let all: Vec<&Endpoint> = endpoints.iter().collect();
    for sel in &needs.selectors {
        // A selector in one namespace need only look at that namespace.
        let pool = match &sel.namespaces {
            Namespaces::Named(n) => by_namespace.get(n.as_str()).map_or(&[][..], Vec::as_slice),
            Namespaces::Selected(_) => all.as_slice(),
        };
        for &v6 in &needs.families {
            let elements = pool
                .iter()
                .filter(|ep| sel.matches(ep, namespaces))
                .flat_map(|ep| ep.addrs.iter())
                .filter(|a| a.is_ipv6() == v6)
                .map(|a| Element::Addr(*a))
                .collect();
            rs.sets.insert(
                selector_set(sel, v6),
                SetDef {
                    kind: SetKind::Addr { v6 },
                    elements,
                },
            );
        }
    }
    for name in &needs.named_ports {
        for &v6 in &needs.families {
            let mut elements = BTreeSet::new();
            for ep in endpoints {
                for p in ep.ports.iter().filter(|p| p.name == *name) {
                    for a in ep.addrs.iter().filter(|a| a.is_ipv6() == v6) {
                        elements.insert(Element::Port(*a, p.protocol, p.port));
                    }
                }
            }
            rs.sets.insert(
                named_port_set(name, v6),
                SetDef {
                    kind: SetKind::Port { v6 },
                    elements,
                },
            );
        }
    }
    rs
}
