//! The RIB's operations: sessions coming and going, UPDATEs in, batches
//! out.

use super::Rib;
use super::attrs::AttrTable;
use super::decision;
use super::engine::Ctx;
use super::export::exportable;
use super::peers::{LOCAL_IDX, Peers, fam_index, info_in};
use super::table::{Addr, Path, PeerIdx, Table};
use super::types::{Changes, ImportError, LOCAL, LocalConfig, PeerConfig, PeerId};
use crate::filter::{PeerFilters, Verdict};
use crate::model::{Family, PathAttrs, checks, well_known};
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// A table and the rest of the RIB, borrowed apart.
pub(super) struct Parts<'a> {
    pub(super) ctx: Ctx<'a>,
    pub(super) v4: &'a mut Table<Ipv4Addr>,
    pub(super) v6: &'a mut Table<Ipv6Addr>,
    pub(super) removed: &'a mut Vec<Path>,
}

impl Rib {
    pub fn new(local: LocalConfig) -> Rib {
        Rib {
            local,
            attrs: AttrTable::default(),
            peers: Peers::new(),
            v4: Table::default(),
            v6: Table::default(),
            scratch: Vec::new(),
            removed: Vec::new(),
            draining: false,
        }
    }

    pub(super) fn parts<'a>(&'a mut self, changes: &'a mut Changes) -> Parts<'a> {
        Parts {
            ctx: Ctx {
                attrs: &mut self.attrs,
                peers: &mut self.peers,
                scratch: &mut self.scratch,
                changes,
            },
            v4: &mut self.v4,
            v6: &mut self.v6,
            removed: &mut self.removed,
        }
    }

    fn done(&mut self, mut changes: Changes) -> Changes {
        changes.peers_with_output = self.peers.take_touched();
        changes
    }

