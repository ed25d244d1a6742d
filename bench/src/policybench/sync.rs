//! The timed ruleset writes: full sync, one policy changed, one pod
//! relabelled and the drift check, with the ruleset's size and path.

use std::collections::BTreeSet;
use std::time::Instant;

use anyhow::{Result, bail};
use tartan_felix::calc::policy::desired_cached;
use tartan_felix::dataplane::nft::{Via, Written};
use tartan_felix::dataplane::policy::PolicyDriver;
use tartan_policy::compile::CompileCache;
use tartan_policy::compile::{Ruleset, render};

use super::figures::*;
use super::model::*;
use super::options::*;
use crate::benchkit::{children_peak_rss_kib, in_ns};
use tartan_lab::netns::Netns;

pub(super) fn size_of(rs: &Ruleset) -> Size {
    // The fixed chains (base chains, the two dispatch chains, `open`)
    // and their rules, as the empty ruleset has them.
    let fixed = render::summary(&Ruleset::default());
    let fixed_chains = fixed.keys().filter(|k| !k.starts_with('@')).count();
    let fixed_rules: usize = fixed
        .iter()
        .filter(|(k, _)| !k.starts_with('@'))
        .map(|(_, n)| n)
        .sum();
    Size {
        chains: rs.chains.len() + fixed_chains,
        rules: rs.chains.values().map(|c| c.len()).sum::<usize>() + fixed_rules,
        sets: rs.sets.len(),
        set_elements: rs.sets.values().map(|s| s.elements.len()).sum(),
        map_elements: rs.to_endpoint.len() + rs.from_endpoint.len(),
        full_json_bytes: render::full(rs).to_string().len(),
        profiles: rs.chains.keys().filter(|c| c.starts_with('q')).count(),
        run_sets: rs.sets.keys().filter(|c| c.starts_with('r')).count(),
    }
}

/// A chain's rule count, and how many of its rules are run-set lookups.
pub(super) fn rules_of(rs: &Ruleset, chain: &str) -> (usize, usize) {
    let Some(c) = rs.chains.get(chain) else {
        return (0, 0);
    };
    let lookups = c
        .iter()
        .filter(|r| serde_json::to_string(r).is_ok_and(|t| t.contains("\"@r")))
        .count();
    (c.len(), lookups)
}

/// The chains a chain's rules jump or go to, in order.
pub(super) fn targets_of(rs: &Ruleset, chain: &str) -> Vec<String> {
    let Some(c) = rs.chains.get(chain) else {
        return Vec::new();
    };
    c.iter()
        .filter_map(|r| {
            let v = serde_json::to_value(r.last()?).ok()?;
            ["/jump/target", "/goto/target"]
                .iter()
                .find_map(|k| v.pointer(k)?.as_str().map(String::from))
        })
        .collect()
}

pub(super) fn path_of(rs: &Ruleset, syn: &Synthetic) -> Path {
    let server = syn.server.interface.as_deref().unwrap_or("");
    let client = syn.client.interface.as_deref().unwrap_or("");
    let profile = rs.to_endpoint.get(server).cloned().unwrap_or_default();
    let (profile_rules, lookups) = rules_of(rs, &profile);
    let egress = rs.from_endpoint.get(client).cloned().unwrap_or_default();
    let mut path = Path {
        profile_rules,
        lookups,
        client_egress_rules: rules_of(rs, &egress).0,
        ..Path::default()
    };
    let mut stretches = BTreeSet::new();
    for t in targets_of(rs, &profile) {
        match t.chars().next() {
            Some('g') => {
                path.guard_lookups += rules_of(rs, &t).1;
                stretches.extend(targets_of(rs, &t));
            }
            Some('x') => {
                path.guard_lookups += 1;
                path.lookups -= 1;
                stretches.insert(t);
            }
            Some('k') => (path.pass_rules, path.pass_lookups) = rules_of(rs, &t),
            _ => {}
        }
    }
    path.stretches = stretches.len();
    path.stretch_rules = stretches.iter().map(|x| rules_of(rs, x).0).sum();
    path.profile = profile;
    path
}

