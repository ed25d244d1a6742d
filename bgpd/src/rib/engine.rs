//! The per-prefix change engine: apply one change to a prefix, then derive
//! what it means for the kernel and for every peer's output. Shared by all
//! public operations; generic over the address family.

use super::attrs::AttrTable;
use super::decision::{self, Selection};
use super::export::exportable;
use super::peers::{Peers, fam_index, info_in};
use super::table::{Addr, Path, Table};
use super::types::{Changes, NextHops};

/// The parts of the RIB an operation works on, borrowed apart from the
/// tables so that a table and the rest can be used together.
pub(crate) struct Ctx<'a> {
    pub attrs: &'a mut AttrTable,
    pub peers: &'a mut Peers,
    pub scratch: &'a mut Vec<usize>,
    pub changes: &'a mut Changes,
}

impl Ctx<'_> {
    pub fn selection<A: Addr>(&mut self, t: &Table<A>, i: u32) -> Selection {
        t.with_paths(i, |ps| {
            decision::select(ps, self.attrs, self.peers, self.scratch)
        })
    }

    /// Adds or replaces a path (its attribute reference already taken).
    /// Returns true if the peer had no path for this prefix before.
    pub fn upsert<A: Addr>(&mut self, t: &mut Table<A>, addr: A, len: u8, path: Path) -> bool {
        let i = t.find_or_insert(addr, len);
        let before = self.selection(t, i);
        let old = t.upsert(i, path);
        if let Some(o) = old {
            self.attrs.release(o.attr, 1);
        }
        self.finish(t, i, before);
        old.is_none()
    }

    /// Removes the paths of slot `i` matching `pred`; returns how many went,
    /// with `on_removed` told each one's peer.
    pub fn remove_where<A: Addr>(
        &mut self,
        t: &mut Table<A>,
        i: u32,
        pred: impl FnMut(&Path) -> bool,
        removed: &mut Vec<Path>,
    ) -> usize {
        removed.clear();
        let before = self.selection(t, i);
        t.remove_where(i, pred, removed);
        if removed.is_empty() {
            return 0;
        }
        for p in removed.iter() {
            self.attrs.release(p.attr, 1);
            if let Some(info) = self.peers.info_mut(p.peer) {
                info.counts.accepted = info.counts.accepted.saturating_sub(1);
            }
        }
        self.finish(t, i, before);
        removed.len()
    }

    /// After a change to slot `i`: kernel update, output marking, and the
    /// slot's release if nothing refers to it any more.
    fn finish<A: Addr>(&mut self, t: &mut Table<A>, i: u32, before: Selection) {
        let after = self.selection(t, i);
        if !same_next_hops(&before.kernel, &after.kernel) {
            self.changes
                .kernel
                .push((t.prefix(i), after.kernel.clone()));
        }
        if before.best_route() != after.best_route() {
            self.mark(i, after.best, A::FAMILY);
        }
        self.try_free(t, i);
    }

    /// Queues slot `i` for every peer whose view of it may change: those
    /// that hold it now (a withdraw or replacement is due) and those the
    /// new best path may be exported to.
    pub fn mark(&mut self, i: u32, best: Option<Path>, family: crate::model::Family) {
        let f = fam_index(family);
        let Peers {
            infos,
            outs,
            out_peers,
            ..
        } = &mut *self.peers;
        for &x in out_peers[f].iter() {
            let Some(out) = outs.get_mut(x as usize) else {
                continue;
            };
            let touched = &mut out.touched;
            let Some(fo) = out.fams[f].as_mut() else {
                continue;
            };
            if fo.dirty.get(i) {
                continue;
            }
            let target = info_in(infos, x);
            let want = target.export
                && best.is_some_and(|b| {
                    let e = self.attrs.get(b.attr);
                    exportable(
                        info_in(infos, b.peer),
                        &e.meta,
                        e.attrs.next_hop,
                        target,
                        family,
                    )
                });
            if want || fo.adv.get(i) {
                fo.dirty.set(i);
                *touched = true;
            }
        }
    }

    /// Frees slot `i` if it has no paths and no peer holds or awaits it.
    pub fn try_free<A: Addr>(&mut self, t: &mut Table<A>, i: u32) {
        if !t.is_empty_slot(i) {
            return;
        }
        let f = fam_index(A::FAMILY);
        let busy = self.peers.out_peers[f].iter().any(|&x| {
            self.peers.outs[x as usize].fams[f]
                .as_ref()
                .is_some_and(|fo| fo.dirty.get(i) || fo.adv.get(i))
        });
        if !busy {
            t.free_slot(i);
        }
    }
}

fn same_next_hops(a: &Option<NextHops>, b: &Option<NextHops>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b) || a == b,
        _ => false,
    }
}
