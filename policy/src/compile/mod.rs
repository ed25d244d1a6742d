//! Compilation: from IR policies and the cluster's endpoints to the
//! nftables objects one node needs. Pure.
//!
//! The shape (table `inet tartan`, see [`render`]):
//! - endpoints with the same ordered list of policies (and, for ingress,
//!   the same numbers for the named ports those policies use) share a
//!   profile chain (`qi<hash>`, `qe<hash>`); verdict maps keyed by
//!   interface send a packet to its endpoint's profile, so a pod created
//!   or relabelled into an existing profile changes only set and map
//!   elements;
//! - a profile chain holds its policies' rules in order. A run of
//!   consecutive rules with the same action (Allow or Deny) that look only
//!   at the peer's address, the protocol and the destination port is one
//!   lookup in an interval set of disjoint (address, protocol, port) boxes
//!   (`r<hash>a4`, `r<hash>p4`, see [`merge`]): Kubernetes policies are
//!   all such runs, so a packet's cost does not grow with their number.
//!   The sets are named after the rules they hold, so profiles with the
//!   same run share them, and a changed policy changes their elements and
//!   the chains of the profiles that use it. A Log rule of that shape is
//!   a run of its own, its lookup's verdict `log`;
//! - a stretch of consecutive runs sits in its own chain (`x<hash>`)
//!   behind a guard: lookups in a set of the union of the stretch's boxes
//!   (see `guard_stretches`), so a packet outside them skips it;
//! - any other rule (Log matching everything, Pass, ICMP, negated
//!   selectors, local addresses) is written as it is: every distinct endpoint selector such a rule
//!   uses becomes a named set of addresses per IP family (`s<hash>4`,
//!   `s<hash>6`), every named port a set of `address . protocol . port`
//!   (`n<hash>4`, `n<hash>6`).
//!
//! Semantics, per direction and endpoint: the policies that select the
//! endpoint and govern the direction are taken in order (lower `order`
//! first, Kubernetes NetworkPolicies at 1000, Tartan policies without an
//! order last; ties by name). The first Allow or Deny decides; Log logs
//! and goes on; Pass skips the remaining Tartan policies (Kubernetes
//! policies still apply, and with none selecting the endpoint the packet
//! is allowed). When no rule decides, the packet is dropped. An endpoint
//! no policy selects in a direction is open in that direction.

pub mod boxes;
#[cfg(test)]
mod eval_tests;
pub mod merge;
pub mod render;
pub mod stmt;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use nftables::expr::{Expression, MetaKey};
use nftables::stmt::Statement;

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
    /// A run's interval set: `ipv4_addr . inet_proto`, with `ports`
    /// `ipv4_addr . inet_proto . inet_service` (or IPv6).
    Run { v6: bool, ports: bool },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    Addr(IpAddr),
    Port(IpAddr, u8, u16),
    /// A box of a run's set: inclusive ranges of addresses, protocols
    /// and (in the ported shape) ports.
    Span {
        addrs: (IpAddr, IpAddr),
        protos: (u8, u8),
        ports: Option<(u16, u16)>,
    },
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
    /// Profile chains (`q…`) and the chains a Pass goes to (`k…`):
    /// name → rules.
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

/// Stands for a Pass rule's verdict until the profile it lands in is
/// known (a Pass goes on to that profile's Kubernetes policies).
const PASS_TARGET: &str = "\u{0}pass";

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

fn nfproto(v6: bool) -> Statement<'static> {
    matches(
        meta(MetaKey::Nfproto),
        s(if v6 { "ipv6" } else { "ipv4" }),
        true,
    )
}

/// A policy's rules for one direction, in order: runs of rules written
/// as one set lookup, and rules written as they are.
#[derive(Debug, Clone, PartialEq)]
enum Run {
    /// Consecutive mergeable rules with the same action, Allow or Deny,
    /// or one mergeable Log rule (see [`merge`]).
    Merged { action: Action, rules: Vec<Rule> },
    /// One rule, as statements for each IP family it needs (a Pass rule's
    /// verdict still [`PASS_TARGET`]).
    Written(Vec<Stmts>),
}

/// What a policy's Log rules write before the packet's headers.
fn log_prefix(p: &Policy, ingress: bool) -> String {
    format!(
        "tartan {} {}: ",
        p.source,
        if ingress { "in" } else { "out" }
    )
}