/// The policy table has no set the packet path fills (felix passes the
/// same).
pub(super) fn no_dynamic_sets(_: &str) -> bool {
    false
}

pub(super) fn timed_step(
    driver: &mut PolicyDriver,
    old: Option<&Ruleset>,
    compile: impl FnOnce() -> Ruleset,
) -> Result<(Step, Ruleset)> {
    let t = Instant::now();
    let rs = compile();
    let compile = t.elapsed();
    let t = Instant::now();
    let w = driver.apply(&rs, false, &no_dynamic_sets)?;
    let apply = t.elapsed();
    match (old, w) {
        (None, Written::Full(_)) | (Some(_), Written::Difference(_)) => {}
        (_, w) => bail!("unexpected write {w:?} (the difference was refused?)"),
    }
    let t = Instant::now();
    let batch = match old {
        None => Some(render::full(&rs)),
        Some(o) => render::diff(o, &rs),
    };
    let len = batch.as_ref().map_or(0, |v| v.to_string().len());
    let render = t.elapsed();
    std::hint::black_box(len);
    let commands = batch.as_ref().map_or(0, |b| b.len());
    Ok((
        Step {
            compile,
            apply,
            render,
            via_nft: driver.last_via() == Some(Via::Nft),
            commands,
        },
        rs,
    ))
}

pub(super) fn delete_table() {
    let _ = std::process::Command::new("nft")
        .args(["delete", "table", "inet", render::TABLE])
        .stderr(std::process::Stdio::null())
        .status();
}

pub(super) fn sync_runs(
    node: &Netns,
    syn: &mut Synthetic,
    o: &PolicyBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let base = syn.state.clone();
    for r in 0..o.runs {
        let state = &mut syn.state;
        *state = base.clone();
        let n = &syn.node;
        let (ck, cv) = (&syn.change_key, &syn.change);
        let (rk, rv) = (&syn.relabel_key, &syn.relabel);
        let (steps, check) = in_ns(node, || {
            delete_table();
            let mut d = PolicyDriver::default();
            // felix keeps one cache across compiles; the full sync starts
            // with it empty, as felix does.
            let mut cache = CompileCache::default();
            let mut out = Vec::new();
            let (full, mut rs) = timed_step(&mut d, None, || desired_cached(n, state, &mut cache))?;
            out.push(full);
            // The policy changed, then back.
            for v in [&cv[1], &cv[0]] {
                let (s, next) = timed_step(&mut d, Some(&rs), || {
                    state.kube_policies.insert(ck.clone(), v.clone());
                    desired_cached(n, state, &mut cache)
                })?;
                out.push(s);
                rs = next;
            }
            for l in [&rv[1], &rv[0]] {
                let (s, next) = timed_step(&mut d, Some(&rs), || {
                    state.endpoints.set_pod(rk, Some(l.clone()));
                    desired_cached(n, state, &mut cache)
                })?;
                out.push(s);
                rs = next;
            }
            let t = Instant::now();
            let w = d.apply(&rs, true, &no_dynamic_sets)?;
            let check = t.elapsed();
            if w != Written::Nothing {
                bail!("the drift check rewrote the table: {w:?}");
            }
            Ok((out, check))
        })?;
        if r == 0 {
            fig.nft_peak_rss_kib = children_peak_rss_kib();
        }
        log(&format!(
            "run {r}: full {:?} (compile {:?}), change {:?}, relabel {:?}, check {check:?}",
            steps[0].total(),
            steps[0].compile,
            steps[1].total(),
            steps[3].total()
        ));
        fig.full.push(steps[0]);
        fig.change.extend_from_slice(&steps[1..3]);
        fig.relabel.extend_from_slice(&steps[3..5]);
        fig.check.push(check);
    }
    syn.state = base;
    Ok(())
}