    /// A session reached Established. Queues the full table for it (the
    /// initial advertisement). A peer marked stale keeps its paths.
    pub fn peer_up(&mut self, peer: PeerConfig) -> Changes {
        let changes = Changes::default();
        if peer.id == LOCAL {
            return changes;
        }
        let Some(x) = self.peers.get_or_add(peer.id) else {
            return changes;
        };
        self.drop_output(x);
        let on = [
            peer.families.contains(&Family::Ipv4Unicast),
            peer.families.contains(&Family::Ipv6Unicast),
        ];
        if let Some(info) = self.peers.info_mut(x) {
            info.cfg = Some(peer);
            info.up = true;
            info.counts.received = 0;
            info.counts.advertised = 0;
        }
        self.peers.set_output(x, on);
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v4, x);
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v6, x);
        self.done(changes)
    }

    /// The session is gone: its paths are removed (withdrawn from others).
    pub fn peer_down(&mut self, peer: PeerId) -> Changes {
        let mut changes = Changes::default();
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return changes;
        };
        self.drop_output(x);
        let p = self.parts(&mut changes);
        let (mut ctx, removed) = (p.ctx, p.removed);
        remove_peer_paths(&mut ctx, p.v4, x, false, removed);
        remove_peer_paths(&mut ctx, p.v6, x, false, removed);
        self.peers.remove(x);
        self.done(changes)
    }

    /// RFC 4724 4.2 (helper side): the peer restarted. Its paths of
    /// `families` (those of its graceful restart capability) stay, flagged
    /// stale, until re-announced or swept; its paths of other families go
    /// now, and so do paths still stale from an earlier restart (a route
    /// "previously marked as stale MUST be deleted"). Output to it stops
    /// until it is up again.
    pub fn mark_stale(&mut self, peer: PeerId, families: &[Family]) -> Changes {
        let mut changes = Changes::default();
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return changes;
        };
        self.drop_output(x);
        if let Some(info) = self.peers.info_mut(x) {
            info.up = false;
        }
        let keep4 = families.contains(&Family::Ipv4Unicast);
        let keep6 = families.contains(&Family::Ipv6Unicast);
        let p = self.parts(&mut changes);
        let (mut ctx, removed) = (p.ctx, p.removed);
        remove_peer_paths(&mut ctx, p.v4, x, keep4, removed);
        remove_peer_paths(&mut ctx, p.v6, x, keep6, removed);
        if keep4 {
            mark_peer_stale(&mut self.v4, x);
        }
        if keep6 {
            mark_peer_stale(&mut self.v6, x);
        }
        self.done(changes)
    }

    /// End-of-RIB (for `family`) or the restart timer (None: all families):
    /// drops the peer's paths still stale.
    pub fn sweep_stale(&mut self, peer: PeerId, family: Option<Family>) -> Changes {
        let mut changes = Changes::default();
        let Some(x) = self.peers.idx(peer) else {
            return changes;
        };
        let p = self.parts(&mut changes);
        let (mut ctx, removed) = (p.ctx, p.removed);
        if family.is_none_or(|f| f == Family::Ipv4Unicast) {
            remove_peer_paths(&mut ctx, p.v4, x, true, removed);
        }
        if family.is_none_or(|f| f == Family::Ipv6Unicast) {
            remove_peer_paths(&mut ctx, p.v6, x, true, removed);
        }
        self.done(changes)
    }

    /// An UPDATE's announcements: `prefixes` with `attrs` from `peer`.
    ///
    /// Import rules: from eBGP, LOCAL_PREF is ignored (RFC 4271 5.1.5) and
    /// ORIGINATOR_ID / CLUSTER_LIST discarded (RFC 7606 7.9, 7.10); a path
    /// with a loop — our AS in the AS_PATH, our router id as
    /// ORIGINATOR_ID or our cluster id in CLUSTER_LIST (RFC 4456 8) — is
    /// dropped and counted, and withdraws what the peer sent before for
    /// those prefixes. Prefixes of families not negotiated are ignored.
    /// Over the peer's max-prefix limit, nothing is applied.
    pub fn announce(
        &mut self,
        peer: PeerId,
        mut attrs: PathAttrs,
        prefixes: &[IpNet],
    ) -> Result<Changes, ImportError> {
        let x = self
            .peers
            .idx(peer)
            .filter(|&x| x != LOCAL_IDX)
            .ok_or(ImportError::UnknownPeer(peer))?;
        let info = self.peers.info(x);
        let Some(cfg) = info.cfg.as_ref() else {
            return Err(ImportError::UnknownPeer(peer));
        };
        let (ibgp, max_prefix) = (cfg.ibgp, cfg.max_prefix);
        let own = [cfg.local_v4.map(IpAddr::V4), cfg.local_v6.map(IpAddr::V6)];
        let filters = cfg.filters.clone();
        let fams = [
            cfg.families.contains(&Family::Ipv4Unicast),
            cfg.families.contains(&Family::Ipv6Unicast),
        ];
        if !ibgp {
            attrs.local_pref = None;
            attrs.originator_id = None;
            attrs.cluster_list.clear();
        }
        // RFC 8326 4.2: a path its sender is about to take down is the
        // least preferred (import rules below may still say otherwise).
        if attrs.communities.contains(&well_known::GRACEFUL_SHUTDOWN) {
            attrs.local_pref = Some(0);
        }
        // RFC 4271 9.1.2: our AS in the path is a loop whatever the peer
        // (bgpd has no confederations and no allowas-in).
        let looped = attrs.as_path.contains(self.local.asn)
            || attrs.originator_id == Some(self.local.router_id)
            || attrs.cluster_list.contains(&self.local.cluster_id);
        if let Some(info) = self.peers.info_mut(x) {
            info.counts.received += prefixes.len() as u64;
        }
        if looped {
            if let Some(info) = self.peers.info_mut(x) {
                info.counts.looped += prefixes.len() as u64;
            }
            return Ok(self.withdraw(peer, prefixes));
        }
        // The codec already made these treat-as-withdraw (and logged it);
        // checked again so that no caller can install such a path.
        let own: Vec<IpAddr> = own.into_iter().flatten().collect();
        if checks::has_confed_segments(&attrs.as_path)
            || checks::unusable_next_hop(&attrs.next_hop, &own).is_some()
        {
            return Ok(self.withdraw(peer, prefixes));
        }
        let mut changes = Changes::default();
        if filters.import.is_empty() {
            self.check_max_prefix(x, max_prefix, prefixes)?;
            self.install(x, fams, attrs, prefixes, &mut changes);
            return Ok(self.done(changes));
        }
        // Import rules: a rejected prefix is as if withdrawn (the peer's
        // earlier path for it goes); accepted ones are grouped by the rule
        // that changes their attributes.
        let mut rejected = Vec::new();
        // Keyed by (IPv6?, the rule that changes the attributes).
        type Key = (bool, Option<u32>);
        let mut groups: Vec<(Key, Vec<IpNet>)> = Vec::new();
        for net in prefixes {
            match filters.import.verdict(net, true) {
                Verdict::Reject => rejected.push(*net),
                Verdict::Accept(rule) => {
                    let key = (matches!(net, IpNet::V6(_)), rule);
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, v)) => v.push(*net),
                        None => groups.push((key, vec![*net])),
                    }
                }
            }
        }
        let accepted: Vec<IpNet> = groups.iter().flat_map(|(_, v)| v.iter().copied()).collect();
        self.check_max_prefix(x, max_prefix, &accepted)?;
        if let Some(info) = self.peers.info_mut(x) {
            info.counts.filtered += rejected.len() as u64;
        }
        self.remove_prefixes(x, &rejected, &mut changes);
        for ((v6, rule), nets) in groups {
            let family = if v6 {
                Family::Ipv6Unicast
            } else {
                Family::Ipv4Unicast
            };
            let mut a = attrs.clone();
            if let Some(r) = rule.and_then(|i| filters.import.rule(family, i)) {
                r.apply(&mut a);
            }
            self.install(x, fams, a, &nets, &mut changes);
        }
        Ok(self.done(changes))
    }

    /// Over the peer's max-prefix limit with `prefixes` added? Then nothing
    /// may be applied.
    fn check_max_prefix(
        &self,
        x: PeerIdx,
        max_prefix: Option<u32>,
        prefixes: &[IpNet],
    ) -> Result<(), ImportError> {
        if let Some(limit) = max_prefix {
            let accepted = self.peers.info(x).counts.accepted;
            if accepted + prefixes.len() as u64 > u64::from(limit) {
                // A prefix repeated in one UPDATE (or with other host
                // bits) is one route: counted once.
                let mut seen = std::collections::HashSet::new();
                let new = prefixes
                    .iter()
                    .map(IpNet::trunc)
                    .filter(|n| !self.has_path(x, n) && seen.insert(*n))
                    .count() as u64;
                if accepted + new > u64::from(limit) {
                    return Err(ImportError::MaxPrefix { limit });
                }
            }
        }
        Ok(())
    }

    /// Puts `prefixes` with `attrs` from peer `x` into the tables (families
    /// not negotiated, per `fams`, are skipped).
    fn install(
        &mut self,
        x: PeerIdx,
        fams: [bool; 2],
        attrs: PathAttrs,
        prefixes: &[IpNet],
        changes: &mut Changes,
    ) {
        let id = self.attrs.intern(attrs, prefixes.len() as u32);
        let mut p = self.parts(changes);
        let (mut added, mut skipped) = (0u64, 0u32);
        for net in prefixes {
            let path = Path {
                attr: id,
                peer: x,
                stale: false,
            };
            let new = match net.trunc() {
                IpNet::V4(n) if fams[0] => p.ctx.upsert(p.v4, n.network(), n.prefix_len(), path),
                IpNet::V6(n) if fams[1] => p.ctx.upsert(p.v6, n.network(), n.prefix_len(), path),
                _ => {
                    skipped += 1;
                    continue;
                }
            };
            added += u64::from(new);
        }
        p.ctx.attrs.release(id, skipped);
        if let Some(info) = self.peers.info_mut(x) {
            info.counts.accepted += added;
        }
    }

    /// New import and export rules for a peer, taken over without a reset:
    /// everything it holds or could hold is queued, so what the new export
    /// rules change goes out (or is withdrawn). Routes already imported
    /// stay as they are: the caller asks the peer to send them again
    /// (RFC 2918) when the import rules changed.
    pub fn set_filters(&mut self, peer: PeerId, filters: Arc<PeerFilters>) -> Changes {
        let changes = Changes::default();
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return changes;
        };
        let Some(cfg) = self.peers.info_mut(x).and_then(|i| i.cfg.as_mut()) else {
            return changes;
        };
        cfg.filters = filters;
        for f in self.peers.outs[x as usize].fams.iter_mut().flatten() {
            f.last_out = None;
        }
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v4, x);
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v6, x);
        self.done(changes)
    }

    fn has_path(&self, x: PeerIdx, net: &IpNet) -> bool {
        fn has<A: Addr>(t: &Table<A>, a: A, len: u8, x: PeerIdx) -> bool {
            t.find(a, len)
                .is_some_and(|i| t.with_paths(i, |ps| ps.iter().any(|p| p.peer == x)))
        }
        match net.trunc() {
            IpNet::V4(n) => has(&self.v4, n.network(), n.prefix_len(), x),
            IpNet::V6(n) => has(&self.v6, n.network(), n.prefix_len(), x),
        }
    }

    /// An UPDATE's withdrawals.
    pub fn withdraw(&mut self, peer: PeerId, prefixes: &[IpNet]) -> Changes {
        let mut changes = Changes::default();
        let Some(x) = self.peers.idx(peer) else {
            return changes;
        };
        self.remove_prefixes(x, prefixes, &mut changes);
        self.done(changes)
    }

    fn remove_prefixes(&mut self, x: PeerIdx, prefixes: &[IpNet], changes: &mut Changes) {
        let p = self.parts(changes);
        let (mut ctx, removed) = (p.ctx, p.removed);
        for net in prefixes {
            match net.trunc() {
                IpNet::V4(n) => remove_one(&mut ctx, p.v4, n.network(), n.prefix_len(), x, removed),
                IpNet::V6(n) => remove_one(&mut ctx, p.v6, n.network(), n.prefix_len(), x, removed),
            }
        }
    }

    /// A local route (from configuration). A next hop of `NextHop::None`
    /// means "self": each peer gets our address on its session. Local
    /// routes win over learned ones and never go to the kernel.
    pub fn originate(&mut self, attrs: PathAttrs, prefix: IpNet) -> Changes {
        let mut changes = Changes::default();
        let id = self.attrs.intern(attrs, 1);
        let path = Path {
            attr: id,
            peer: LOCAL_IDX,
            stale: false,
        };
        let mut p = self.parts(&mut changes);
        match prefix.trunc() {
            IpNet::V4(n) => p.ctx.upsert(p.v4, n.network(), n.prefix_len(), path),
            IpNet::V6(n) => p.ctx.upsert(p.v6, n.network(), n.prefix_len(), path),
        };
        self.done(changes)
    }

    pub fn unoriginate(&mut self, prefix: IpNet) -> Changes {
        let mut changes = Changes::default();
        self.remove_prefixes(LOCAL_IDX, &[prefix], &mut changes);
        self.done(changes)
    }

    /// RFC 2918: the peer asked for our routes of `family` again. Queues
    /// every prefix of that family for it; what is exportable goes out anew.
    pub fn refresh(&mut self, peer: PeerId, family: Family) -> Changes {
        let changes = Changes::default();
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return changes;
        };
        match family {
            Family::Ipv4Unicast => {
                mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v4, x)
            }
            Family::Ipv6Unicast => {
                mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v6, x)
            }
        }
        self.done(changes)
    }

    /// RFC 8326 graceful shutdown on or off: every route to every peer
    /// goes out again, with the GRACEFUL_SHUTDOWN community and, to
    /// internal peers, LOCAL_PREF 0 (or without them again), so that the
    /// peers move their traffic to other paths before the sessions close.
    pub fn set_draining(&mut self, on: bool) -> Changes {
        let changes = Changes::default();
        if self.draining == on {
            return changes;
        }
        self.draining = on;
        for x in 0..self.peers.outs.len() as PeerIdx {
            if x == LOCAL_IDX {
                continue;
            }
            for f in self.peers.outs[x as usize].fams.iter_mut().flatten() {
                f.last_out = None;
            }
            mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v4, x);
            mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v6, x);
        }
        self.done(changes)
    }

    pub fn draining(&self) -> bool {
        self.draining
    }

    /// Turns export to a peer on or off (off: receive-only, as the
    /// benchmark's injectors are). Takes effect at once: a peer that is up
    /// gets the withdraws or announcements that follow.
    pub fn set_export(&mut self, peer: PeerId, enabled: bool) -> Changes {
        let changes = Changes::default();
        let Some(x) = self.peers.idx(peer).filter(|&x| x != LOCAL_IDX) else {
            return changes;
        };
        let Some(info) = self.peers.info_mut(x) else {
            return changes;
        };
        if info.export == enabled {
            return changes;
        }
        info.export = enabled;
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v4, x);
        mark_all_for(&self.attrs, &mut self.peers, &mut self.scratch, &self.v6, x);
        self.done(changes)
    }
}

