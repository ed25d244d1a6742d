//! One family's service table kept up to date by Service: a change to
//! one Service or one of its EndpointSlices recomputes that Service's part
//! of the table and yields the nft commands for that part alone, so the
//! work per change does not grow with the number of Services. Pure.
//!
//! The parts are not kept between changes, only the table they make: a
//! Service's part as the table has it is computed again when the Service
//! is first touched after a write, from the records that have not yet
//! changed (at 10,000 Services the parts were a second copy of the table,
//! 7 MB).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use tartan_nft::Transaction;

use crate::services::render::{self, Picker, SvcNft};
use crate::services::stale::{self, Flow};
use crate::services::{Family, ServiceInfo, ServiceTable, SliceInfo, desired_for};

/// The halves of family `A` of the Services felix has seen, the slices of
/// that family, the table they make, and what changed since the last
/// [`FamilyIndex::take_patch`]. The node's zone is the caller's
/// ([`super::ServiceIndex`]), given to each call that computes a part.
pub struct FamilyIndex<A: Family> {
    services: BTreeMap<String, ServiceInfo<A>>,
    slices: BTreeMap<String, SliceInfo<A>>,
    /// Service key → keys of its slices.
    slices_of: BTreeMap<String, BTreeSet<String>>,
    /// How many parts use each picking chain.
    picker_uses: BTreeMap<Picker, usize>,
    /// The whole table: the parts together, with the hairpin set.
    table: SvcNft<A>,
    /// The Services changed since the last update, with their part as
    /// the table holds it (computed before the first change).
    dirty: BTreeMap<String, SvcNft<A>>,
    /// Changes not yet taken: (old part, new part) per Service.
    pending: Vec<(SvcNft<A>, SvcNft<A>)>,
    /// Whether the table has been written whole once: before that no
    /// patch is wanted, so changes are not kept as (old, new) pairs (at
    /// a start against a full store, a second copy of every part).
    patching: bool,
    hairpin_before: BTreeSet<A>,
    /// Conntrack flows left stale by changes, not yet taken
    /// ([`crate::services::stale`]).
    stale: Vec<Flow<A>>,
    pickers_before: BTreeSet<Picker>,
    affinity_before: u32,
}

impl<A: Family> Default for FamilyIndex<A> {
    fn default() -> Self {
        FamilyIndex {
            services: BTreeMap::new(),
            slices: BTreeMap::new(),
            slices_of: BTreeMap::new(),
            picker_uses: BTreeMap::new(),
            table: SvcNft::default(),
            dirty: BTreeMap::new(),
            pending: Vec::new(),
            patching: false,
            hairpin_before: BTreeSet::new(),
            stale: Vec::new(),
            pickers_before: BTreeSet::new(),
            affinity_before: 0,
        }
    }
}

impl<A: Family> FamilyIndex<A> {
    /// Whether it holds no Service.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    /// The node's zone is about to change from `zone`: every Service is
    /// computed again, since which endpoints the topology hints name
    /// depends on it.
    pub fn zone_changing(&mut self, zone: &str) {
        let keys: Vec<String> = self.services.keys().cloned().collect();
        for k in &keys {
            self.touch(k, zone);
        }
    }

    /// The health-check node ports this family's Services answer on
    /// ([`crate::services::healthcheck::targets`]).
    pub fn health_targets(&self) -> BTreeMap<u16, crate::services::healthcheck::Target> {
        crate::services::healthcheck::targets(&self.services, &self.slices)
    }

    /// A Service's half came, changed or went (`None`: gone, or one this
    /// family leaves alone). Whether anything the proxy uses changed.
    pub fn set_service(&mut self, key: &str, info: Option<ServiceInfo<A>>, zone: &str) -> bool {
        if self.services.get(key) == info.as_ref() {
            return false;
        }
        self.touch(key, zone);
        match info {
            Some(i) => self.services.insert(key.to_string(), i),
            None => self.services.remove(key),
        };
        true
    }

