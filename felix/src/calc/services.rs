//! Services: what the service proxy takes from the rest of felix's state.
//! Pure.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::state::State;

/// This node's pods' addresses, of both families (of the node `state`
/// was made for) (a pod reaching itself through a Service is
/// masqueraded).
pub fn local_pods(_node: &str, state: &State) -> BTreeSet<IpAddr> {
    // `state.endpoints` was made for the node: its local ones are ours.
    state
        .endpoints
        .local()
        .flat_map(|(_, ep)| ep.addrs.iter().copied())
        .collect()
}