fn remove_one<A: Addr>(
    ctx: &mut Ctx<'_>,
    t: &mut Table<A>,
    addr: A,
    len: u8,
    x: PeerIdx,
    removed: &mut Vec<Path>,
) {
    if let Some(i) = t.find(addr, len) {
        ctx.remove_where(t, i, |p| p.peer == x, removed);
    }
}

/// Marks every path of peer `x` in `t` stale.
fn mark_peer_stale<A: Addr>(t: &mut Table<A>, x: PeerIdx) {
    for i in 0..t.slot_count() {
        t.mark_stale(i, x);
    }
}

/// Removes all of peer `x`'s paths (only the stale ones if `stale_only`).
fn remove_peer_paths<A: Addr>(
    ctx: &mut Ctx<'_>,
    t: &mut Table<A>,
    x: PeerIdx,
    stale_only: bool,
    removed: &mut Vec<Path>,
) {
    let hit = |p: &Path| p.peer == x && (p.stale || !stale_only);
    for i in 0..t.slot_count() {
        if t.with_paths(i, |ps| ps.iter().any(hit)) {
            ctx.remove_where(t, i, hit, removed);
        }
    }
}

/// Queues for peer `x` every prefix whose view for it may differ from what
/// it holds: exportable now, or held now.
fn mark_all_for<A: Addr>(
    attrs: &AttrTable,
    peers: &mut Peers,
    scratch: &mut Vec<usize>,
    t: &Table<A>,
    x: PeerIdx,
) {
    let f = fam_index(A::FAMILY);
    let Some(mut out) = peers.outs[x as usize].fams[f].take() else {
        return;
    };
    let mut any = false;
    for i in t.occupied() {
        let best = t.with_paths(i, |ps| decision::best(ps, attrs, peers, scratch));
        let want = best.is_some_and(|b| {
            let e = attrs.get(b.attr);
            exportable(
                info_in(&peers.infos, b.peer),
                &e.meta,
                e.attrs.next_hop,
                info_in(&peers.infos, x),
                A::FAMILY,
            )
        });
        if want || out.adv.get(i) {
            any |= out.dirty.set(i);
        }
    }
    let po = &mut peers.outs[x as usize];
    po.fams[f] = Some(out);
    po.touched |= any;
}
