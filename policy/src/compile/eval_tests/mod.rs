//! The compiler end to end, without a kernel: random clusters and
//! policies are compiled, and packets are decided twice, by a small
//! interpreter of the compiled chains and sets (walking them as nftables
//! would) and by a reference evaluator written from the semantics (the
//! module doc of [`super`]) directly over the IR. Both must give the same
//! verdict and the same logs, in the same order.
//!
//! Each case compiles three times with one [`CompileCache`], the cluster
//! changing between compiles (endpoints relabelled, renumbered, moved,
//! added, removed, given or deprived of IPv6; namespaces relabelled), the
//! policies changing or not: every cached compile must equal a fresh one,
//! and decide as the semantics say on the cluster it was made for.

mod clusters;
mod interp;
mod kube_policies;
mod policies;
mod reference;
mod strategies;
mod tartan_policies;
mod unreadable_accounts;
mod unreadable_sets;

use std::cell::Cell;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use proptest::prop_assert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::{CompileCache, Ruleset, compile, compile_cached};
use crate::ir::Policy;

use interp::{Cluster, Packet, check_disjoint, interpret};
use policies::{Spec, build_policy};
use reference::reference;
use strategies::{Case, Policies, case};

/// The GlobalNetworkPolicy `name` with `spec`, converted.
fn global(name: &str, spec: serde_json::Value) -> Policy {
    let g: tartan_api::resources::GlobalNetworkPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    crate::tartan::from_global_network_policy(&g).unwrap()
}

/// Whether TCP from `src` (port 40000) to port 80 of `dst` is allowed by
/// the table compiled from `policies` for `cl`; the reference evaluator
/// must agree.
fn tcp_80_allowed(policies: &[&Policy], cl: &Cluster, src: &str, dst: &str) -> bool {
    let p = Packet {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        proto: 6,
        ports: Some((40000, 80)),
        icmp: None,
    };
    let rs = compile(
        policies.iter().copied(),
        &cl.endpoints,
        &cl.net_sets,
        &cl.namespaces,
    );
    let (table, _) = interpret(&rs, cl, &p);
    let owned: Vec<Policy> = policies.iter().map(|p| (*p).clone()).collect();
    assert_eq!(table, reference(&owned, cl, &p), "{src} to {dst}");
    table.allowed
}

// ---------------------------------------------------------------------
// Packets to try

const EXTERNAL: [&str; 8] = [
    "192.0.2.3",
    "192.0.2.9",
    "10.0.0.200",
    "10.2.0.1",
    "203.0.113.7",
    "198.51.100.5",
    "fd00::99",
    "2001:db8::1",
];
const DPORTS: [u16; 9] = [22, 53, 80, 85, 161, 443, 5353, 8080, 9090];
const SPORTS: [u16; 5] = [40000, 53, 80, 8080, 161];

