//! The compiler end to end, without a kernel: random clusters and
//! policies are compiled, and packets are decided twice, by a small
//! interpreter of the compiled chains and sets (walking them as nftables
//! would) and by a reference evaluator written from the semantics (the
//! module doc of [`super`]) directly over the IR. Both must give the same
//! verdict and the same logs, in the same order.

mod interp;
mod reference;
mod strategies;

use std::cell::Cell;
use std::net::IpAddr;

use proptest::prop_assert;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::{CompileCache, Ruleset, compile, compile_cached};
use crate::ir::Policy;

use interp::{Cluster, Packet, check_disjoint, interpret};
use reference::reference;
use strategies::{Case, Spec, build_policy, case};

// ---------------------------------------------------------------------
// Packets to try

const EXTERNAL: [&str; 7] = [
    "192.0.2.3",
    "192.0.2.9",
    "10.0.0.200",
    "10.2.0.1",
    "203.0.113.7",
    "fd00::99",
    "2001:db8::1",
];
const DPORTS: [u16; 9] = [22, 53, 80, 85, 161, 443, 5353, 8080, 9090];
const SPORTS: [u16; 5] = [40000, 53, 80, 8080, 161];

/// Every pair of ends (one at least local) with every protocol and
/// destination port of a small pool that the policies' ports hit.
fn packets(cl: &Cluster, seed: usize) -> Vec<Packet> {
    let mut out = Vec::new();
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

fn check_ruleset(
    cl: &Cluster,
    specs: &[(String, Spec)],
    policies: &[Policy],
    rs: &Ruleset,
    seed: usize,
    stats: &Stats,
) -> Result<(), TestCaseError> {
    if let Err(e) = check_disjoint(rs) {
        return Err(TestCaseError::fail(format!("{e}\n{}", describe(rs))));
    }
    bump(&stats.guarded, rs.chains.keys().any(|c| c.starts_with('x')));
    for p in packets(cl, seed) {
        let (got, entered) = interpret(rs, cl, &p);
        let want = reference(policies, cl, &p);
        bump(&stats.packets, true);
        bump(&stats.allowed, want.allowed);
        bump(&stats.logged, !want.logs.is_empty());
        bump(&stats.stretched, entered.iter().any(|c| c.starts_with('x')));
        bump(&stats.passed, entered.iter().any(|c| c.starts_with('k')));
        if got != want {
            return Err(TestCaseError::fail(format!(
                "packet {p:?}\ncompiled: {got:?}\nreference: {want:?}\n\
                 specs: {specs:#?}\npolicies: {policies:#?}\ncluster: {cl:#?}\n{}",
                describe(rs)
            )));
        }
    }
    Ok(())
}

fn check_case(c: &Case, stats: &Stats) -> Result<(), TestCaseError> {
    bump(&stats.cases, true);
    let cl = c.cluster.build();
    let n_ns = c.cluster.envs.len();
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
    let mut cache = CompileCache::default();
    for specs in [&first, &second] {
        let policies: Vec<Policy> = specs
            .iter()
            .map(|(name, s)| build_policy(s, name, n_ns))
            .collect();
        let rs = compile_cached(&mut cache, &policies, &cl.endpoints, &cl.namespaces);
        let fresh = compile(&policies, &cl.endpoints, &cl.namespaces);
        prop_assert!(
            rs == fresh,
            "the cached compile differs from a fresh one\ncached:\n{}\nfresh:\n{}",
            describe(&rs),
            describe(&fresh)
        );
        check_ruleset(&cl, specs, &policies, &rs, c.seed, stats)?;
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
    eprintln!(
        "{cases} cases, {guarded} rulesets with guarded stretches; packets: {}, {} allowed, \
         {} logged, {} through a stretch, {} through a Pass chain",
        stats.packets.get(),
        stats.allowed.get(),
        stats.logged.get(),
        stats.stretched.get(),
        stats.passed.get()
    );
    // The generator must keep reaching the guarded stretches.
    assert!(guarded * 5 >= cases, "{guarded} of {cases} guarded");
}
