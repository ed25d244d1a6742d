//! The peers the RIB knows: their configuration (for the decision process
//! and the export filter), counters, and output state.

use super::bitset::{Bitset, DirtySet};
use super::table::{Path, PeerIdx};
use super::types::{LOCAL, PeerConfig, PeerCounts, PeerId};
use crate::model::{Family, PathAttrs};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// Index of a family in per-family arrays.
pub(crate) fn fam_index(f: Family) -> usize {
    match f {
        Family::Ipv4Unicast => 0,
        Family::Ipv6Unicast => 1,
    }
}

#[derive(Debug)]
pub(crate) struct PeerInfo {
    pub id: PeerId,
    /// None for the local pseudo-peer.
    pub cfg: Option<PeerConfig>,
    /// Session established: output flows.
    pub up: bool,
    /// Export policy: false makes the peer receive-only.
    pub export: bool,
    pub counts: PeerCounts,
}

impl PeerInfo {
    pub fn is_local(&self) -> bool {
        self.cfg.is_none()
    }
    pub fn ibgp(&self) -> bool {
        self.cfg.as_ref().is_none_or(|c| c.ibgp)
    }
    pub fn rr_client(&self) -> bool {
        self.cfg.as_ref().is_some_and(|c| c.rr_client)
    }
    pub fn router_id(&self) -> Ipv4Addr {
        self.cfg
            .as_ref()
            .map_or(Ipv4Addr::UNSPECIFIED, |c| c.router_id)
    }
    pub fn address(&self) -> IpAddr {
        self.cfg
            .as_ref()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.address)
    }
}

/// How the writer's next batch is grouped: the source path it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum GroupKey {
    /// `rule`: the export rule that changes the attributes, or NO_RULE.
    Announce {
        peer: PeerIdx,
        attr: u32,
        rule: u32,
    },
    Withdraw,
}

impl GroupKey {
    pub const NO_RULE: u32 = u32::MAX;

    pub fn of(p: &Path, rule: Option<u32>) -> GroupKey {
        GroupKey::Announce {
            peer: p.peer,
            attr: p.attr.0,
            rule: rule.unwrap_or(Self::NO_RULE),
        }
    }
}

/// A peer's output for one family. The invariant: for every slot not in
/// `dirty`, the peer holds exactly what the export filter makes of the
/// current best path (or nothing, and then `adv` is clear); `adv` says
/// what the peer holds now. So no Adj-RIB-Out copy is kept: outgoing
/// attributes are computed at drain time from the current best path, and
/// intermediate states never go out.
#[derive(Debug, Default)]
pub(crate) struct FamilyOut {
    pub dirty: DirtySet,
    pub adv: Bitset,
    /// Dirty slots already sorted into groups by the last scan; checked
    /// again when taken (they may have changed since).
    pub hints: Vec<(GroupKey, Vec<u32>)>,
    /// Where the next scan of `dirty` starts.
    pub cursor: u32,
    /// The last rewrite: (source peer, source attrs, export rule, outgoing
    /// attrs).
    pub last_out: Option<(PeerIdx, Arc<PathAttrs>, u32, Arc<PathAttrs>)>,
}

impl FamilyOut {
    pub fn heap_bytes(&self) -> usize {
        self.dirty.heap_bytes()
            + self.adv.heap_bytes()
            + self
                .hints
                .iter()
                .map(|(_, v)| v.capacity() * 4 + 32)
                .sum::<usize>()
    }
}

#[derive(Debug, Default)]
pub(crate) struct PeerOut {
    /// Present while the session is up and the family negotiated.
    pub fams: [Option<FamilyOut>; 2],
    /// New work since the operation began.
    pub touched: bool,
}

#[derive(Debug)]
pub(crate) struct Peers {
    pub infos: Vec<Option<PeerInfo>>,
    pub outs: Vec<PeerOut>,
    by_id: HashMap<PeerId, PeerIdx>,
    /// Per family: the peers with output state, for marking changes.
    pub out_peers: [Vec<PeerIdx>; 2],
}

pub(crate) const LOCAL_IDX: PeerIdx = 0;

impl Peers {
    pub fn new() -> Peers {
        let local = PeerInfo {
            id: LOCAL,
            cfg: None,
            up: false,
            export: false,
            counts: PeerCounts::default(),
        };
        Peers {
            infos: vec![Some(local)],
            outs: vec![PeerOut::default()],
            by_id: HashMap::from([(LOCAL, LOCAL_IDX)]),
            out_peers: [Vec::new(), Vec::new()],
        }
    }

    pub fn idx(&self, id: PeerId) -> Option<PeerIdx> {
        self.by_id.get(&id).copied()
    }

    pub fn info(&self, i: PeerIdx) -> &PeerInfo {
        info_in(&self.infos, i)
    }

    pub fn info_mut(&mut self, i: PeerIdx) -> Option<&mut PeerInfo> {
        self.infos.get_mut(i as usize).and_then(|p| p.as_mut())
    }

    /// The index of `id`, allocated if new. None when all 65535 are taken.
    pub fn get_or_add(&mut self, id: PeerId) -> Option<PeerIdx> {
        if let Some(i) = self.idx(id) {
            return Some(i);
        }
        let info = PeerInfo {
            id,
            cfg: None,
            up: false,
            export: true,
            counts: PeerCounts::default(),
        };
        let i = match self.infos.iter().position(|p| p.is_none()) {
            Some(i) => {
                self.infos[i] = Some(info);
                i
            }
            None => {
                if self.infos.len() > PeerIdx::MAX as usize {
                    return None;
                }
                self.infos.push(Some(info));
                self.outs.push(PeerOut::default());
                self.infos.len() - 1
            }
        };
        let i = i as PeerIdx;
        self.by_id.insert(id, i);
        Some(i)
    }

    pub fn remove(&mut self, i: PeerIdx) {
        if let Some(p) = self.infos.get_mut(i as usize).and_then(|p| p.take()) {
            self.by_id.remove(&p.id);
        }
        self.set_output(i, [false, false]);
    }

    /// Creates or drops the per-family output state of peer `i`.
    pub fn set_output(&mut self, i: PeerIdx, on: [bool; 2]) {
        for (f, &on) in on.iter().enumerate() {
            let list = &mut self.out_peers[f];
            list.retain(|&p| p != i);
            if let Some(out) = self.outs.get_mut(i as usize) {
                out.fams[f] = if on { Some(FamilyOut::default()) } else { None };
            }
            if on {
                list.push(i);
            }
        }
    }

    /// Peers touched since the last call, cleared.
    pub fn take_touched(&mut self) -> Vec<PeerId> {
        let mut v = Vec::new();
        for (i, out) in self.outs.iter_mut().enumerate() {
            if std::mem::take(&mut out.touched)
                && let Some(Some(p)) = self.infos.get(i)
            {
                v.push(p.id);
            }
        }
        v
    }
}

/// Peer `i` of `infos`, for callers holding other fields of `Peers` mutably.
pub(crate) fn info_in(infos: &[Option<PeerInfo>], i: PeerIdx) -> &PeerInfo {
    match infos.get(i as usize) {
        Some(Some(p)) => p,
        _ => missing_peer(),
    }
}

#[cold]
fn missing_peer() -> &'static PeerInfo {
    debug_assert!(false, "dangling peer index");
    static GONE: PeerInfo = PeerInfo {
        id: LOCAL,
        cfg: None,
        up: false,
        export: false,
        counts: PeerCounts {
            received: 0,
            accepted: 0,
            advertised: 0,
            looped: 0,
            filtered: 0,
        },
    };
    &GONE
}
