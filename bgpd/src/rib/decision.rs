//! Best-path selection for one prefix (RFC 4271 9.1.2.2, with the usual
//! extras). Run on a prefix's paths whenever one of them changes, so its
//! cost is proportional to the paths of that prefix only.
//!
//! Order, each step keeping only the paths that tie for the best value:
//!  0. feasibility: a learned path needs a next hop (RFC 4271 9.1.2);
//!     a locally originated path wins outright (as a highest weight would);
//!  1. highest LOCAL_PREF (absent = 100);
//!  2. shortest AS_PATH (a SET counts 1, confederation segments 0);
//!  3. lowest ORIGIN;
//!  4. lowest MED, compared only between paths from the same neighbouring
//!     AS (absent MED = 0) — step c's elimination, order-independent;
//!  5. eBGP-learned over iBGP-learned;
//!     (IGP cost to the next hop: all equal here.)
//!     The paths left form the multipath (ECMP) set.
//!  6. lowest router id, ORIGINATOR_ID standing in for it (RFC 4456 9);
//!  7. shortest CLUSTER_LIST (RFC 4456 9);
//!  8. lowest peer address; then lowest internal peer index, so the
//!     result never depends on path order.

use super::attrs::AttrTable;
use super::peers::Peers;
use super::table::Path;
use super::types::NextHops;
use crate::model::NextHop;
use std::net::IpAddr;
use std::sync::Arc;

/// The outcome for one prefix.
#[derive(Debug, Clone, Default)]
pub(crate) struct Selection {
    pub best: Option<Path>,
    /// What the kernel should hold: None if there is no best path or it is
    /// our own.
    pub kernel: Option<NextHops>,
}

impl Selection {
    pub fn best_route(&self) -> Option<(u16, u32)> {
        self.best.map(|p| (p.peer, p.attr.0))
    }
}

/// Ranks `paths`: returns the index of the best one and leaves the indices
/// of the multipath set in `ecmp`.
pub(crate) fn rank(
    paths: &[Path],
    attrs: &AttrTable,
    peers: &Peers,
    ecmp: &mut Vec<usize>,
) -> Option<usize> {
    ecmp.clear();
    let feasible =
        |p: &Path| p.peer == super::peers::LOCAL_IDX || attrs.get(p.attr).meta.has_next_hop;
    if let Some(i) = paths.iter().position(|p| p.peer == super::peers::LOCAL_IDX) {
        ecmp.push(i);
        return Some(i);
    }
    ecmp.extend((0..paths.len()).filter(|&i| feasible(&paths[i])));
    if ecmp.len() > 1 {
        eliminate(paths, attrs, peers, ecmp);
    }
    ecmp.iter().copied().min_by(|&a, &b| {
        tie_break_key(paths, attrs, peers, a).cmp(&tie_break_key(paths, attrs, peers, b))
    })
}

fn eliminate(paths: &[Path], attrs: &AttrTable, peers: &Peers, c: &mut Vec<usize>) {
    let meta = |i: usize| &attrs.get(paths[i].attr).meta;
    // 1-3: keep the best value of each key in turn.
    let best_lp = c.iter().map(|&i| meta(i).local_pref).max().unwrap_or(0);
    c.retain(|&i| meta(i).local_pref == best_lp);
    let best_len = c.iter().map(|&i| meta(i).as_len).min().unwrap_or(0);
    c.retain(|&i| meta(i).as_len == best_len);
    let best_origin = c.iter().map(|&i| meta(i).origin).min().unwrap_or_default();
    c.retain(|&i| meta(i).origin == best_origin);
    // 4: drop a path if another from the same neighbouring AS has a lower
    // MED. Against the set as it was before this step, per the RFC.
    let before = c.clone();
    c.retain(|&i| {
        let m = meta(i);
        !before.iter().any(|&j| {
            let o = meta(j);
            o.neighbour_as == m.neighbour_as && o.med < m.med
        })
    });
    // 5: eBGP over iBGP.
    if c.iter().any(|&i| !peers.info(paths[i].peer).ibgp()) {
        c.retain(|&i| !peers.info(paths[i].peer).ibgp());
    }
}

fn tie_break_key(
    paths: &[Path],
    attrs: &AttrTable,
    peers: &Peers,
    i: usize,
) -> (std::net::Ipv4Addr, u32, IpAddr, u16) {
    let p = &paths[i];
    let meta = &attrs.get(p.attr).meta;
    let peer = peers.info(p.peer);
    (
        meta.originator_id.unwrap_or_else(|| peer.router_id()),
        meta.cluster_len,
        peer.address(),
        p.peer,
    )
}

/// Best path and kernel next hops of a prefix.
pub(crate) fn select(
    paths: &[Path],
    attrs: &AttrTable,
    peers: &Peers,
    scratch: &mut Vec<usize>,
) -> Selection {
    // The common case: one path, nothing to compare.
    if paths.is_empty() {
        return Selection::default();
    }
    if let [p] = paths {
        let e = attrs.get(p.attr);
        if p.peer == super::peers::LOCAL_IDX {
            return Selection {
                best: Some(*p),
                kernel: None,
            };
        }
        if !e.meta.has_next_hop {
            return Selection::default();
        }
        return Selection {
            best: Some(*p),
            kernel: Some(e.next_hops.clone()),
        };
    }
    let Some(b) = rank(paths, attrs, peers, scratch) else {
        return Selection::default();
    };
    let best = paths[b];
    if best.peer == super::peers::LOCAL_IDX {
        return Selection {
            best: Some(best),
            kernel: None,
        };
    }
    let first = attrs.get(best.attr);
    let nh0 = first.attrs.next_hop;
    let kernel = if scratch
        .iter()
        .all(|&i| attrs.get(paths[i].attr).attrs.next_hop == nh0)
    {
        first.next_hops.clone()
    } else {
        let mut v: Vec<NextHop> = scratch
            .iter()
            .map(|&i| attrs.get(paths[i].attr).attrs.next_hop)
            .collect();
        v.sort_by_key(next_hop_key);
        v.dedup();
        Arc::from(v)
    };
    Selection {
        best: Some(best),
        kernel: Some(kernel),
    }
}

fn next_hop_key(n: &NextHop) -> (Option<IpAddr>, Option<std::net::Ipv6Addr>) {
    match *n {
        NextHop::V6 { link_local, .. } => (n.addr(), link_local),
        _ => (n.addr(), None),
    }
}

/// Only the best path (what the output drain needs).
pub(crate) fn best(
    paths: &[Path],
    attrs: &AttrTable,
    peers: &Peers,
    scratch: &mut Vec<usize>,
) -> Option<Path> {
    match paths {
        [] => None,
        [p] if p.peer == super::peers::LOCAL_IDX || attrs.get(p.attr).meta.has_next_hop => Some(*p),
        [_] => None,
        _ => rank(paths, attrs, peers, scratch).map(|i| paths[i]),
    }
}
