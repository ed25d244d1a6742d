//! Services: what the service proxy takes from the rest of felix's state.
//! Pure.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use super::state::State;

/// This node's pods' IPv4 addresses (a pod reaching itself through a
/// Service is masqueraded).
pub fn local_pods(node: &str, state: &State) -> BTreeSet<Ipv4Addr> {
    state
        .endpoints
        .values()
        .filter(|w| w.node == node)
        .flat_map(|w| w.ip_networks.iter())
        .filter_map(|n| match n.parse::<IpNet>().ok()?.addr() {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        })
        .collect()
}
