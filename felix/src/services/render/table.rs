//! The table as flat maps and sets ([`SvcNft`]), made from the node's
//! [`ServiceTable`], and put together or taken apart by Service.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

// The expression helpers the policy compiler already has.

use super::objects::*;
use super::picker::*;
use crate::services::{Backend, Dispatch, Family, ServiceTable};

/// The endpoints a frontend picks from: all of them, or with session
/// affinity the first [`MAX_AFFINITY_ENDPOINTS`] (the picker id has room
/// for no more).
pub(super) fn capped<A>(backends: &[Backend<A>], affinity: Option<u32>) -> &[Backend<A>] {
    match affinity {
        Some(_) => &backends[..backends.len().min(MAX_AFFINITY_ENDPOINTS)],
        None => backends,
    }
}

/// One family's table as flat maps, sets and chains, for writing and
/// diffing.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcNft<A: Family = Ipv4Addr> {
    /// Frontend → its picking chain (written as the chain's id).
    pub frontends: BTreeMap<Frontend<A>, Picker>,
    pub node_ports: BTreeMap<NodePort, Picker>,
    /// Inside clients' pickers of `Local` external frontends (their slots
    /// from [`INSIDE_SLOTS`] in `fe_slots` / `np_slots`).
    pub frontends_in: BTreeMap<Frontend<A>, Picker>,
    pub node_ports_in: BTreeMap<NodePort, Picker>,
    pub fe_slots: BTreeMap<(Frontend<A>, u32), Backend<A>>,
    pub np_slots: BTreeMap<(NodePort, u32), Backend<A>>,
    pub reject_fe: BTreeSet<Frontend<A>>,
    pub drop_fe: BTreeSet<Frontend<A>>,
    pub reject_np: BTreeSet<NodePort>,
    pub drop_np: BTreeSet<NodePort>,
    pub hairpin: BTreeSet<A>,
    /// Frontends limited to some client networks, and each allowed
    /// (frontend, network).
    pub lb_limited: BTreeSet<Frontend<A>>,
    pub lb_allowed: BTreeSet<(Frontend<A>, A::Net)>,
    /// The ClusterIPs served, whatever their ports.
    pub cluster_ips: BTreeSet<A>,
    pub pickers: BTreeSet<Picker>,
    /// How many `aff_<slot>` sets (the largest count with affinity).
    pub affinity_slots: u32,
}

impl<A: Family> Default for SvcNft<A> {
    fn default() -> Self {
        SvcNft {
            frontends: BTreeMap::new(),
            node_ports: BTreeMap::new(),
            frontends_in: BTreeMap::new(),
            node_ports_in: BTreeMap::new(),
            fe_slots: BTreeMap::new(),
            np_slots: BTreeMap::new(),
            reject_fe: BTreeSet::new(),
            drop_fe: BTreeSet::new(),
            reject_np: BTreeSet::new(),
            drop_np: BTreeSet::new(),
            hairpin: BTreeSet::new(),
            lb_limited: BTreeSet::new(),
            lb_allowed: BTreeSet::new(),
            cluster_ips: BTreeSet::new(),
            pickers: BTreeSet::new(),
            affinity_slots: 0,
        }
    }
}

