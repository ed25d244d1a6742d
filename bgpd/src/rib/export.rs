//! The export filter: may a best path go to a peer, and with what
//! attributes. `exportable` (cheap, run on every change) and `rewrite` (run
//! once per outgoing batch) must agree; `rewrite` returns None exactly when
//! `exportable` is false.

use super::attrs::AttrMeta;
use super::peers::PeerInfo;
use super::types::LocalConfig;
use crate::filter::Verdict;
use crate::model::{Family, NextHop, NextHopMode, PathAttrs, RawAttr, well_known};
use ipnet::IpNet;

/// Community and reflection rules: may `src`'s path go to `target` at all?
fn allowed(src: &PeerInfo, meta: &AttrMeta, target: &PeerInfo) -> bool {
    if !target.export || src.id == target.id {
        return false;
    }
    // RFC 1997.
    if meta.no_advertise || (meta.no_export && !target.ibgp()) {
        return false;
    }
    // iBGP-learned to iBGP only by reflection (RFC 4456 6): from a client
    // to everyone, from a non-client to clients only.
    if !src.is_local() && src.ibgp() && target.ibgp() {
        return src.rr_client() || target.rr_client();
    }
    true
}

/// Our address on `target`'s session, as a next hop for `family`.
fn own_next_hop(target: &PeerInfo, family: Family) -> Option<NextHop> {
    let cfg = target.cfg.as_ref()?;
    match family {
        Family::Ipv4Unicast => cfg.local_v4.map(NextHop::V4),
        Family::Ipv6Unicast => cfg.local_v6.map(|global| NextHop::V6 {
            global,
            link_local: cfg.local_v6_link_local,
        }),
    }
}

/// May `original` go to `target` unchanged, as its mode says?
fn keeps_next_hop(original: NextHop, target: &PeerInfo) -> bool {
    let Some(cfg) = target.cfg.as_ref() else {
        return false;
    };
    let Some(addr) = original.addr() else {
        // Our own routes have none: they always get ours.
        return false;
    };
    match cfg.next_hop {
        NextHopMode::SelfAddress => false,
        NextHopMode::Keep => true,
        NextHopMode::Auto if cfg.ibgp => true,
        // A third-party next hop (RFC 4271 5.1.3): one on the subnet we
        // share with the peer, so it is one hop from the peer too. Never
        // the peer's own address: that would be a route to itself.
        NextHopMode::Auto => {
            addr != cfg.address && cfg.shared_subnet.is_some_and(|net| net.contains(&addr))
        }
    }
}

/// The next hop `target` gets, if there is one to give.
fn next_hop_for(
    src: &PeerInfo,
    original: NextHop,
    target: &PeerInfo,
    family: Family,
) -> Option<NextHop> {
    if keeps_next_hop(original, target) {
        return Some(original);
    }
    match own_next_hop(target, family) {
        Some(nh) => Some(nh),
        // iBGP with next-hop-self but no known local address: pass the
        // original on rather than nothing. Local routes need ours.
        None if target.ibgp() && original != NextHop::None && !src.is_local() => Some(original),
        None => None,
    }
}

/// What `target`'s export rules make of `prefix` from `src` (they run
/// after the rules above allowed it).
pub(crate) fn export_verdict(target: &PeerInfo, src: &PeerInfo, prefix: &IpNet) -> Verdict {
    match target.cfg.as_ref() {
        Some(c) if !c.filters.export.is_empty() => {
            c.filters.export.verdict(prefix, !src.is_local())
        }
        _ => Verdict::Accept(None),
    }
}

pub(crate) fn exportable(
    src: &PeerInfo,
    meta: &AttrMeta,
    original: NextHop,
    target: &PeerInfo,
    family: Family,
) -> bool {
    allowed(src, meta, target) && next_hop_for(src, original, target, family).is_some()
}

/// The attributes `target` is sent for a path from `src`.
pub(crate) fn rewrite(
    local: &LocalConfig,
    src: &PeerInfo,
    meta: &AttrMeta,
    attrs: &PathAttrs,
    target: &PeerInfo,
    family: Family,
) -> Option<PathAttrs> {
    if !allowed(src, meta, target) {
        return None;
    }
    let next_hop = next_hop_for(src, attrs.next_hop, target, family)?;
    let mut out = PathAttrs {
        origin: attrs.origin,
        as_path: attrs.as_path.clone(),
        next_hop,
        med: attrs.med,
        local_pref: attrs.local_pref,
        atomic_aggregate: attrs.atomic_aggregate,
        aggregator: attrs.aggregator,
        communities: attrs.communities.clone(),
        large_communities: attrs.large_communities.clone(),
        originator_id: attrs.originator_id,
        cluster_list: attrs.cluster_list.clone(),
        // RFC 4271 5: unrecognised non-transitive optional attributes are
        // not passed on; transitive ones are (the encoder sets Partial).
        unknown: attrs
            .unknown
            .iter()
            .filter(|a| a.flags & RawAttr::TRANSITIVE != 0)
            .cloned()
            .collect(),
    };
    if target.ibgp() {
        // RFC 4271 5.1.5: LOCAL_PREF goes to internal peers.
        out.local_pref = Some(attrs.local_pref.unwrap_or(100));
        if !src.is_local() && src.ibgp() {
            // Reflection (RFC 4456 8).
            out.originator_id = Some(attrs.originator_id.unwrap_or_else(|| src.router_id()));
            out.cluster_list.insert(0, local.cluster_id);
        }
    } else {
        out.as_path = attrs.as_path.prepended(local.asn);
        // RFC 4271 5.1.5: not to external peers.
        out.local_pref = None;
        // A MED learned from one AS means nothing to another (RFC 4271
        // 5.1.4); ours we keep.
        if !src.is_local() {
            out.med = None;
        }
        // RFC 4456 8: these never leave the AS.
        out.originator_id = None;
        out.cluster_list.clear();
    }
    Some(out)
}

/// RFC 8326 section 5: a route from a speaker being taken down carries
/// the GRACEFUL_SHUTDOWN community, and internal peers get LOCAL_PREF 0 as
/// well (external peers act on the community themselves; LOCAL_PREF never
/// goes to them).
pub(crate) fn graceful_shutdown(attrs: &mut PathAttrs, ibgp: bool) {
    if !attrs.communities.contains(&well_known::GRACEFUL_SHUTDOWN) {
        attrs.communities.push(well_known::GRACEFUL_SHUTDOWN);
    }
    if ibgp {
        attrs.local_pref = Some(0);
    }
}
