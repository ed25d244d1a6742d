//! Read-only views for the control API and for measurement.

use super::Rib;
use super::decision;
use super::peers::{Peers, fam_index};
use super::table::{Addr, Table};
use super::types::{BestView, PathView, PeerCounts, PeerId, RouteView};
use crate::model::Family;
use ipnet::IpNet;

impl Rib {
    /// The best route for exactly `prefix`.
    pub fn best(&self, prefix: &IpNet) -> Option<BestView> {
        match prefix.trunc() {
            IpNet::V4(n) => self.best_in(&self.v4, n.network(), n.prefix_len()),
            IpNet::V6(n) => self.best_in(&self.v6, n.network(), n.prefix_len()),
        }
    }

    fn best_in<A: Addr>(&self, t: &Table<A>, a: A, len: u8) -> Option<BestView> {
        let i = t.find(a, len)?;
        let sel = t.with_paths(i, |ps| {
            decision::select(ps, &self.attrs, &self.peers, &mut Vec::new())
        });
        let best = sel.best?;
        Some(BestView {
            prefix: t.prefix(i),
            peer: self.peers.info(best.peer).id,
            attrs: self.attrs.get(best.attr).attrs.clone(),
            stale: best.stale,
            next_hops: sel.kernel.map(|k| k.to_vec()).unwrap_or_default(),
        })
    }

    /// Every prefix of `family` with every path, best and multipath marked.
    pub fn routes(&self, family: Family) -> impl Iterator<Item = RouteView> + '_ {
        let v4 = (family == Family::Ipv4Unicast).then(|| self.routes_in(&self.v4));
        let v6 = (family == Family::Ipv6Unicast).then(|| self.routes_in(&self.v6));
        v4.into_iter().flatten().chain(v6.into_iter().flatten())
    }

    fn routes_in<'a, A: Addr>(&'a self, t: &'a Table<A>) -> impl Iterator<Item = RouteView> + 'a {
        t.occupied().map(move |i| {
            let mut ecmp = Vec::new();
            let paths = t.with_paths(i, |ps| {
                let best = decision::rank(ps, &self.attrs, &self.peers, &mut ecmp);
                ps.iter()
                    .enumerate()
                    .map(|(k, p)| PathView {
                        peer: self.peers.info(p.peer).id,
                        attrs: self.attrs.get(p.attr).attrs.clone(),
                        best: best == Some(k),
                        multipath: best.is_some() && ecmp.contains(&k),
                        stale: p.stale,
                    })
                    .collect()
            });
            RouteView {
                prefix: t.prefix(i),
                paths,
            }
        })
    }

    /// The peer's counters (zero for an unknown peer).
    pub fn counts(&self, peer: PeerId) -> PeerCounts {
        self.peers
            .idx(peer)
            .and_then(|x| self.peers.infos.get(x as usize))
            .and_then(|p| p.as_ref())
            .map(|p| p.counts)
            .unwrap_or_default()
    }

    /// Prefixes of `family` with at least one path.
    pub fn prefix_count(&self, family: Family) -> usize {
        match family {
            Family::Ipv4Unicast => self.v4.prefix_count(),
            Family::Ipv6Unicast => self.v6.prefix_count(),
        }
    }

    /// Distinct attribute sets held.
    pub fn attr_set_count(&self) -> usize {
        self.attrs.len()
    }

    /// Prefixes pending output to `peer` (for metrics and tests).
    pub fn pending(&self, peer: PeerId) -> usize {
        let Some(x) = self.peers.idx(peer) else {
            return 0;
        };
        Family::ALL
            .iter()
            .filter_map(|&f| self.peers.outs[x as usize].fams[fam_index(f)].as_ref())
            .map(|o| o.dirty.count())
            .sum()
    }

    /// Heap bytes held by the RIB, from capacities (an estimate that does
    /// not count allocator overhead or the vectors inside attribute sets).
    pub fn heap_bytes(&self) -> usize {
        self.v4.heap_bytes()
            + self.v6.heap_bytes()
            + self.attrs.heap_bytes()
            + peers_heap(&self.peers)
            + self.scratch.capacity() * 8
    }
}

fn peers_heap(p: &Peers) -> usize {
    p.outs
        .iter()
        .flat_map(|o| o.fams.iter().flatten())
        .map(|f| f.heap_bytes())
        .sum::<usize>()
        + p.infos.capacity() * size_of::<Option<super::peers::PeerInfo>>()
}

impl Rib {
    /// Paths held for `family` (every peer's, ours included). Walks the
    /// table: for status queries, not for the hot path.
    pub fn path_count(&self, family: Family) -> usize {
        fn count<A: Addr>(t: &Table<A>) -> usize {
            t.occupied().map(|i| t.with_paths(i, |ps| ps.len())).sum()
        }
        match family {
            Family::Ipv4Unicast => count(&self.v4),
            Family::Ipv6Unicast => count(&self.v6),
        }
    }

    /// Paths from `peer` flagged stale (graceful restart). Walks the table.
    pub fn stale_count(&self, peer: PeerId) -> u64 {
        fn count<A: Addr>(t: &Table<A>, x: super::table::PeerIdx) -> u64 {
            t.occupied()
                .map(|i| {
                    t.with_paths(i, |ps| {
                        ps.iter().filter(|p| p.peer == x && p.stale).count() as u64
                    })
                })
                .sum()
        }
        match self.peers.idx(peer) {
            Some(x) => count(&self.v4, x) + count(&self.v6, x),
            None => 0,
        }
    }
}
