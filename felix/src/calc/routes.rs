//! The routes this node should have: one per local pod address through its
//! host interface, and a blackhole per block the node holds (so that an
//! address of the block with no pod is dropped here rather than sent back
//! along a default route).

use std::collections::BTreeMap;

use ipnet::IpNet;
use tracing::warn;

use super::state::State;

/// Where a route sends traffic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// Out of this interface, on-link.
    Device(String),
    /// Dropped.
    Blackhole,
    /// To another node: via its address, natively (`device` None: the
    /// kernel finds the interface) or on-link through a tunnel device.
    Via {
        gateway: std::net::IpAddr,
        device: Option<String>,
    },
}

impl Target {
    /// The interface the route needs to exist, if any.
    pub fn device(&self) -> Option<&str> {
        match self {
            Target::Device(d) => Some(d),
            Target::Via { device, .. } => device.as_deref(),
            Target::Blackhole => None,
        }
    }
}

/// Desired routes, by destination.
pub type Routes = BTreeMap<IpNet, Target>;

/// The routes of `node` given `state`.
pub fn desired(node: &str, state: &State) -> Routes {
    let mut out = Routes::new();
    for b in state.blocks.values() {
        if b.deleted || b.affine_node() != Some(node) {
            continue;
        }
        if let Some(net) = b.network() {
            out.insert(net, Target::Blackhole);
        }
    }
    // Pod routes are more specific than their block's blackhole; they win.
    let mut claimed: BTreeMap<IpNet, &str> = BTreeMap::new();
    // `state.endpoints` was made for `node`: its local ones are ours.
    for (key, ep) in state.endpoints.local() {
        let Some(iface) = ep.interface.as_deref().filter(|i| !i.is_empty()) else {
            continue;
        };
        for a in &ep.addrs {
            let host = IpNet::from(*a);
            match claimed.get(&host) {
                // Two endpoints claim one address (a stale record): the
                // lexically first key wins, the same on every pass.
                Some(other) if *other <= key => {
                    warn!(address = %host, endpoint = %key, holder = %other, "address claimed twice; keeping the first");
                    continue;
                }
                _ => {}
            }
            claimed.insert(host, key);
            out.insert(host, Target::Device(iface.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calc::state::Labels;
    use tartan_api::resources::{IpamBlockSpec, WorkloadEndpointSpec};

    fn wep(node: &str, iface: &str, ips: &[&str]) -> WorkloadEndpointSpec {
        WorkloadEndpointSpec {
            node: node.into(),
            pod: "p".into(),
            container_id: "c".into(),
            endpoint: "eth0".into(),
            interface_name: iface.into(),
            mac: None,
            ip_networks: ips.iter().map(|s| s.to_string()).collect(),
            ports: vec![],
        }
    }

    fn add(s: &mut State, key: &str, w: WorkloadEndpointSpec) {
        s.endpoints.set(key, Some((w, Labels::new())));
    }

    fn block(cidr: &str, node: Option<&str>) -> IpamBlockSpec {
        let mut b = IpamBlockSpec::empty(&cidr.parse().unwrap());
        b.affinity = node.map(|n| format!("host:{n}"));
        b
    }

    #[test]
    fn local_pods_and_own_blocks_only() {
        let mut s = State::for_node("n1");
        add(
            &mut s,
            "ns/a",
            wep("n1", "tara", &["10.0.0.2/32", "fd00::2/128"]),
        );
        add(&mut s, "ns/b", wep("n2", "tarb", &["10.0.0.70/32"]));
        s.blocks
            .insert("b1".into(), block("10.0.0.0/26", Some("n1")).into());
        s.blocks
            .insert("b2".into(), block("10.0.0.64/26", Some("n2")).into());
        let mut deleted = block("10.0.0.128/26", Some("n1"));
        deleted.deleted = true;
        s.blocks.insert("b3".into(), deleted.into());
        let r = desired("n1", &s);
        let text: Vec<String> = r.iter().map(|(k, v)| format!("{k} {v:?}")).collect();
        assert_eq!(
            text,
            [
                "10.0.0.0/26 Blackhole",
                "10.0.0.2/32 Device(\"tara\")",
                "fd00::2/128 Device(\"tara\")"
            ]
        );
    }

    #[test]
    fn a_doubly_claimed_address_goes_to_one_endpoint_stably() {
        let mut s = State::for_node("n1");
        add(&mut s, "ns/z", wep("n1", "tarz", &["10.0.0.5/32"]));
        add(&mut s, "ns/a", wep("n1", "tara", &["10.0.0.5/32"]));
        let r = desired("n1", &s);
        assert_eq!(
            r.get(&"10.0.0.5/32".parse().unwrap()),
            Some(&Target::Device("tara".into()))
        );
        add(&mut s, "ns/b", wep("n1", "tarb", &["not an address"]));
        assert_eq!(desired("n1", &s).len(), 1);
    }
}

#[cfg(test)]
mod block_tests {
    use crate::calc::state::BlockInfo;
    use tartan_api::resources::IpamBlockSpec;

    #[test]
    fn an_allocation_in_a_block_changes_nothing_felix_keeps() {
        let mut b = IpamBlockSpec::empty(&"10.0.0.0/26".parse().unwrap());
        b.affinity = Some("host:n2".into());
        let before = BlockInfo::from_spec(&b);
        b.allocations[3] = Some(0);
        b.unallocated.retain(|o| *o != 3);
        assert_eq!(BlockInfo::from_spec(&b), before);
        assert_eq!(before.affine_node(), Some("n2"));
        b.deleted = true;
        assert_ne!(BlockInfo::from_spec(&b), before);
    }
}
