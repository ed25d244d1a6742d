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
//!   uses becomes a named set of addresses per IP family: while no
//!   network set has networks, a plain set of the picked pods' addresses
//!   (`s<hash>4`, `s<hash>6`); once one has, an interval set of the
//!   disjoint, merged ranges of the addresses and networks it stands for
//!   (`s<hash>4r`, `s<hash>6r`; see [`SetKind::Addr`]); every named port
//!   a set of `address . protocol . port` (`n<hash>4`, `n<hash>6`).
//!
//! Endpoint selectors ([`EndpointSel`]) stand for addresses: those of the
//! pods they select and, for a selector that picks network sets (a
//! Tartan rule's `selector`, `notSelector` or `namespaceSelector`; never
//! a Kubernetes peer, never the pods a policy applies to), the networks
//! of the [`NetSet`]s they select: a NetworkSet when the selector's
//! namespace scope takes in its namespace (as for a pod: the namespace
//! named, or a selection matching the namespace's labels) and its labels
//! match; a GlobalNetworkSet when the scope is a selection that
//! [`matches_global`](crate::Selector::matches_global) and its labels
//! match. A change in network sets changes only the elements of the sets
//! (run, guard and selector sets) whose selectors pick them, except the
//! first set to have networks and the last to lose them: every selector
//! set then changes form and name, and the chains naming them are
//! written anew.
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
mod building;
mod cache;
#[cfg(test)]
mod eval_tests;
pub mod host;
pub mod merge;
mod prepared;
mod profile;
pub mod render;
mod rules;
pub mod stmt;
#[cfg(test)]
mod tests;

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::ir::{EndpointSel, Policy};
use crate::model::Namespaces;
use building::Building;
use cache::{CachedProfile, CachedRunSets};
use prepared::CachedPolicy;
use profile::{RunSets, Runs, run_shapes};
use rules::Needs;
use stmt::Stmts;

pub use cache::CompileCache;
pub use profile::{pass_chain, run_set};

/// The label Kubernetes gives every namespace: its name. Assumed for a
/// namespace whose object has not been seen.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// A container port with a name, for policies that name ports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamedPort {
    pub name: String,
    /// IP protocol number (6, 17, 132).
    pub protocol: u8,
    pub port: u16,
}

/// One pod interface anywhere in the cluster. The namespace, labels and
/// named ports are shared: the pods of one workload hold the same ones,
/// and a node's agent keeps every endpoint of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub namespace: Arc<str>,
    pub labels: Arc<BTreeMap<String, String>>,
    pub addrs: Vec<IpAddr>,
    pub ports: Arc<[NamedPort]>,
    /// The host end of its veth when it is on this node.
    pub interface: Option<String>,
}

/// Namespace name → its labels.
pub type NamespaceLabels = BTreeMap<String, BTreeMap<String, String>>;

/// A NetworkSet (`namespace` its namespace) or a GlobalNetworkSet
/// (`namespace` `None`): networks that Tartan rules' selectors pick by
/// the set's labels, as they pick pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetSet {
    pub namespace: Option<Arc<str>>,
    pub labels: Arc<BTreeMap<String, String>>,
    /// Shared: a caller keeps its sets and hands the compiler clones.
    pub nets: Arc<[IpNet]>,
}

/// Whether the namespace scope `scope` takes in something of namespace
/// `ns` (`None`: of no namespace, a GlobalNetworkSet). A namespace whose
/// object has not been seen has only its name label; what is of no
/// namespace is taken in by a selection that [`Selector::matches_global`],
/// never by a named namespace.
///
/// [`Selector::matches_global`]: crate::Selector::matches_global
pub fn scope_takes_in(scope: &Namespaces, ns: Option<&str>, namespaces: &NamespaceLabels) -> bool {
    match (scope, ns) {
        (Namespaces::Named(n), Some(ns)) => n == ns,
        (Namespaces::Named(_), None) => false,
        (Namespaces::Selected(sel), Some(ns)) => match namespaces.get(ns) {
            Some(labels) => sel.matches(labels),
            None => sel.matches(&BTreeMap::from([(
                NAMESPACE_NAME_LABEL.to_string(),
                ns.to_string(),
            )])),
        },
        (Namespaces::Selected(sel), None) => sel.matches_global(),
    }
}