/// Every pair of ends (one at least local) with every protocol and
/// destination port of a small pool that the policies' ports hit; only
/// about one in `stride` when `stride` is above 1. The ends: the
/// endpoints, addresses outside, and `gone`, addresses endpoints had
/// in earlier compiles (now outside too).
fn packets(cl: &Cluster, gone: &[IpAddr], seed: usize, stride: usize) -> Vec<Packet> {
    let mut out = Vec::new();
    let mut tried = 0u64;
    for v6 in [false, true] {
        let mut ends: Vec<(IpAddr, bool)> = cl
            .endpoints
            .iter()
            .filter_map(|e| {
                let a = e.addrs.iter().find(|a| a.is_ipv6() == v6)?;
                Some((*a, e.interface.is_some()))
            })
            .collect();
        ends.extend(
            EXTERNAL
                .iter()
                .map(|a| a.parse::<IpAddr>().unwrap())
                .chain(gone.iter().copied())
                .filter(|a| a.is_ipv6() == v6)
                .map(|a| (a, false)),
        );
        let icmp: &[(u8, u8)] = if v6 {
            &[(128, 0), (1, 3)]
        } else {
            &[(8, 0), (3, 1), (0, 0), (3, 3)]
        };
        for &(src, src_local) in &ends {
            for &(dst, dst_local) in &ends {
                if src == dst || !(src_local || dst_local) {
                    continue;
                }
                let mut add = |proto, ports: Option<u16>, icmp| {
                    tried += 1;
                    // Scrambled, so every pair of ends keeps a different
                    // part of the pool.
                    let h = ((seed as u64) << 32 | tried).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    if !(h >> 32).is_multiple_of(stride as u64) {
                        return;
                    }
                    let sport = SPORTS[(seed + out.len()) % SPORTS.len()];
                    out.push(Packet {
                        src,
                        dst,
                        proto,
                        ports: ports.map(|d| (sport, d)),
                        icmp,
                    });
                };
                for proto in [6, 17] {
                    for d in DPORTS {
                        add(proto, Some(d), None);
                    }
                }
                for d in [80, 8080] {
                    add(132, Some(d), None);
                }
                for &ic in icmp {
                    add(if v6 { 58 } else { 1 }, None, Some(ic));
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------
// The property

#[derive(Default)]
struct Stats {
    cases: Cell<usize>,
    guarded: Cell<usize>,
    packets: Cell<usize>,
    allowed: Cell<usize>,
    logged: Cell<usize>,
    /// Packets that entered a stretch's chain (`x…`), a Pass chain (`k…`).
    stretched: Cell<usize>,
    passed: Cell<usize>,
    /// Cached compiles on a cluster changed since the compile before;
    /// those of them that reused a profile built before; those in which
    /// a run set kept from before had new inputs (addresses selected,
    /// named-port holders) and so new elements.
    changed: Cell<usize>,
    profiles_kept: Cell<usize>,
    inputs_changed: Cell<usize>,
    /// Cached compiles whose IP families differ from the compile before.
    families_changed: Cell<usize>,
    /// Compiles whose result the network sets changed; cached compiles
    /// on a cluster whose network sets changed.
    sets_used: Cell<usize>,
    sets_changed: Cell<usize>,
}

fn bump(c: &Cell<usize>, yes: bool) {
    c.set(c.get() + usize::from(yes));
}

fn describe(rs: &Ruleset) -> String {
    let mut out = String::new();
    for (name, rules) in &rs.chains {
        out += &format!("chain {name}:\n");
        for r in rules.iter() {
            out += &format!("  {}\n", serde_json::to_string(r).unwrap());
        }
    }
    for (name, def) in &rs.sets {
        out += &format!("set {name} {:?}: {:?}\n", def.kind, def.elements);
    }
    out += &format!(
        "to_endpoint {:?}\nfrom_endpoint {:?}\n",
        rs.to_endpoint, rs.from_endpoint
    );
    out
}

/// What a compile is checked on: which compile of the case (from 0), the
/// cluster and the addresses gone from it, the policies' specs.
struct At<'a> {
    compile: usize,
    cluster: &'a Cluster,
    gone: &'a [IpAddr],
    specs: &'a [(String, Spec)],
}

fn check_ruleset(
    at: &At<'_>,
    policies: &[Policy],
    rs: &Ruleset,
    seed: usize,
    stride: usize,
    stats: &Stats,
) -> Result<(), TestCaseError> {
    let (cl, specs, n) = (at.cluster, at.specs, at.compile);
    if let Err(e) = check_disjoint(rs) {
        return Err(TestCaseError::fail(format!(
            "compile {n}: {e}\n{}",
            describe(rs)
        )));
    }
    bump(&stats.guarded, rs.chains.keys().any(|c| c.starts_with('x')));
    for p in packets(cl, at.gone, seed, stride) {
        let (got, entered) = interpret(rs, cl, &p);
        let want = reference(policies, cl, &p);
        bump(&stats.packets, true);
        bump(&stats.allowed, want.allowed);
        bump(&stats.logged, !want.logs.is_empty());
        bump(&stats.stretched, entered.iter().any(|c| c.starts_with('x')));
        bump(&stats.passed, entered.iter().any(|c| c.starts_with('k')));
        if got != want {
            return Err(TestCaseError::fail(format!(
                "compile {n}, packet {p:?}\ncompiled: {got:?}\nreference: {want:?}\n\
                 specs: {specs:#?}\npolicies: {policies:#?}\ncluster: {cl:#?}\n{}",
                describe(rs)
            )));
        }
    }
    Ok(())
}

/// The IP families a cluster's endpoints have addresses of (IPv6 or not).
fn families(cl: &Cluster) -> BTreeSet<bool> {
    (cl.endpoints.iter())
        .flat_map(|e| e.addrs.iter().map(IpAddr::is_ipv6))
        .collect()
}

/// What a compile left in the cache that the next may reuse.
struct Kept {
    profiles: HashMap<String, Arc<super::profile::Built>>,
    inputs: HashMap<String, Vec<super::merge::Input>>,
}

impl Kept {
    fn of(cache: &CompileCache) -> Kept {
        Kept {
            profiles: (cache.profiles.iter())
                .map(|(n, p)| (n.clone(), p.built.clone()))
                .collect(),
            inputs: (cache.run_sets.iter())
                .map(|(n, r)| (n.clone(), r.inputs.clone()))
                .collect(),
        }
    }
}

fn check_case(c: &Case, stats: &Stats) -> Result<(), TestCaseError> {
    bump(&stats.cases, true);
    let n_ns = c.cluster.namespaces.len();
    let first: Vec<(String, Spec)> = c
        .first
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("p{i}"), s.clone()))
        .collect();
    let second: Vec<(String, Spec)> = c
        .second
        .iter()
        .enumerate()
        .map(|(i, s)| match first.get(i) {
            Some(f) if c.keep[i] => f.clone(),
            _ => (format!("p{i}"), s.clone()),
        })
        .collect();
    // The clusters and policies of the three compiles.
    let mut compiles = vec![(c.cluster.clone(), &first)];
    for step in &c.steps {
        let (mut cluster, before) = compiles.last().unwrap().clone();
        for ch in &step.changes {
            cluster.apply(ch);
        }
        let specs = match step.policies {
            Policies::Previous => before,
            Policies::First => &first,
            Policies::Second => &second,
        };
        compiles.push((cluster, specs));
    }
    let mut cache = CompileCache::default();
    let mut before: Option<Cluster> = None;
    let mut seen: BTreeSet<IpAddr> = BTreeSet::new();
    for (n, (cluster, specs)) in compiles.iter().enumerate() {
        let cl = cluster.build();
        let held: BTreeSet<IpAddr> = cl.endpoints.iter().flat_map(|e| e.addrs.clone()).collect();
        let gone: Vec<IpAddr> = seen.difference(&held).copied().collect();
        seen.extend(held);
        let policies: Vec<Policy> = specs
            .iter()
            .map(|(name, s)| build_policy(s, name, n_ns))
            .collect();
        let kept = Kept::of(&cache);
        let rs = compile_cached(
            &mut cache,
            &policies,
            &cl.endpoints,
            &cl.net_sets,
            &cl.namespaces,
        );
        let fresh = compile(&policies, &cl.endpoints, &cl.net_sets, &cl.namespaces);
        // Whether the network sets made a difference at all.
        bump(
            &stats.sets_used,
            fresh != compile(&policies, &cl.endpoints, &[], &cl.namespaces),
        );
        prop_assert!(
            rs == fresh,
            "compile {n}: the cached compile differs from a fresh one\n\
             cluster: {cl:#?}\ncached:\n{}\nfresh:\n{}",
            describe(&rs),
            describe(&fresh)
        );
        if let Some(b) = &before
            && (b.endpoints != cl.endpoints
                || b.namespaces != cl.namespaces
                || b.net_sets != cl.net_sets)
        {
            bump(&stats.sets_changed, b.net_sets != cl.net_sets);
            bump(&stats.changed, true);
            bump(
                &stats.profiles_kept,
                (cache.profiles.iter()).any(|(name, p)| {
                    kept.profiles
                        .get(name)
                        .is_some_and(|b| Arc::ptr_eq(b, &p.built))
                }),
            );
            bump(
                &stats.inputs_changed,
                (cache.run_sets.iter())
                    .any(|(stem, r)| kept.inputs.get(stem).is_some_and(|i| *i != r.inputs)),
            );
            bump(&stats.families_changed, families(b) != families(&cl));
        }
        // The extra compiles try fewer packets, for the suite's time.
        let stride = if n == 0 { 1 } else { 2 };
        let at = At {
            compile: n,
            cluster: &cl,
            gone: &gone,
            specs,
        };
        check_ruleset(&at, &policies, &rs, c.seed, stride, stats)?;
        before = Some(cl);
    }
    Ok(())
}

#[test]
fn compiled_chains_decide_as_the_semantics_say() {
    let mut runner = TestRunner::new(Config {
        cases: 128,
        // No regression file next to the sources: a failure prints its case.
        failure_persistence: None,
        ..Config::default()
    });
    let stats = Stats::default();
    if let Err(e) = runner.run(&case(), |c| check_case(&c, &stats)) {
        panic!("{e}");
    }
    let (cases, guarded) = (stats.cases.get(), stats.guarded.get());
    let changed = stats.changed.get();
    let (profiles_kept, inputs_changed) = (stats.profiles_kept.get(), stats.inputs_changed.get());
    let families_changed = stats.families_changed.get();
    let (sets_used, sets_changed) = (stats.sets_used.get(), stats.sets_changed.get());
    eprintln!(
        "{sets_used} compiles that network sets changed, {sets_changed} cached compiles \
         on changed network sets"
    );
    // Network sets must matter, and change under the cache.
    assert!(
        sets_used * 2 >= cases && sets_changed * 4 >= cases,
        "of {cases} cases: {sets_used} compiles that network sets changed, {sets_changed} \
         cached compiles on changed network sets"
    );
    eprintln!(
        "{cases} cases, {guarded} rulesets with guarded stretches; packets: {}, {} allowed, \
         {} logged, {} through a stretch, {} through a Pass chain; {changed} cached compiles \
         on a changed cluster, {profiles_kept} reusing a profile, {inputs_changed} with a run \
         set's inputs changed, {families_changed} with other IP families",
        stats.packets.get(),
        stats.allowed.get(),
        stats.logged.get(),
        stats.stretched.get(),
        stats.passed.get()
    );
    // The generator must keep reaching the guarded stretches.
    assert!(guarded * 5 >= cases, "{guarded} of {cases} guarded");
    // And the cache's checks against a changed cluster: profiles reused
    // on it, run sets whose elements it changed, new IP families.
    assert!(
        profiles_kept * 4 >= cases && inputs_changed * 4 >= cases && families_changed * 16 >= cases,
        "of {cases} cases: {profiles_kept} reusing a profile on a changed cluster, \
         {inputs_changed} with a run set's inputs changed, {families_changed} with other IP families"
    );
}
