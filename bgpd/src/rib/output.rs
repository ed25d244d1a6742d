//! Draining a peer's pending output into UPDATE-sized batches.
//!
//! Pending work is a dirty bit per prefix slot (see `FamilyOut`). A scan
//! sorts a window of dirty slots into groups by the source path they would
//! export (or withdraw); each call then takes up to `max` prefixes of one
//! group and rewrites that group's attributes once. A slot is evaluated
//! against the RIB as it is at take time, so only the latest state goes
//! out.

use super::attrs::{AttrId, AttrTable};
use super::decision;
use super::export::{export_verdict, exportable, graceful_shutdown, rewrite};
use super::peers::{FamilyOut, GroupKey, Peers, info_in};
use super::table::{Addr, PeerIdx, Table};
use super::types::{LocalConfig, OutBatch};
use crate::filter::Verdict;
use hashbrown::HashMap;
use std::sync::Arc;

pub(crate) struct Drain<'a, A> {
    pub local: &'a LocalConfig,
    /// RFC 8326: every route goes out marked (`export::graceful_shutdown`).
    pub draining: bool,
    pub attrs: &'a AttrTable,
    pub peers: &'a Peers,
    pub table: &'a Table<A>,
    pub target: PeerIdx,
    pub scratch: &'a mut Vec<usize>,
    /// Slots left with no paths whose withdraw went out: candidates to free.
    pub emptied: &'a mut Vec<u32>,
    /// Change in the number of prefixes the peer holds.
    pub adv_delta: i64,
}

impl<A: Addr> Drain<'_, A> {
    /// What the peer should be sent for slot `i` now; None if nothing.
    fn eval(&mut self, out: &FamilyOut, i: u32) -> Option<GroupKey> {
        let best = self.table.with_paths(i, |ps| {
            decision::best(ps, self.attrs, self.peers, self.scratch)
        });
        if let Some(b) = best {
            let e = self.attrs.get(b.attr);
            let infos = &self.peers.infos;
            let (src, target) = (info_in(infos, b.peer), info_in(infos, self.target));
            if exportable(src, &e.meta, e.attrs.next_hop, target, A::FAMILY) {
                match export_verdict(target, src, &self.table.prefix(i)) {
                    Verdict::Accept(rule) => return Some(GroupKey::of(&b, rule)),
                    // Rejected by the export rules: withdrawn if held.
                    Verdict::Reject => {}
                }
            }
        }
        out.adv.get(i).then_some(GroupKey::Withdraw)
    }

    /// Sorts up to `limit` dirty slots, from the cursor on (wrapping), into
    /// groups. Slots needing nothing are settled on the spot.
    fn scan(&mut self, out: &mut FamilyOut, limit: usize) {
        let start = out.cursor;
        let mut at = start;
        let mut wrapped = false;
        let mut groups: HashMap<GroupKey, usize> = HashMap::new();
        let mut seen = 0;
        while seen < limit {
            let next = match out.dirty.next_from(at) {
                Some(n) if !(wrapped && n >= start) => n,
                _ if !wrapped && start > 0 => {
                    wrapped = true;
                    at = 0;
                    continue;
                }
                _ => break,
            };
            seen += 1;
            at = next.saturating_add(1);
            match self.eval(out, next) {
                None => self.settle(out, next),
                Some(key) => {
                    let g = *groups.entry(key).or_insert_with(|| {
                        out.hints.push((key, Vec::new()));
                        out.hints.len() - 1
                    });
                    out.hints[g].1.push(next);
                }
            }
        }
        out.cursor = at;
        // Take groups in the order found.
        out.hints.reverse();
        for (_, v) in out.hints.iter_mut() {
            v.reverse();
        }
    }

    /// Slot `i` needs nothing more for this peer.
    fn settle(&mut self, out: &mut FamilyOut, i: u32) {
        out.dirty.clear(i);
        if self.table.is_empty_slot(i) {
            self.emptied.push(i);
        }
    }

    fn out_attrs(
        &self,
        out: &mut FamilyOut,
        src: PeerIdx,
        attr: u32,
        rule: u32,
    ) -> Option<Arc<crate::model::PathAttrs>> {
        let e = self.attrs.get(AttrId(attr));
        if let Some((p, a, r, o)) = &out.last_out
            && *p == src
            && *r == rule
            && Arc::ptr_eq(a, &e.attrs)
        {
            return Some(o.clone());
        }
        let infos = &self.peers.infos;
        let target = info_in(infos, self.target);
        // An export rule's changes come first; our own AS then goes in
        // front of the path as for any route.
        let changed = target.cfg.as_ref().and_then(|c| {
            let r = c.filters.export.rule(A::FAMILY, rule)?;
            let mut a = (*e.attrs).clone();
            r.apply(&mut a);
            Some(a)
        });
        let mut rewritten = rewrite(
            self.local,
            info_in(infos, src),
            &e.meta,
            changed.as_ref().unwrap_or(&e.attrs),
            target,
            A::FAMILY,
        )?;
        if self.draining {
            graceful_shutdown(&mut rewritten, target.ibgp());
        }
        let rewritten = Arc::new(rewritten);
        out.last_out = Some((src, e.attrs.clone(), rule, rewritten.clone()));
        Some(rewritten)
    }

    /// The next batch, if the peer has anything pending in this family.
    pub fn next(&mut self, out: &mut FamilyOut, max: usize) -> Option<OutBatch> {
        let max = max.max(1);
        // Terminates: a scan settles or groups at least one dirty slot, and
        // groups from a fresh scan match (nothing changes during a call).
        loop {
            if out.hints.is_empty() {
                if out.dirty.count() == 0 {
                    return None;
                }
                self.scan(out, max.saturating_mul(16).max(4096));
                continue;
            }
            let (key, mut list) = out.hints.pop()?;
            // Rewritten on the first slot that still matches: by then the
            // key's attribute id is known to be live.
            let mut attrs = None;
            let mut prefixes = Vec::with_capacity(list.len().min(max));
            while let Some(i) = list.pop() {
                if !out.dirty.get(i) {
                    continue;
                }
                let now = self.eval(out, i);
                if now.is_none() {
                    self.settle(out, i);
                    continue;
                }
                if now != Some(key) {
                    // Changed since the scan; a later scan finds it again.
                    continue;
                }
                if let GroupKey::Announce { peer, attr, rule } = key
                    && attrs.is_none()
                {
                    attrs = self.out_attrs(out, peer, attr, rule);
                }
                match key {
                    GroupKey::Announce { .. } if attrs.is_none() => {
                        // Cannot happen (`exportable` and `rewrite` agree);
                        // settle rather than loop.
                        self.settle(out, i);
                        continue;
                    }
                    GroupKey::Announce { .. } => {
                        if out.adv.set(i) {
                            self.adv_delta += 1;
                        }
                        out.dirty.clear(i);
                    }
                    GroupKey::Withdraw => {
                        if out.adv.clear(i) {
                            self.adv_delta -= 1;
                        }
                        self.settle(out, i);
                    }
                }
                prefixes.push(self.table.prefix(i));
                if prefixes.len() >= max {
                    break;
                }
            }
            if !list.is_empty() {
                out.hints.push((key, list));
            }
            if prefixes.is_empty() {
                continue;
            }
            let family = A::FAMILY;
            return Some(match attrs {
                Some(attrs) => OutBatch::Announce {
                    family,
                    attrs,
                    prefixes,
                },
                None => OutBatch::Withdraw { family, prefixes },
            });
        }
    }
}