impl<A: Family> SvcNft<A> {
    pub fn from_table(t: &ServiceTable<A>) -> SvcNft<A> {
        let mut n = SvcNft {
            hairpin: t.local_pods.clone(),
            cluster_ips: t.cluster_ips.clone(),
            ..SvcNft::default()
        };
        for (fe, d) in &t.frontends {
            match d {
                Dispatch::Reject => {
                    n.reject_fe.insert(*fe);
                }
                Dispatch::Drop => {
                    n.drop_fe.insert(*fe);
                }
                Dispatch::Backends { backends, affinity } => {
                    let backends = capped(backends, *affinity);
                    let masq = t.masq_frontends.contains(fe);
                    let p = n.picker(Kind::Frontend, backends.len(), *affinity, false, masq);
                    n.frontends.insert(*fe, p);
                    for (i, b) in backends.iter().enumerate() {
                        n.fe_slots.insert((*fe, p.first_slot() + i as u32), *b);
                    }
                }
            }
        }
        for (fe, d) in &t.frontends_in {
            if let Dispatch::Backends { backends, affinity } = d {
                let backends = capped(backends, *affinity);
                let p = n.picker(Kind::Frontend, backends.len(), *affinity, true, false);
                n.frontends_in.insert(*fe, p);
                for (i, b) in backends.iter().enumerate() {
                    n.fe_slots.insert((*fe, INSIDE_SLOTS + i as u32), *b);
                }
            }
        }
        for (np, d) in &t.node_ports_in {
            if let Dispatch::Backends { backends, affinity } = d {
                let backends = capped(backends, *affinity);
                let p = n.picker(Kind::NodePort, backends.len(), *affinity, true, false);
                n.node_ports_in.insert(*np, p);
                for (i, b) in backends.iter().enumerate() {
                    n.np_slots.insert((*np, INSIDE_SLOTS + i as u32), *b);
                }
            }
        }
        for (fe, nets) in &t.source_ranges {
            n.lb_limited.insert(*fe);
            n.lb_allowed.extend(nets.iter().map(|net| (*fe, *net)));
        }
        for (np, d) in &t.node_ports {
            match d {
                Dispatch::Reject => {
                    n.reject_np.insert(*np);
                }
                Dispatch::Drop => {
                    n.drop_np.insert(*np);
                }
                Dispatch::Backends { backends, affinity } => {
                    let backends = capped(backends, *affinity);
                    let masq = t.masq_node_ports.contains(np);
                    let p = n.picker(Kind::NodePort, backends.len(), *affinity, false, masq);
                    n.node_ports.insert(*np, p);
                    for (i, b) in backends.iter().enumerate() {
                        n.np_slots.insert((*np, p.first_slot() + i as u32), *b);
                    }
                }
            }
        }
        n
    }

    /// Take `part`'s entries out (those it holds with the same value).
    pub fn remove(&mut self, part: &SvcNft<A>) {
        fn out<K: Ord, V: PartialEq>(m: &mut BTreeMap<K, V>, part: &BTreeMap<K, V>) {
            for (k, v) in part {
                if m.get(k) == Some(v) {
                    m.remove(k);
                }
            }
        }
        out(&mut self.frontends, &part.frontends);
        out(&mut self.node_ports, &part.node_ports);
        out(&mut self.frontends_in, &part.frontends_in);
        out(&mut self.node_ports_in, &part.node_ports_in);
        out(&mut self.fe_slots, &part.fe_slots);
        out(&mut self.np_slots, &part.np_slots);
        // One lookup per entry of the part, not a pass over the whole
        // table: a full sync takes out one (often empty) part per Service.
        fn without<K: Ord>(set: &mut BTreeSet<K>, part: &BTreeSet<K>) {
            for k in part {
                set.remove(k);
            }
        }
        without(&mut self.reject_fe, &part.reject_fe);
        without(&mut self.drop_fe, &part.drop_fe);
        without(&mut self.reject_np, &part.reject_np);
        without(&mut self.drop_np, &part.drop_np);
        without(&mut self.lb_limited, &part.lb_limited);
        without(&mut self.lb_allowed, &part.lb_allowed);
        without(&mut self.cluster_ips, &part.cluster_ips);
    }

    /// How many entries each element map and set holds (not the hairpin
    /// set, the pickers or the affinity count, which are the whole
    /// table's).
    pub fn entries(&self) -> [usize; 13] {
        [
            self.frontends.len(),
            self.node_ports.len(),
            self.frontends_in.len(),
            self.node_ports_in.len(),
            self.fe_slots.len(),
            self.np_slots.len(),
            self.reject_fe.len(),
            self.drop_fe.len(),
            self.reject_np.len(),
            self.drop_np.len(),
            self.lb_limited.len(),
            self.lb_allowed.len(),
            self.cluster_ips.len(),
        ]
    }