impl EndpointSel {
    pub fn matches(&self, ep: &Endpoint, namespaces: &NamespaceLabels) -> bool {
        scope_takes_in(&self.namespaces, Some(&ep.namespace), namespaces)
            && self.pods.matches(&ep.labels)
    }

    /// Whether it picks the network set `set`: only a selector that picks
    /// network sets, by the set's namespace and labels.
    pub fn matches_set(&self, set: &NetSet, namespaces: &NamespaceLabels) -> bool {
        self.net_sets
            && scope_takes_in(&self.namespaces, set.namespace.as_deref(), namespaces)
            && self.pods.matches(&set.labels)
    }
}

/// The element type of a named set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SetKind {
    /// `ipv4_addr` / `ipv6_addr`: the addresses (and, with `ranges`, the
    /// networks) an endpoint selector picks, as [`Element::Range`]s. With
    /// `ranges` an interval set of disjoint, non-adjacent ranges; without
    /// (no network set in the cluster, so the selector picks pods' single
    /// addresses only) a plain set of single addresses, one element each,
    /// which felix writes over netlink.
    Addr { v6: bool, ranges: bool },
    /// `ipv4_addr . inet_proto . inet_service` (or IPv6).
    Port { v6: bool },
    /// A run's interval set: `ipv4_addr . inet_proto`, with `ports`
    /// `ipv4_addr . inet_proto . inet_service` (or IPv6).
    Run { v6: bool, ports: bool },
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Element {
    /// An inclusive range of addresses of an address set: disjoint from,
    /// and not adjacent to, the set's other ranges (one address when both
    /// ends are equal).
    Range(IpAddr, IpAddr),
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
    /// Profile chains (`q…`), the chains a Pass goes to (`k…`), guarded
    /// stretches (`x…`) and their guard chains (`g…`): name → rules.
    pub chains: BTreeMap<String, Arc<Vec<Stmts>>>,
    /// Interface → chain for traffic to the endpoint (ingress).
    pub to_endpoint: BTreeMap<String, String>,
    /// Interface → chain for traffic from the endpoint (egress).
    pub from_endpoint: BTreeMap<String, String>,
    /// Host interface → chain for traffic into the host through it (a
    /// host endpoint's ingress, see [`host`]).
    pub host_in: BTreeMap<String, String>,
    /// Host interface → chain for traffic out of the host through it.
    pub host_out: BTreeMap<String, String>,
    /// The chains (ingress, egress) of every other host interface, when
    /// a `*` host endpoint governs them.
    pub host_all: Option<(String, String)>,
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

/// The address set of `sel` in family `v6`; `ranges` for its interval
/// form (see [`SetKind::Addr`]), named apart so that a change of form
/// writes a new set rather than changing a set's type in place.
pub fn selector_set(sel: &EndpointSel, v6: bool, ranges: bool) -> String {
    let form = if ranges { "r" } else { "" };
    format!("s{}{}{form}", hash(&sel.to_string()), fam(v6))
}

pub fn named_port_set(name: &str, v6: bool) -> String {
    format!("n{}{}", hash(name), fam(v6))
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

/// The sets of run or guard `stem` in `families`, their elements the
/// disjoint boxes of its rules.
fn run_set_defs(
    stem: &str,
    run: &RunSets,
    families: &[bool],
    res: &mut merge::Resolver<'_>,
) -> Vec<(String, SetDef)> {
    let mut sets = Vec::new();
    for &v6 in families {
        let (portless, ported) = run_shapes(&run.rules, v6);
        if !portless && !ported {
            continue;
        }
        let (a, p) = merge::run_pieces(&run.rules, v6, run.ingress, &run.local_ports, res);
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
    sets
}

/// Everything this node's table should hold. `endpoints` are every
/// endpoint of the cluster (for the address sets); those with an
/// interface are this node's. They may be borrowed (`&[&Endpoint]`), so
/// that a caller keeping them need not copy them for each compile.
/// `net_sets` are every NetworkSet and GlobalNetworkSet (for the address
/// sets of rules' selectors).
pub fn compile<'a, E: Borrow<Endpoint>>(
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[E],
    net_sets: &[NetSet],
    namespaces: &NamespaceLabels,
) -> Ruleset {
    compile_cached(
        &mut CompileCache::default(),
        policies,
        endpoints,
        net_sets,
        namespaces,
    )
}

/// The host endpoints' chains, maps and sets into `b.rs`.
fn compile_hosts(hosts: &host::Hosts, sorted: &[&Policy], b: &mut Building<'_, '_>) {
    let (named, all) = host::governing(hosts);
    if named.is_empty() && all.is_none() {
        return;
    }
    let mut chain_of = |e: &host::HostEndpoint, ingress: bool| -> String {
        let list: Vec<usize> = (0..sorted.len())
            .filter(|&i| {
                let p = sorted[i];
                !e.locked
                    && (if ingress { &p.ingress } else { &p.egress }).is_some()
                    && host::selects_host(p, &e.labels)
            })
            .collect();
        let tail = if list.is_empty() {
            stmt::drop()
        } else {
            stmt::goto(&b.profile(&list, ingress, &e.ports, "h", false))
        };
        let (name, rules) = host::endpoint_chain(hosts, ingress, tail);
        b.rs.chains.insert(name.clone(), Arc::new(rules));
        name
    };
    let mut host_in = BTreeMap::new();
    let mut host_out = BTreeMap::new();
    for (iface, e) in &named {
        host_in.insert(iface.to_string(), chain_of(e, true));
        host_out.insert(iface.to_string(), chain_of(e, false));
    }
    let host_all = all.map(|e| (chain_of(e, true), chain_of(e, false)));
    b.rs.host_in = host_in;
    b.rs.host_out = host_out;
    b.rs.host_all = host_all;
    if !hosts.tunnel_peers.is_empty() {
        b.rs.sets
            .insert(host::TUNNEL_PEERS_SET.to_string(), host::peers_set(hosts));
    }
}

/// The IP families some endpoint has an address of: the families rules
/// and sets are written for (a pod without an IPv6 address sends and
/// receives no IPv6 packet, so rules for it would be dead weight).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Families {
    pub v4: bool,
    pub v6: bool,
}

impl Families {
    /// Found by looking at every address (until both are seen).
    pub fn of<E: Borrow<Endpoint>>(endpoints: &[E]) -> Families {
        let mut f = Families::default();
        for a in endpoints.iter().flat_map(|e| e.borrow().addrs.iter()) {
            if a.is_ipv6() {
                f.v6 = true;
            } else {
                f.v4 = true;
            }
            if f.v4 && f.v6 {
                break;
            }
        }
        f
    }
}

/// [`compile`], reusing the policies in `cache` that are unchanged.
pub fn compile_cached<'a, E: Borrow<Endpoint>>(
    cache: &mut CompileCache,
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[E],
    net_sets: &[NetSet],
    namespaces: &NamespaceLabels,
) -> Ruleset {
    let families = Families::of(endpoints);
    compile_cached_with(cache, policies, endpoints, net_sets, families, namespaces)
}