fn policy_runs(p: &Policy, ingress: bool, needs: &mut Needs) -> Vec<Run> {
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

/// A policy's runs for one direction, with what they need.
#[derive(Debug, Clone)]
struct CachedPolicy {
    policy: Policy,
    families: Vec<bool>,
    runs: Arc<Vec<Run>>,
    selectors: Vec<EndpointSel>,
    named_ports: Vec<String>,
    /// Named ports of the protected endpoint its merged runs use
    /// (ingress): they are resolved per profile.
    local_names: BTreeSet<String>,
}

/// Policies prepared by earlier compiles, kept by whoever compiles again
/// and again (felix): a policy whose rules and IP families are unchanged
/// is not rendered afresh (rendering every policy was most of a compile
/// at 2,000 policies). Entries not used by the latest compile are
/// dropped.
#[derive(Debug, Default, Clone)]
pub struct CompileCache {
    policies: HashMap<(String, bool), Arc<CachedPolicy>>,
    /// Profiles built, by chain name: rebuilt only when one of their
    /// policies changed.
    profiles: HashMap<String, CachedProfile>,
    /// Run and guard set elements, by stem: computed again only when the
    /// run or the addresses its selectors pick changed.
    run_sets: HashMap<String, CachedRunSets>,
}

#[derive(Debug, Clone)]
struct CachedProfile {
    policies: Vec<Arc<CachedPolicy>>,
    families: Vec<bool>,
    built: Arc<Built>,
}

impl CachedProfile {
    /// Whether building the profile from `policies` in `families` would
    /// give what it holds (a policy unchanged keeps its prepared entry).
    fn same_input(&self, policies: &[Arc<CachedPolicy>], families: &[bool]) -> bool {
        self.families == families
            && self.policies.len() == policies.len()
            && self
                .policies
                .iter()
                .zip(policies)
                .all(|(a, b)| Arc::ptr_eq(a, b))
    }
}

#[derive(Debug, Clone)]
struct CachedRunSets {
    run: Arc<RunSets>,
    families: Vec<bool>,
    inputs: Vec<merge::Input>,
    sets: Vec<(String, SetDef)>,
}

impl CompileCache {
    /// How many policy directions it holds.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }
}

/// `p`'s runs for one direction, from `cache` when it holds them for this
/// policy and these families; the sets its written rules use added to
/// `needs`.
fn cached_policy(
    cache: &mut CompileCache,
    p: &Policy,
    ingress: bool,
    needs: &mut Needs,
) -> Arc<CachedPolicy> {
    use std::collections::hash_map::Entry;
    let render = |needs: &Needs| {
        let mut own = Needs {
            families: needs.families.clone(),
            ..Needs::default()
        };
        let runs = policy_runs(p, ingress, &mut own);
        let mut local_names = BTreeSet::new();
        if ingress {
            for run in &runs {
                if let Run::Merged { rules, .. } = run {
                    for c in rules.iter().flat_map(|r| &r.conds) {
                        if let Cond::NamedPort { name, .. } = c {
                            local_names.insert(name.clone());
                        }
                    }
                }
            }
        }
        Arc::new(CachedPolicy {
            policy: p.clone(),
            families: needs.families.clone(),
            runs: Arc::new(runs),
            selectors: own.selectors.into_iter().collect(),
            named_ports: own.named_ports.into_iter().collect(),
            local_names,
        })
    };
    let c = match cache.policies.entry((p.source.to_string(), ingress)) {
        Entry::Occupied(mut e) => {
            if e.get().policy != *p || e.get().families != needs.families {
                e.insert(render(needs));
            }
            e.get().clone()
        }
        Entry::Vacant(e) => e.insert(render(needs)).clone(),
    };
    needs.selectors.extend(c.selectors.iter().cloned());
    needs.named_ports.extend(c.named_ports.iter().cloned());
    c
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

/// A run of a profile written as set lookups (kept by its sets' name
/// stem): what their elements are computed from.
#[derive(Debug, Clone, PartialEq)]
struct RunSets {
    ingress: bool,
    rules: Vec<Rule>,
    local_ports: Vec<NamedPort>,
}

/// Runs and guards by their sets' name stem.
type Runs = BTreeMap<String, Arc<RunSets>>;

/// What building one profile made: its chains (the profile, its Pass
/// chain, its stretches and guards) and the runs and guards whose sets
/// they use.
#[derive(Debug, Default)]
struct Built {
    chains: BTreeMap<String, Arc<Vec<Stmts>>>,
    runs: Runs,
}

/// The names of a run's two sets in family `v6`.
pub fn run_set(stem: &str, ports: bool, v6: bool) -> String {
    format!("{stem}{}{}", if ports { "p" } else { "a" }, fam(v6))
}

/// Which of a run's two sets exist in family `v6` (portless, ported),
/// from the rules' shape alone, whatever the endpoints: a pod created
/// changes their elements, never the chains.
fn run_shapes(rules: &[Rule], v6: bool) -> (bool, bool) {
    let possible = rules.iter().filter(|r| merge::possible_in(r, v6));
    let (mut portless, mut ported) = (false, false);
    for r in possible {
        if merge::has_ports(r) {
            ported = true;
        } else {
            portless = true;
        }
    }
    (portless, ported)
}

/// One step of a profile chain.
enum Item {
    /// A run written as lookups in its sets, each with `verdict` (`ids`:
    /// the policy runs it joins, `source#index`).
    Run {
        stem: String,
        verdict: Box<Statement<'static>>,
        shapes: Vec<(bool, (bool, bool))>,
        ids: Vec<String>,
    },
    /// A rule written as it is, for each IP family it needs.
    Written(Vec<Stmts>),
    /// Lookups in a guard's sets that lead into a stretch's chain (see
    /// [`guard_stretches`]), or the jump to a chain of such lookups.
    Guard(Vec<Stmts>),
}

/// A run's or guard's lookups: one rule per family and shape present,
/// with `verdict`.
fn lookup_rules(
    stem: &str,
    shapes: &[(bool, (bool, bool))],
    ingress: bool,
    verdict: &Statement<'static>,
) -> Vec<Stmts> {
    let side = if ingress {
        Side::Source
    } else {
        Side::Destination
    };
    let mut out = Vec::new();
    for &(v6, (portless, ported)) in shapes {
        for (present, ports) in [(portless, false), (ported, true)] {
            if !present {
                continue;
            }
            let mut key = vec![addr_field(v6, side), meta(MetaKey::L4proto)];
            if ports {
                key.push(port_field(Side::Destination));
            }
            out.push(vec![
                nfproto(v6),
                matches(
                    concat(key),
                    s(format!("@{}", run_set(stem, ports, v6))),
                    true,
                ),
                verdict.clone(),
            ]);
        }
    }
    out
}

fn render_items<'i>(
    items: impl IntoIterator<Item = &'i Item>,
    ingress: bool,
    pass: &Statement<'static>,
) -> Vec<Stmts> {
    let mut out = Vec::new();
    for it in items {
        match it {
            Item::Run {
                stem,
                verdict,
                shapes,
                ..
            } => out.extend(lookup_rules(stem, shapes, ingress, verdict)),
            Item::Written(stmts) => {
                for st in stmts {
                    let mut st = st.clone();
                    if let Some(last) = st.last_mut()
                        && matches!(last, Statement::Goto(t) if t.target == PASS_TARGET)
                    {
                        *last = pass.clone();
                    }
                    out.push(st);
                }
            }
            Item::Guard(rules) => out.extend(rules.iter().cloned()),
        }
    }
    out
}

/// The chain of a profile that a Pass goes to: its Kubernetes policies.
pub fn pass_chain(profile: &str) -> String {
    format!("k{}", &profile[1..])
}

/// What a profile's runs and guards have in common.
struct ProfileCtx<'a> {
    ingress: bool,
    local_ports: &'a [NamedPort],
    families: &'a [bool],
}

