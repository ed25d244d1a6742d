//! What a node announces and what bgpd keeps out of its kernel: the
//! node's blocks and the addresses its pods borrowed, the service ranges
//! of its BGPConfiguration, and host routes of Local-policy Services with
//! an endpoint here (the rules are in `build`'s module comment).
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use tartan_api::resources::bgpconfiguration::ServiceCidr;
use tartan_api::resources::ippool::EncapMode;
use tartan_api::resources::{
    BgpConfigurationSpec, IpPoolSpec, IpamBlockSpec, WorkloadEndpointSpec,
};
use tracing::warn;

use super::services::ServiceIps;
use crate::config::Announce;

/// The objects a node's own addresses come from.
pub(super) struct OwnAddresses<'a> {
    pub node: &'a str,
    pub pools: &'a [IpPoolSpec],
    pub blocks: &'a [IpamBlockSpec],
    pub endpoints: &'a [WorkloadEndpointSpec],
    /// Local-policy Services with an endpoint here, by `namespace/name`.
    pub services: &'a BTreeMap<String, ServiceIps>,
}

/// The service ranges of the node's effective BGPConfiguration.
#[derive(Debug, Default)]
pub(super) struct ServiceRanges {
    cluster: Vec<IpNet>,
    external: Vec<IpNet>,
    load_balancer: Vec<IpNet>,
}

impl ServiceRanges {
    pub(super) fn of(s: &BgpConfigurationSpec) -> ServiceRanges {
        let parse = |field: &str, list: &[ServiceCidr]| -> Vec<IpNet> {
            list.iter()
                .filter_map(|c| match c.cidr.trim().parse::<IpNet>() {
                    Ok(n) => Some(n.trunc()),
                    Err(e) => {
                        warn!(field, cidr = %c.cidr, error = %e, "not a network; not announced");
                        None
                    }
                })
                .collect()
        };
        ServiceRanges {
            cluster: parse("serviceClusterIPs", &s.service_cluster_ips),
            external: parse("serviceExternalIPs", &s.service_external_ips),
            load_balancer: parse("serviceLoadBalancerIPs", &s.service_load_balancer_ips),
        }
    }

    pub(super) fn all(&self) -> impl Iterator<Item = &IpNet> {
        self.cluster
            .iter()
            .chain(&self.external)
            .chain(&self.load_balancer)
    }
}

/// What bgpd keeps out of the kernel. IPv4 pools with VXLAN or IPIP:
/// felix routes them (natively or through its tunnel device), so bgpd
/// announces them but keeps them out of the kernel; two programs replacing
/// one route would fight over it. Service ranges: felix implements those
/// addresses; a route learned inside one (another node's host route for a
/// Service) must not steer them past it.
pub(super) fn kernel_exclude(pools: &[IpPoolSpec], ranges: &ServiceRanges) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = pools
        .iter()
        .filter(|p| p.vxlan_mode != EncapMode::Never || p.ipip_mode != EncapMode::Never)
        .filter_map(|p| p.network().ok())
        .filter(|n| matches!(n, IpNet::V4(_)))
        .chain(ranges.all().copied())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The node's blocks, /32s (/128s) of addresses its pods borrowed, the
/// service ranges, and host routes of Local-policy Services with an
/// endpoint here.
pub(super) fn announcements(inp: &OwnAddresses<'_>, ranges: &ServiceRanges) -> Vec<Announce> {
    let unexported: Vec<IpNet> = inp
        .pools
        .iter()
        .filter(|p| p.disable_bgp_export)
        .filter_map(|p| p.network().ok())
        .collect();
    let exported = |n: &IpNet| !unexported.iter().any(|u| u.contains(n));
    let mut out: BTreeSet<IpNet> = BTreeSet::new();
    let mut mine: Vec<IpNet> = Vec::new();
    for b in inp.blocks {
        let Ok(net) = b.network() else { continue };
        if b.affine_node() == Some(inp.node) && !b.deleted {
            mine.push(net);
            if exported(&net) {
                out.insert(net);
            }
        }
    }
    for w in inp.endpoints.iter().filter(|w| w.node == inp.node) {
        for a in &w.ip_networks {
            let Ok(n) = a.parse::<IpNet>() else { continue };
            let host = IpNet::from(n.addr());
            if !mine.iter().any(|m| m.contains(&host)) && exported(&host) {
                out.insert(host);
            }
        }
    }
    out.extend(ranges.all().copied());
    let inside = |nets: &[IpNet], a: &IpAddr| nets.iter().any(|n| n.contains(a));
    for ips in inp.services.values() {
        let cluster = ips.cluster.iter().filter(|a| inside(&ranges.cluster, a));
        let external = ips.external.iter().filter(|a| inside(&ranges.external, a));
        let lb = ips
            .load_balancer
            .iter()
            .filter(|a| inside(&ranges.load_balancer, a));
        out.extend(cluster.chain(external).chain(lb).map(|a| IpNet::from(*a)));
    }
    out.into_iter()
        .map(|prefix| Announce {
            prefix,
            communities: vec![],
            large_communities: vec![],
            next_hop: None,
        })
        .collect()
}
