//! Topology-aware routing: which ready endpoints of a service port this
//! node sends its cluster-wide traffic to, decided from the topology
//! hints the EndpointSlice controller writes for a Service's
//! `trafficDistribution` (`hints.forNodes`, `hints.forZones`), as
//! kube-proxy decides it. The hints are followed only when every ready
//! endpoint has one and one of them names this node (its zone), so no
//! node is left without an endpoint; otherwise every ready endpoint is
//! used. The `Local` traffic policies are not affected: they choose
//! among this node's endpoints, hints or not.

use super::{EndpointInfo, NodeHint};

/// Which hints this node follows for one service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No hint applies: every ready endpoint.
    All,
    /// The endpoints hinted for this node.
    SameNode,
    /// The endpoints hinted for this node's zone.
    SameZone,
}

/// The mode for the `ready` endpoints of one service port, on a node in
/// `zone` (`""` when its Node has no `topology.kubernetes.io/zone`).
/// Node hints win over zone hints when both apply.
pub fn mode<'a, A: 'a>(ready: impl IntoIterator<Item = &'a EndpointInfo<A>>, zone: &str) -> Mode {
    let mut any = false;
    let (mut all_node, mut for_node) = (true, false);
    let (mut all_zone, mut for_zone) = (true, false);
    for e in ready {
        any = true;
        match e.node_hint {
            NodeHint::None => all_node = false,
            NodeHint::Here => for_node = true,
            NodeHint::Elsewhere => {}
        }
        if e.zones.is_empty() {
            all_zone = false;
        } else if e.zones.iter().any(|z| &**z == zone) {
            for_zone = true;
        }
    }
    if !any {
        Mode::All
    } else if all_node && for_node {
        Mode::SameNode
    } else if all_zone && for_zone {
        Mode::SameZone
    } else {
        Mode::All
    }
}

/// Whether this node's cluster-wide traffic may go to `e` under `mode`.
pub fn near<A>(e: &EndpointInfo<A>, mode: Mode, zone: &str) -> bool {
    match mode {
        Mode::All => true,
        Mode::SameNode => e.node_hint == NodeHint::Here,
        Mode::SameZone => e.zones.iter().any(|z| &**z == zone),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn ep(zones: &[&str], node_hint: NodeHint) -> EndpointInfo {
        EndpointInfo {
            addr: Ipv4Addr::new(10, 0, 0, 1),
            local: false,
            ready: true,
            serving: true,
            terminating: false,
            zones: zones.iter().map(|z| (*z).into()).collect(),
            node_hint,
        }
    }

    #[test]
    fn zone_hints_apply_only_when_every_endpoint_has_one_and_one_is_for_this_zone() {
        let a = ep(&["a"], NodeHint::None);
        let b = ep(&["b"], NodeHint::None);
        let none = ep(&[], NodeHint::None);
        assert_eq!(mode([&a, &b], "a"), Mode::SameZone);
        assert!(near(&a, Mode::SameZone, "a"));
        assert!(!near(&b, Mode::SameZone, "a"));
        // No endpoint for this zone: every endpoint, not none.
        assert_eq!(mode([&a, &b], "c"), Mode::All);
        // A node without a zone label.
        assert_eq!(mode([&a, &b], ""), Mode::All);
        // One endpoint without a hint: the hints are not followed.
        assert_eq!(mode([&a, &b, &none], "a"), Mode::All);
        assert_eq!(mode::<std::net::Ipv4Addr>([], "a"), Mode::All);
        // An endpoint hinted for several zones serves each of them.
        let ab = ep(&["a", "b"], NodeHint::None);
        assert_eq!(mode([&ab, &b], "a"), Mode::SameZone);
        assert!(near(&ab, Mode::SameZone, "a"));
        assert!(near(&ab, Mode::SameZone, "b"));
    }

    #[test]
    fn node_hints_win_when_every_endpoint_has_one_and_one_is_for_this_node() {
        let here = ep(&["a"], NodeHint::Here);
        let there = ep(&["a"], NodeHint::Elsewhere);
        let far = ep(&["b"], NodeHint::Elsewhere);
        assert_eq!(mode([&here, &there, &far], "a"), Mode::SameNode);
        assert!(near(&here, Mode::SameNode, "a"));
        assert!(!near(&there, Mode::SameNode, "a"));
        // No endpoint on this node: the zone hints, then.
        assert_eq!(mode([&there, &far], "a"), Mode::SameZone);
        // One endpoint without a node hint: the zone hints.
        let zone_only = ep(&["a"], NodeHint::None);
        assert_eq!(mode([&here, &zone_only], "a"), Mode::SameZone);
        assert!(near(&zone_only, Mode::SameZone, "a"));
        // Neither applies.
        assert_eq!(mode([&there, &far], "c"), Mode::All);
    }
}
