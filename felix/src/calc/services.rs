//! Services: from the watched Services, EndpointSlices and this node's
//! pods to the service table. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use super::state::State;
use crate::services::{self, ServiceTable};

/// The service table for `node`.
pub fn desired(node: &str, state: &State) -> ServiceTable {
    let services: BTreeMap<String, _> = state
        .services
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
        .collect();
    let slices: BTreeMap<String, _> = state
        .slices
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
        .collect();
    let local_pods: BTreeSet<Ipv4Addr> = state
        .endpoints
        .values()
        .filter(|w| w.node == node)
        .flat_map(|w| w.ip_networks.iter())
        .filter_map(|n| match n.parse::<IpNet>().ok()?.addr() {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        })
        .collect();
    services::desired(node, &services, &slices, local_pods)
}