impl ProfileCtx<'_> {
    /// The endpoint's numbers for the named ports `rules` use (ingress):
    /// with the rules, all a run's boxes depend on besides its peers.
    fn ports_of(&self, rules: &[Rule]) -> Vec<NamedPort> {
        let names: BTreeSet<&str> = rules
            .iter()
            .flat_map(|r| &r.conds)
            .filter_map(|c| match c {
                Cond::NamedPort { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        self.local_ports
            .iter()
            .filter(|p| names.contains(p.name.as_str()))
            .cloned()
            .collect()
    }

    /// The name stem of a run's or guard's sets: its direction, the
    /// policy runs it holds and the endpoint's numbers for the named
    /// ports they use, so profiles with the same run share its sets.
    fn stem(&self, kind: &str, ids: &[String], ports: &[NamedPort]) -> String {
        let ports: Vec<String> = ports
            .iter()
            .map(|p| format!("{}={}/{}", p.name, p.protocol, p.port))
            .collect();
        format!(
            "r{}",
            hash(&format!(
                "{kind}{}|{}|{}",
                if self.ingress { "in" } else { "out" },
                ports.join(","),
                ids.join(",")
            ))
        )
    }

    fn shapes(&self, rules: &[Rule]) -> Vec<(bool, (bool, bool))> {
        self.families
            .iter()
            .map(|&v6| (v6, run_shapes(rules, v6)))
            .collect()
    }

    /// Notes the sets of run or guard `stem` holding `rules`' boxes.
    fn note_sets(&self, stem: &str, rules: Vec<Rule>, ports: Vec<NamedPort>, runs: &mut Runs) {
        runs.entry(stem.to_string()).or_insert_with(|| {
            Arc::new(RunSets {
                ingress: self.ingress,
                rules,
                local_ports: ports,
            })
        });
    }
}

/// Puts each stretch of consecutive runs of one segment in a chain
/// of its own (`x…`), entered only by a packet in the union of their
/// boxes: one lookup per family and shape in a guard set (`r…`, like a
/// run's). A packet outside it skips the whole stretch: none of its
/// rules could match. More than one guard lookup goes in a chain of its
/// own (`g…`, each lookup a `goto` into the stretch) entered by `jump`,
/// so the stretch is walked once at most and the profile goes on after
/// it. A rule matching every packet (no condition) ends a stretch, and
/// a stretch is guarded only when that saves lookups.
fn guard_stretches(
    items: Vec<(u8, Item)>,
    ctx: &ProfileCtx<'_>,
    built: &mut Built,
) -> Vec<(u8, Item)> {
    let boxed_rules = |it: &Item| -> Option<Vec<Rule>> {
        let Item::Run { stem, .. } = it else {
            return None;
        };
        let rules = &built.runs.get(stem)?.rules;
        (!rules.iter().any(merge::universal)).then(|| rules.clone())
    };
    // Each item with its rules when it can be guarded.
    let marked: Vec<(u8, Item, Option<Vec<Rule>>)> = items
        .into_iter()
        .map(|(seg, it)| {
            let rules = boxed_rules(&it);
            (seg, it, rules)
        })
        .collect();
    let mut out = Vec::new();
    let mut stretch: Vec<(u8, Item, Vec<Rule>)> = Vec::new();
    let flush =
        |stretch: &mut Vec<(u8, Item, Vec<Rule>)>, out: &mut Vec<(u8, Item)>, built: &mut Built| {
            let taken = std::mem::take(stretch);
            let Some(&(seg, _, _)) = taken.first() else {
                return;
            };
            let mut ids = Vec::new();
            let mut rules = Vec::new();
            for (_, it, r) in &taken {
                if let Item::Run { ids: i, .. } = it {
                    ids.extend(i.iter().cloned());
                }
                rules.extend(r.iter().cloned());
            }
            let shapes = ctx.shapes(&rules);
            let lookups: usize = shapes
                .iter()
                .map(|(_, (a, p))| usize::from(*a) + usize::from(*p))
                .sum();
            // No Pass in a stretch: its verdict does not matter here.
            let body = render_items(taken.iter().map(|(_, it, _)| it), ctx.ingress, &accept());
            if lookups == 0 || body.len() <= 2 * lookups {
                out.extend(taken.into_iter().map(|(s, it, _)| (s, it)));
                return;
            }
            let ports = ctx.ports_of(&rules);
            let stem = ctx.stem("guard|", &ids, &ports);
            let body_chain = format!("x{}", &stem[1..]);
            built
                .chains
                .entry(body_chain.clone())
                .or_insert_with(|| Arc::new(body));
            let entry = if lookups == 1 {
                lookup_rules(&stem, &shapes, ctx.ingress, &jump(&body_chain))
            } else {
                let guard_chain = format!("g{}", &stem[1..]);
                built.chains.entry(guard_chain.clone()).or_insert_with(|| {
                    Arc::new(lookup_rules(
                        &stem,
                        &shapes,
                        ctx.ingress,
                        &goto(&body_chain),
                    ))
                });
                vec![vec![jump(&guard_chain)]]
            };
            ctx.note_sets(&stem, rules, ports, &mut built.runs);
            out.push((seg, Item::Guard(entry)));
        };
    for (seg, it, rules) in marked {
        match rules {
            Some(rules) => {
                if stretch.first().is_some_and(|(s, _, _)| *s != seg) {
                    flush(&mut stretch, &mut out, built);
                }
                stretch.push((seg, it, rules));
            }
            None => {
                flush(&mut stretch, &mut out, built);
                out.push((seg, it));
            }
        }
    }
    flush(&mut stretch, &mut out, built);
    out
}

/// Writes the profile chain `name` for the policies `list` (and its Pass
/// chain when one is needed), noting the runs whose sets it uses.
#[allow(clippy::too_many_arguments)]
fn build_profile(
    name: &str,
    list: &[usize],
    sorted: &[&Policy],
    prepared: &BTreeMap<(usize, bool), Arc<CachedPolicy>>,
    ingress: bool,
    local_ports: &[NamedPort],
    families: &[bool],
    built: &mut Built,
) {
    let ctx = ProfileCtx {
        ingress,
        local_ports,
        families,
    };
    // Segments: Tartan policies before the Kubernetes ones (1), the
    // Kubernetes ones (2), Tartan policies after them (3). Runs never
    // join across segments: a Pass goes on to segment 2 alone.
    let mut items: Vec<(u8, Item)> = Vec::new();
    // The run being joined: its segment, action, verdict, runs, rules.
    type Open = Option<(u8, Action, Statement<'static>, Vec<String>, Vec<Rule>)>;
    let mut open: Open = None;
    let close = |open: &mut Open, items: &mut Vec<(u8, Item)>, runs: &mut Runs| {
        let Some((seg, _, verdict, ids, rules)) = open.take() else {
            return;
        };
        let ports = ctx.ports_of(&rules);
        let stem = ctx.stem("", &ids, &ports);
        let shapes = ctx.shapes(&rules);
        ctx.note_sets(&stem, rules, ports, runs);
        items.push((
            seg,
            Item::Run {
                stem,
                verdict: Box::new(verdict),
                shapes,
                ids,
            },
        ));
    };
    let mut seen_kubernetes = false;
    let mut can_pass = false;
    for &i in list {
        let p = sorted[i];
        let seg = if p.source.is_kubernetes() {
            seen_kubernetes = true;
            2
        } else if seen_kubernetes {
            3
        } else {
            1
        };
        let Some(cp) = prepared.get(&(i, ingress)) else {
            continue;
        };
        let source = p.source.to_string();
        for (k, run) in cp.runs.iter().enumerate() {
            match run {
                Run::Merged { action, rules } => {
                    // Allow and Deny runs join across policies; a Log
                    // run stays alone.
                    if let Some((s, a, _, ids, rs)) = open.as_mut()
                        && *s == seg
                        && a == action
                        && *action != Action::Log
                    {
                        ids.push(format!("{source}#{k}"));
                        rs.extend(rules.iter().cloned());
                        continue;
                    }
                    close(&mut open, &mut items, &mut built.runs);
                    let verdict = match action {
                        Action::Deny => drop(),
                        Action::Log => log(&log_prefix(p, ingress)),
                        _ => accept(),
                    };
                    open = Some((
                        seg,
                        *action,
                        verdict,
                        vec![format!("{source}#{k}")],
                        rules.clone(),
                    ));
                }
                Run::Written(stmts) => {
                    close(&mut open, &mut items, &mut built.runs);
                    can_pass |= stmts.iter().any(
                        |st| matches!(st.last(), Some(Statement::Goto(t)) if t.target == PASS_TARGET),
                    );
                    items.push((seg, Item::Written(stmts.clone())));
                }
            }
        }
    }
    close(&mut open, &mut items, &mut built.runs);
    let items = guard_stretches(items, &ctx, built);
    let pass = if seen_kubernetes {
        goto(&pass_chain(name))
    } else {
        accept()
    };
    let mut chain = render_items(items.iter().map(|(_, it)| it), ingress, &pass);
    chain.push(vec![drop()]);
    built.chains.insert(name.to_string(), Arc::new(chain));
    if can_pass && seen_kubernetes {
        let kube = items.iter().filter(|(s, _)| *s == 2).map(|(_, it)| it);
        let mut chain = render_items(kube, ingress, &pass);
        chain.push(vec![drop()]);
        built.chains.insert(pass_chain(name), Arc::new(chain));
    }
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

/// [`compile`], reusing the policies in `cache` that are unchanged.
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
    let mut ids: Vec<Option<String>> = vec![None; sorted.len()];
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
    let mut prepared: BTreeMap<(usize, bool), Arc<CachedPolicy>> = BTreeMap::new();
    let mut runs: Runs = BTreeMap::new();
    let mut profiles: HashMap<String, CachedProfile> = HashMap::new();
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
                let mut local_names = BTreeSet::new();
                for &i in &list {
                    let cp = prepared
                        .entry((i, ingress))
                        .or_insert_with(|| cached_policy(cache, sorted[i], ingress, &mut needs));
                    local_names.extend(cp.local_names.iter().cloned());
                }
                // The endpoint's numbers for the named ports its merged
                // runs use: part of the profile, as they are in its sets.
                let mut local_ports: Vec<NamedPort> = ep
                    .ports
                    .iter()
                    .filter(|p| local_names.contains(&p.name))
                    .cloned()
                    .collect();
                local_ports.sort();
                local_ports.dedup();
                let mut key: Vec<String> = list
                    .iter()
                    .map(|&i| {
                        ids[i]
                            .get_or_insert_with(|| hash(&sorted[i].source.to_string()))
                            .clone()
                    })
                    .collect();
                key.extend(
                    local_ports
                        .iter()
                        .map(|p| format!("{}={}/{}", p.name, p.protocol, p.port)),
                );
                let name = format!(
                    "q{}{}",
                    if ingress { "i" } else { "e" },
                    hash(&key.join(","))
                );
                if !rs.chains.contains_key(&name) {
                    let policies: Vec<Arc<CachedPolicy>> = list
                        .iter()
                        .map(|&i| prepared[&(i, ingress)].clone())
                        .collect();
                    let built = match cache.profiles.get(&name) {
                        Some(c) if c.same_input(&policies, &needs.families) => c.built.clone(),
                        _ => {
                            let mut built = Built::default();
                            build_profile(
                                &name,
                                &list,
                                &sorted,
                                &prepared,
                                ingress,
                                &local_ports,
                                &needs.families,
                                &mut built,
                            );
                            Arc::new(built)
                        }
                    };
                    for (n, c) in &built.chains {
                        rs.chains.entry(n.clone()).or_insert_with(|| c.clone());
                    }
                    for (n, r) in &built.runs {
                        runs.entry(n.clone()).or_insert_with(|| r.clone());
                    }
                    profiles.insert(
                        name.clone(),
                        CachedProfile {
                            policies,
                            families: needs.families.clone(),
                            built,
                        },
                    );
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
    let kept: BTreeSet<(String, bool)> = prepared
        .keys()
        .map(|&(i, ingress)| (sorted[i].source.to_string(), ingress))
        .collect();
    cache.policies.retain(|k, _| kept.contains(k));
    cache.profiles = profiles;
    let mut res = merge::Resolver::new(endpoints, namespaces);
    let mut run_sets: HashMap<String, CachedRunSets> = HashMap::new();
    for (stem, run) in &runs {
        let inputs = merge::run_inputs(&run.rules, &needs.families, run.ingress, &mut res);
        if let Some(c) = cache.run_sets.remove(stem)
            && (Arc::ptr_eq(&c.run, run) || c.run == *run)
            && c.families == needs.families
            && c.inputs == inputs
        {
            for (n, d) in c.sets.iter() {
                rs.sets.insert(n.clone(), d.clone());
            }
            run_sets.insert(stem.clone(), c);
            continue;
        }
        let mut sets = Vec::new();
        for &v6 in &needs.families {
            let (portless, ported) = run_shapes(&run.rules, v6);
            if !portless && !ported {
                continue;
            }
            let (a, p) = merge::run_pieces(&run.rules, v6, run.ingress, &run.local_ports, &mut res);
            for (present, ports, pieces) in [(portless, false, a), (ported, true, p)] {
                if !present {
                    continue;
                }
                let elements = pieces
                    .into_iter()
                    .map(|((lo, hi), (x, y))| Element::Span {
                        addrs: (boxes::number_addr(lo, v6), boxes::number_addr(hi, v6)),
                        // Protocol numbers and ports: 8 and 16 bits.
                        protos: if ports {
                            ((x >> 16) as u8, (y >> 16) as u8)
                        } else {
                            (x as u8, y as u8)
                        },
                        ports: ports.then_some(((x & 0xffff) as u16, (y & 0xffff) as u16)),
                    })
                    .collect();
                sets.push((
                    run_set(stem, ports, v6),
                    SetDef {
                        kind: SetKind::Run { v6, ports },
                        elements,
                    },
                ));
            }
        }
        for (n, d) in &sets {
            rs.sets.insert(n.clone(), d.clone());
        }
        run_sets.insert(
            stem.clone(),
            CachedRunSets {
                run: run.clone(),
                families: needs.families.clone(),
                inputs,
                sets,
            },
        );
    }
    cache.run_sets = run_sets;
    for sel in &needs.selectors {
        for &v6 in &needs.families {
            let elements = res
                .addresses(sel, v6)
                .into_iter()
                .map(Element::Addr)
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
