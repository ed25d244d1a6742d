//! Services: what the service proxy takes from the rest of felix's state.
//! Pure.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use super::state::State;

/// This node's pods' IPv4 addresses (of the node `state` was made for) (a pod reaching itself through a
/// Service is masqueraded).
pub fn local_pods(_node: &str, state: &State) -> BTreeSet<Ipv4Addr> {
    // `state.endpoints` was made for the node: its local ones are ours.
    state
        .endpoints
        .local()
        .flat_map(|(_, ep)| ep.addrs.iter())
        .filter_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        })
        .collect()
}
