//! One compile's work in progress: the profile chains built so far and
//! what they need, shared by the pods' profiles and the host endpoints'.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::cache::{CachedProfile, cached_policy};
use super::prepared::CachedPolicy;
use super::profile::{Built, Runs, build_profile};
use super::rules::Needs;
use super::{CompileCache, NamedPort, Ruleset, hash};
use crate::ir::Policy;

pub(super) struct Building<'a, 'p> {
    pub(super) cache: &'a mut CompileCache,
    pub(super) sorted: &'a [&'p Policy],
    pub(super) ids: &'a mut Vec<Option<String>>,
    pub(super) needs: &'a mut Needs,
    pub(super) prepared: &'a mut BTreeMap<(usize, bool), Arc<CachedPolicy>>,
    pub(super) rs: &'a mut Ruleset,
    pub(super) runs: &'a mut Runs,
    pub(super) profiles: &'a mut HashMap<String, CachedProfile>,
}

impl Building<'_, '_> {
    /// The profile chain of the policies `list` (indices into `sorted`,
    /// in order) for an endpoint numbering its named ports as `ports`,
    /// built unless this compile or the cache has it. `tag` keeps apart
    /// profiles that differ in what a Pass with no Kubernetes policy
    /// after it does: `pass_allows` (a pod's: allowed) or not (a host
    /// endpoint's: dropped, as it has no profile to go on to).
    pub(super) fn profile(
        &mut self,
        list: &[usize],
        ingress: bool,
        ports: &[NamedPort],
        tag: &str,
        pass_allows: bool,
    ) -> String {
        let mut local_names = BTreeSet::new();
        for &i in list {
            let (cache, needs, sorted) = (&mut *self.cache, &mut *self.needs, self.sorted);
            let cp = self
                .prepared
                .entry((i, ingress))
                .or_insert_with(|| cached_policy(cache, sorted[i], ingress, needs));
            local_names.extend(cp.local_names.iter().cloned());
        }
        // The endpoint's numbers for the named ports its merged runs use:
        // part of the profile, as they are in its sets.
        let mut local_ports: Vec<NamedPort> = ports
            .iter()
            .filter(|p| local_names.contains(&p.name))
            .cloned()
            .collect();
        local_ports.sort();
        local_ports.dedup();
        let mut key: Vec<String> = list
            .iter()
            .map(|&i| {
                self.ids[i]
                    .get_or_insert_with(|| hash(&self.sorted[i].source.to_string()))
                    .clone()
            })
            .collect();
        key.extend(
            local_ports
                .iter()
                .map(|p| format!("{}={}/{}", p.name, p.protocol, p.port)),
        );
        let name = format!(
            "q{tag}{}{}",
            if ingress { "i" } else { "e" },
            hash(&key.join(","))
        );
        if self.rs.chains.contains_key(&name) {
            return name;
        }
        let policies: Vec<Arc<CachedPolicy>> = list
            .iter()
            .map(|&i| self.prepared[&(i, ingress)].clone())
            .collect();
        let built = match self.cache.profiles.get(&name) {
            Some(c) if c.same_input(&policies, &self.needs.families) => c.built.clone(),
            _ => {
                let mut built = Built::default();
                build_profile(
                    &name,
                    list,
                    self.sorted,
                    self.prepared,
                    ingress,
                    &local_ports,
                    &self.needs.families,
                    pass_allows,
                    &mut built,
                );
                Arc::new(built)
            }
        };
        for (n, c) in &built.chains {
            self.rs.chains.entry(n.clone()).or_insert_with(|| c.clone());
        }
        for (n, r) in &built.runs {
            self.runs.entry(n.clone()).or_insert_with(|| r.clone());
        }
        self.profiles.insert(
            name.clone(),
            CachedProfile {
                policies,
                families: self.needs.families.clone(),
                built,
            },
        );
        name
    }
}
