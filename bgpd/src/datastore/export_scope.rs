//! What a node sends its peers when no BGPFilter rule decides: the
//! cluster's own addresses, never a transit route. As Calico's export
//! to every peer (mesh, reflectors, BGPPeers alike), after the peer's
//! filters:
//!
//! - routes inside a pool with `disableBGPExport` are rejected;
//! - routes inside the Service ranges (`serviceClusterIPs`,
//!   `serviceExternalIPs`, `serviceLoadBalancerIPs`) and inside the other
//!   pools are sent (the node's blocks, the blocks a reflector reflects,
//!   Service addresses);
//! - any other route learned from a peer (a default route from a
//!   top-of-rack router, another network's prefixes) is not passed on: a
//!   node is not a transit router between its peers.
//!
//! The node's own announcements are always inside those ranges; should
//! one not be (a block whose pool was deleted), it is still sent, since
//! the node chose to announce it.

use ipnet::IpNet;
use tartan_api::resources::IpPoolSpec;

use crate::filter::{MatchOp, PeerFilters, Rule, RuleList};

use super::announce::ServiceRanges;

/// The rules that follow every peer's own export rules.
pub(super) fn scope(pools: &[IpPoolSpec], ranges: &ServiceRanges) -> RuleList {
    let mut out = RuleList::default();
    let mut push = |net: IpNet, accept: bool| {
        let rule = Rule {
            network: Some((net.trunc(), MatchOp::In)),
            ..Rule::all(accept)
        };
        match net {
            IpNet::V4(_) => out.v4.push(rule),
            IpNet::V6(_) => out.v6.push(rule),
        }
    };
    let nets = |export: bool| {
        pools
            .iter()
            .filter(move |p| p.disable_bgp_export != export)
            .filter_map(|p| p.network().ok())
    };
    for n in nets(false) {
        push(n, false);
    }
    for n in ranges.all().copied().chain(nets(true)) {
        push(n, true);
    }
    let learned = Rule {
        remote_only: true,
        ..Rule::all(false)
    };
    out.v4.push(learned.clone());
    out.v6.push(learned);
    out
}

/// `own` (a peer's BGPFilter rules) followed by the cluster's `scope` on
/// export; import is the peer's alone.
pub(super) fn scoped(own: &PeerFilters, scope: &RuleList) -> PeerFilters {
    let mut out = own.clone();
    out.export.v4.extend(scope.v4.iter().cloned());
    out.export.v6.extend(scope.v6.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Verdict;
    use tartan_api::resources::BgpConfigurationSpec;

    fn pool(cidr: &str, disable_bgp_export: bool) -> IpPoolSpec {
        serde_json::from_value(serde_json::json!({
            "cidr": cidr, "disableBGPExport": disable_bgp_export,
        }))
        .unwrap()
    }

    fn verdict(rules: &RuleList, prefix: &str, remote: bool) -> Verdict {
        let f = scoped(&PeerFilters::default(), rules);
        f.export.verdict(&prefix.parse().unwrap(), remote)
    }

    #[test]
    fn only_the_clusters_addresses_pass_a_node() {
        let config: BgpConfigurationSpec = serde_json::from_value(serde_json::json!({
            "serviceLoadBalancerIPs": [{"cidr": "203.0.113.0/24"}],
        }))
        .unwrap();
        let rules = scope(
            &[
                pool("10.244.0.0/16", false),
                pool("10.250.0.0/16", true),
                pool("fd00:10::/48", false),
            ],
            &ServiceRanges::of(&config),
        );
        let accept = Verdict::Accept(None);
        // Blocks of a pool, learned (reflected) or the node's own.
        assert_eq!(verdict(&rules, "10.244.3.0/26", true), accept);
        assert_eq!(verdict(&rules, "10.244.3.0/26", false), accept);
        assert_eq!(verdict(&rules, "fd00:10::/122", true), accept);
        // Service addresses, from any node.
        assert_eq!(verdict(&rules, "203.0.113.7/32", true), accept);
        // A pool kept out of BGP, even when learned.
        assert_eq!(verdict(&rules, "10.250.1.0/26", true), Verdict::Reject);
        // A router's routes are not passed to the node's other peers.
        assert_eq!(verdict(&rules, "0.0.0.0/0", true), Verdict::Reject);
        assert_eq!(verdict(&rules, "192.0.2.0/24", true), Verdict::Reject);
        assert_eq!(verdict(&rules, "2001:db8::/32", true), Verdict::Reject);
        // The node's own announcement outside every range still goes.
        assert_eq!(verdict(&rules, "192.0.2.0/24", false), accept);
    }

    #[test]
    fn a_peers_own_rules_decide_first() {
        let rules = scope(
            &[pool("10.244.0.0/16", false)],
            &ServiceRanges::of(&Default::default()),
        );
        let mut own = PeerFilters::default();
        own.export.v4.push(Rule {
            network: Some(("192.0.2.0/24".parse().unwrap(), MatchOp::In)),
            ..Rule::all(true)
        });
        let f = scoped(&own, &rules);
        let v = |p: &str| f.export.verdict(&p.parse().unwrap(), true);
        assert_eq!(v("192.0.2.0/25"), Verdict::Accept(None));
        assert_eq!(v("198.51.100.0/24"), Verdict::Reject);
        assert!(f.import.is_empty());
    }
}