/// [`compile_cached`] given the endpoints' [`Families`] (a caller that
/// keeps count need not have every address looked at on each compile).
pub fn compile_cached_with<'a, E: Borrow<Endpoint>>(
    cache: &mut CompileCache,
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[E],
    net_sets: &[NetSet],
    families: Families,
    namespaces: &NamespaceLabels,
) -> Ruleset {
    compile_with_hosts(
        cache,
        policies,
        endpoints,
        net_sets,
        families,
        namespaces,
        &host::Hosts::default(),
    )
}

/// [`compile_cached_with`], and this node's host endpoints (see
/// [`host`]). Rule selectors pick other nodes' host endpoints through
/// `net_sets` (as GlobalNetworkSets of their addresses).
pub fn compile_with_hosts<'a, E: Borrow<Endpoint>>(
    cache: &mut CompileCache,
    policies: impl IntoIterator<Item = &'a Policy>,
    endpoints: &[E],
    net_sets: &[NetSet],
    mut families: Families,
    namespaces: &NamespaceLabels,
    hosts: &host::Hosts,
) -> Ruleset {
    if !hosts.endpoints.is_empty() {
        // The host speaks both families whatever its pods do.
        families = Families { v4: true, v6: true };
    }
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
    let mut needs = Needs::for_families(families);
    needs.ranges = net_sets.iter().any(|s| !s.nets.is_empty());
    let mut prepared: BTreeMap<(usize, bool), Arc<CachedPolicy>> = BTreeMap::new();
    let mut runs: Runs = BTreeMap::new();
    let mut profiles: HashMap<String, CachedProfile> = HashMap::new();
    let mut b = Building {
        cache: &mut *cache,
        sorted: &sorted,
        ids: &mut ids,
        needs: &mut needs,
        prepared: &mut prepared,
        rs: &mut rs,
        runs: &mut runs,
        profiles: &mut profiles,
    };
    for ep in endpoints.iter().map(Borrow::borrow) {
        let Some(iface) = &ep.interface else { continue };
        let own = in_namespace
            .get(&*ep.namespace)
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
                b.profile(&list, ingress, &ep.ports, "", true)
            };
            let map = if ingress {
                &mut b.rs.to_endpoint
            } else {
                &mut b.rs.from_endpoint
            };
            map.insert(iface.clone(), chain);
        }
    }
    compile_hosts(hosts, &sorted, &mut b);
    // Keep only what this compile used.
    let kept: BTreeSet<(String, bool)> = prepared
        .keys()
        .map(|&(i, ingress)| (sorted[i].source.to_string(), ingress))
        .collect();
    cache.policies.retain(|k, _| kept.contains(k));
    cache.profiles = profiles;
    let mut res = merge::Resolver::new(endpoints, net_sets, namespaces);
    let mut run_sets: HashMap<String, CachedRunSets> = HashMap::new();
    for (stem, run) in &runs {
        let inputs = merge::run_inputs(&run.rules, &needs.families, run.ingress, &mut res);
        let kept = cache
            .run_sets
            .remove(stem)
            .filter(|c| c.reusable(run, &needs.families, &inputs));
        let c = kept.unwrap_or_else(|| CachedRunSets {
            run: run.clone(),
            families: needs.families.clone(),
            inputs,
            sets: run_set_defs(stem, run, &needs.families, &mut res),
        });
        rs.sets.extend(c.sets.iter().cloned());
        run_sets.insert(stem.clone(), c);
    }
    cache.run_sets = run_sets;
    for sel in &needs.selectors {
        for &v6 in &needs.families {
            // Disjoint, non-adjacent ranges: what an interval set takes
            // (the kernel refuses overlapping elements). Without networks
            // in any set, the picked pods' addresses, one element each,
            // for a plain set.
            let ranges = needs.ranges;
            let elements = if ranges {
                res.selected(sel, v6)
                    .ranges()
                    .iter()
                    .map(|&(lo, hi)| {
                        Element::Range(boxes::number_addr(lo, v6), boxes::number_addr(hi, v6))
                    })
                    .collect()
            } else {
                res.addresses(sel, v6)
                    .into_iter()
                    .map(|a| Element::Range(a, a))
                    .collect()
            };
            rs.sets.insert(
                selector_set(sel, v6, ranges),
                SetDef {
                    kind: SetKind::Addr { v6, ranges },
                    elements,
                },
            );
        }
    }
    for name in &needs.named_ports {
        for &v6 in &needs.families {
            let mut elements = BTreeSet::new();
            for ep in endpoints.iter().map(Borrow::borrow) {
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
