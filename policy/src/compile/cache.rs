//! What a compiler that runs again and again (felix) keeps between
//! compiles: rendered policies, built profiles and run-set elements, each
//! reused while what it was made from is unchanged. Pure.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::prepared::CachedPolicy;
use super::profile::{Built, RunSets};
use super::rules::{Needs, Run, policy_runs};
use super::{SetDef, merge};
use crate::ir::{Cond, Policy};

/// Policies prepared by earlier compiles, kept by whoever compiles again
/// and again (felix): a policy whose rules and IP families are unchanged
/// is not rendered afresh (rendering every policy was most of a compile
/// at 2,000 policies). Entries not used by the latest compile are
/// dropped.
#[derive(Debug, Default, Clone)]
pub struct CompileCache {
    pub(super) policies: HashMap<(String, bool), Arc<CachedPolicy>>,
    /// Profiles built, by chain name (which names the policies and the
    /// endpoint's named-port numbers): rebuilt when one of their policies
    /// changed or the IP families did.
    pub(super) profiles: HashMap<String, CachedProfile>,
    /// Run and guard set elements, by stem: computed again when the
    /// run's rules or local named-port numbers, the IP families, the
    /// addresses its selectors pick (pods' addresses, and the networks of
    /// the network sets they pick) or (egress) who numbers its named
    /// ports how changed. Selector sets (`s…`) are made afresh at each
    /// compile, so a change in network sets reaches them too.
    pub(super) run_sets: HashMap<String, CachedRunSets>,
}

#[derive(Debug, Clone)]
pub(super) struct CachedProfile {
    pub(super) policies: Vec<Arc<CachedPolicy>>,
    pub(super) families: Vec<bool>,
    pub(super) built: Arc<Built>,
}

impl CachedProfile {
    /// Whether building the profile from `policies` in `families` would
    /// give what it holds (a policy unchanged keeps its prepared entry).
    pub(super) fn same_input(&self, policies: &[Arc<CachedPolicy>], families: &[bool]) -> bool {
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
pub(super) struct CachedRunSets {
    pub(super) run: Arc<RunSets>,
    pub(super) families: Vec<bool>,
    pub(super) inputs: Vec<merge::Input>,
    pub(super) sets: Vec<(String, SetDef)>,
}

impl CachedRunSets {
    /// Whether its sets are those of `run` in `families` with `inputs`.
    pub(super) fn reusable(
        &self,
        run: &Arc<RunSets>,
        families: &[bool],
        inputs: &[merge::Input],
    ) -> bool {
        (Arc::ptr_eq(&self.run, run) || *self.run == **run)
            && self.families == families
            && self.inputs == inputs
    }
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
pub(super) fn cached_policy(
    cache: &mut CompileCache,
    p: &Policy,
    ingress: bool,
    needs: &mut Needs,
) -> Arc<CachedPolicy> {
    use std::collections::hash_map::Entry;
    let render = |needs: &Needs| {
        let mut own = Needs {
            families: needs.families.clone(),
            ranges: needs.ranges,
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
            ranges: needs.ranges,
            runs: Arc::new(runs),
            selectors: own.selectors.into_iter().collect(),
            named_ports: own.named_ports.into_iter().collect(),
            local_names,
        })
    };
    let c = match cache.policies.entry((p.source.to_string(), ingress)) {
        Entry::Occupied(mut e) => {
            if e.get().policy != *p
                || e.get().families != needs.families
                || e.get().ranges != needs.ranges
            {
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