    /// An EndpointSlice of this family came, changed or went.
    pub fn set_slice(&mut self, key: &str, info: Option<SliceInfo<A>>, zone: &str) -> bool {
        if self.slices.get(key) == info.as_ref() {
            return false;
        }
        if let Some(service) = self.slices.get(key).map(|o| o.service.clone()) {
            self.touch(&service, zone);
        }
        if let Some(n) = &info {
            self.touch(&n.service, zone);
        }
        if let Some(o) = self.slices.remove(key)
            && let Some(set) = self.slices_of.get_mut(&o.service)
        {
            set.remove(key);
            if set.is_empty() {
                self.slices_of.remove(&o.service);
            }
        }
        if let Some(n) = info {
            self.slices_of
                .entry(n.service.clone())
                .or_default()
                .insert(key.to_string());
            self.slices.insert(key.to_string(), n);
        }
        true
    }

    /// `key` is about to change: keep its part as the table holds it, if
    /// not kept since the last update.
    fn touch(&mut self, key: &str, zone: &str) {
        if !self.dirty.contains_key(key) {
            let before = self.part_of(key, zone);
            self.dirty.insert(key.to_string(), before);
        }
    }

    /// This node's pod addresses of this family (for hairpin).
    pub fn set_local_pods(&mut self, pods: BTreeSet<A>) {
        self.table.hairpin = pods;
    }