    /// The frontends, node ports and ClusterIPs any entry of this part
    /// is keyed by: two parts with none in common cannot hold the same
    /// entry.
    pub fn claims(&self) -> (BTreeSet<Frontend<A>>, BTreeSet<NodePort>, BTreeSet<A>) {
        let mut fe: BTreeSet<Frontend<A>> = self.frontends.keys().copied().collect();
        fe.extend(self.frontends_in.keys());
        fe.extend(self.fe_slots.keys().map(|(f, _)| *f));
        fe.extend(&self.reject_fe);
        fe.extend(&self.drop_fe);
        fe.extend(&self.lb_limited);
        fe.extend(self.lb_allowed.iter().map(|(f, _)| *f));
        let mut np: BTreeSet<NodePort> = self.node_ports.keys().copied().collect();
        np.extend(self.node_ports_in.keys());
        np.extend(self.np_slots.keys().map(|(p, _)| *p));
        np.extend(&self.reject_np);
        np.extend(&self.drop_np);
        (fe, np, self.cluster_ips.clone())
    }

    /// Whether every entry of `part` is here with the same value.
    pub fn holds(&self, part: &SvcNft<A>) -> bool {
        fn map<K: Ord, V: PartialEq>(m: &BTreeMap<K, V>, p: &BTreeMap<K, V>) -> bool {
            p.iter().all(|(k, v)| m.get(k) == Some(v))
        }
        fn set<K: Ord>(m: &BTreeSet<K>, p: &BTreeSet<K>) -> bool {
            p.iter().all(|k| m.contains(k))
        }
        map(&self.frontends, &part.frontends)
            && map(&self.node_ports, &part.node_ports)
            && map(&self.frontends_in, &part.frontends_in)
            && map(&self.node_ports_in, &part.node_ports_in)
            && map(&self.fe_slots, &part.fe_slots)
            && map(&self.np_slots, &part.np_slots)
            && set(&self.reject_fe, &part.reject_fe)
            && set(&self.drop_fe, &part.drop_fe)
            && set(&self.reject_np, &part.reject_np)
            && set(&self.drop_np, &part.drop_np)
            && set(&self.lb_limited, &part.lb_limited)
            && set(&self.lb_allowed, &part.lb_allowed)
            && set(&self.cluster_ips, &part.cluster_ips)
    }

    /// The entries new connections can reach: without slots no picker of
    /// their frontend picks (left by a Service that lost a frontend it
    /// shared with another, whose picker numbers its slots otherwise),
    /// and without the picking chains and affinity sets, which the
    /// entries imply.
    pub fn reachable(&self) -> SvcNft<A> {
        let picks = |p: Option<&Picker>, slot: u32| {
            p.is_some_and(|p| (p.first_slot()..p.first_slot() + p.count).contains(&slot))
        };
        let mut out = self.clone();
        out.fe_slots.retain(|(fe, slot), _| {
            picks(self.frontends.get(fe), *slot) || picks(self.frontends_in.get(fe), *slot)
        });
        out.np_slots.retain(|(np, slot), _| {
            picks(self.node_ports.get(np), *slot) || picks(self.node_ports_in.get(np), *slot)
        });
        out.pickers.clear();
        out.affinity_slots = 0;
        out
    }

    /// Put `part`'s entries in (its pickers are counted by the caller).
    pub fn add(&mut self, part: &SvcNft<A>) {
        self.frontends.extend(part.frontends.clone());
        self.node_ports.extend(part.node_ports.clone());
        self.frontends_in.extend(part.frontends_in.clone());
        self.node_ports_in.extend(part.node_ports_in.clone());
        self.fe_slots.extend(part.fe_slots.clone());
        self.np_slots.extend(part.np_slots.clone());
        self.reject_fe.extend(part.reject_fe.iter().copied());
        self.drop_fe.extend(part.drop_fe.iter().copied());
        self.reject_np.extend(part.reject_np.iter().copied());
        self.drop_np.extend(part.drop_np.iter().copied());
        self.lb_limited.extend(part.lb_limited.iter().copied());
        self.lb_allowed.extend(part.lb_allowed.iter().copied());
        self.cluster_ips.extend(part.cluster_ips.iter().copied());
    }

    fn picker(
        &mut self,
        kind: Kind,
        count: usize,
        affinity: Option<u32>,
        inside: bool,
        masq: bool,
    ) -> Picker {
        let p = Picker {
            kind,
            count: count as u32,
            affinity,
            inside,
            masq,
        };
        if affinity.is_some() {
            self.affinity_slots = self.affinity_slots.max(p.count);
        }
        self.pickers.insert(p);
        p
    }
}