    fn slices_for(&self, key: &str) -> Vec<&SliceInfo<A>> {
        self.slices_of
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|k| self.slices.get(k))
            .collect()
    }

    fn part_of(&self, key: &str, zone: &str) -> SvcNft<A> {
        let Some(svc) = self.services.get(key) else {
            return SvcNft::default();
        };
        let mut t = ServiceTable::default();
        desired_for(key, svc, &self.slices_for(key), zone, &mut t);
        SvcNft::from_table(&t)
    }

    /// Recompute the Services that changed; the whole table after it.
    pub fn update(&mut self, zone: &str) -> &SvcNft<A> {
        for (key, old) in std::mem::take(&mut self.dirty) {
            let new = self.part_of(&key, zone);
            if old == new {
                continue;
            }
            for p in &old.pickers {
                if let Some(n) = self.picker_uses.get_mut(p) {
                    *n -= 1;
                    if *n == 0 {
                        self.picker_uses.remove(p);
                    }
                }
            }
            for p in &new.pickers {
                *self.picker_uses.entry(*p).or_default() += 1;
            }
            self.table.remove(&old);
            self.table.add(&new);
            self.stale.extend(stale::stale(&old, &new));
            if self.patching {
                self.pending.push((old, new));
            }
        }
        self.table.pickers = self.picker_uses.keys().copied().collect();
        self.table.affinity_slots = self
            .table
            .pickers
            .iter()
            .filter(|p| p.affinity.is_some())
            .map(|p| p.count)
            .max()
            .unwrap_or(0);
        &self.table
    }

    pub fn table(&self) -> &SvcNft<A> {
        &self.table
    }

    /// How many Services changed since the last patch (after
    /// [`FamilyIndex::update`]).
    pub fn changed_services(&self) -> usize {
        self.pending.len()
    }

    /// The nft commands for what changed since the last call (after
    /// [`FamilyIndex::update`]); `None` when nothing did.
    pub fn take_patch(&mut self) -> Option<Transaction> {
        let pending = std::mem::take(&mut self.pending);
        let hairpin = (
            std::mem::replace(&mut self.hairpin_before, self.table.hairpin.clone()),
            self.table.hairpin.clone(),
        );
        let pickers = (
            std::mem::replace(&mut self.pickers_before, self.table.pickers.clone()),
            self.table.pickers.clone(),
        );
        let affinity = (
            std::mem::replace(&mut self.affinity_before, self.table.affinity_slots),
            self.table.affinity_slots,
        );
        render::patch(&pending, &hairpin, &pickers, affinity)
    }

    /// The conntrack flows changes left stale since the last call, less
    /// those the table (after [`FamilyIndex::update`]) still serves.
    pub fn take_stale(&mut self) -> Vec<Flow<A>> {
        let mut flows = std::mem::take(&mut self.stale);
        flows.sort();
        flows.dedup();
        flows.retain(|f| !stale::still_served(&self.table, f));
        flows
    }

    /// Flows whose cleanup failed, to try again with the next ones.
    pub fn keep_stale(&mut self, flows: Vec<Flow<A>>) {
        self.stale.extend(flows);
    }

    /// The kept table, to change behind the index's back (tests: a kept
    /// table that drifted from one computed afresh).
    #[doc(hidden)]
    pub fn table_mut(&mut self) -> &mut SvcNft<A> {
        &mut self.table
    }

    /// Forget what was pending: the next write is the whole table.
    pub fn written_whole(&mut self) {
        self.pending.clear();
        self.patching = true;
        self.hairpin_before = self.table.hairpin.clone();
        self.pickers_before = self.table.pickers.clone();
        self.affinity_before = self.table.affinity_slots;
    }

    /// Whether the kept table equals one computed afresh from every
    /// Service ([`FamilyIndex::recomputed`]), found without a second
    /// copy of the table: each Service's part is recomputed alone and
    /// must be in the table; when no two parts
    /// claim one frontend or node port, the table must hold exactly as
    /// many entries as the parts together (so nothing else). Where two
    /// Services do claim one (the same external IP and port, say), the
    /// whole table is recomputed and compared, since which of them wins
    /// is decided there.
    pub fn consistent(&self, zone: &str) -> bool {
        let mut sum = [0usize; 13];
        let mut pickers: BTreeMap<Picker, usize> = BTreeMap::new();
        let mut frontends = HashSet::new();
        let mut node_ports = HashSet::new();
        let mut cluster_ips = HashSet::new();
        let mut shared = false;
        for key in self.services.keys() {
            let part = self.part_of(key, zone);
            let (fe, np, ips) = part.claims();
            for f in fe {
                shared |= !frontends.insert(f);
            }
            for p in np {
                shared |= !node_ports.insert(p);
            }
            for ip in ips {
                shared |= !cluster_ips.insert(ip);
            }
            shared |= !self.table.holds(&part);
            for (s, n) in sum.iter_mut().zip(part.entries()) {
                *s += n;
            }
            for p in &part.pickers {
                *pickers.entry(*p).or_default() += 1;
            }
        }
        if shared {
            // Which claimant wins is decided by the whole computation; the
            // loser's slots may stay behind, unreachable and harmless.
            return self.recomputed(zone).reachable() == self.table.reachable();
        }
        pickers == self.picker_uses
            && self.table.pickers == pickers.keys().copied().collect::<BTreeSet<_>>()
            && sum == self.table.entries()
            && self.table.affinity_slots
                == pickers
                    .keys()
                    .filter(|p| p.affinity.is_some())
                    .map(|p| p.count)
                    .max()
                    .unwrap_or(0)
    }

    /// The whole table computed afresh from every Service: what the kept
    /// table must equal (checked now and then, to catch a Service that
    /// lost a frontend to another one and never got it back).
    pub fn recomputed(&self, zone: &str) -> SvcNft<A> {
        let mut t = ServiceTable::default();
        for (key, svc) in &self.services {
            desired_for(key, svc, &self.slices_for(key), zone, &mut t);
        }
        t.local_pods = self.table.hairpin.clone();
        SvcNft::from_table(&t)
    }

    /// Start over from `services` and `slices` as they are (after a
    /// drift or a mismatch): every Service recomputed.
    pub fn rebuild(&mut self, zone: &str) {
        self.picker_uses.clear();
        let hairpin = std::mem::take(&mut self.table.hairpin);
        self.table = SvcNft {
            hairpin,
            ..SvcNft::default()
        };
        // Against the empty table every part is new.
        self.dirty = self
            .services
            .keys()
            .map(|k| (k.clone(), SvcNft::default()))
            .collect();
        self.update(zone);
        self.written_whole();
    }
}
