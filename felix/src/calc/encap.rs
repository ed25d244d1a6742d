//! Routes to other nodes' pods in pools that ask for encapsulation, and the
//! tunnels they need. Pure.
//!
//! For a pool with `vxlanMode` or `ipipMode` other than `Never`, felix (not
//! bgpd) installs the routes to every other node's blocks: through the
//! tunnel when the mode says so (`Always`, or `CrossSubnet` and the other
//! node is on another subnet), otherwise natively via the node's address.
//! A route through the VXLAN device goes `via <node address> onlink`; the
//! device's neighbour entry maps that address to the node's VTEP MAC and
//! its forwarding entry sends that MAC to the node's address over UDP.
//! No tunnel address is allocated.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
use tartan_api::resources::ippool::EncapMode;
use tracing::{debug, warn};

use super::routes::{Routes, Target};
use super::state::State;

pub const VXLAN_DEVICE: &str = "tartan.vxlan";
pub const IPIP_DEVICE: &str = "tartan.ipip";
pub const VXLAN_VNI: u32 = 4096;
pub const VXLAN_PORT: u16 = 4789;

/// The VXLAN device this node wants, and the other nodes it reaches
/// through it (address → VTEP MAC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vxlan {
    pub local: Ipv4Addr,
    pub mac: [u8; 6],
    pub peers: BTreeMap<Ipv4Addr, [u8; 6]>,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tunnels {
    pub vxlan: Option<Vxlan>,
    /// Some IPv4 pool asks for IPIP: the IPIP device, with this node's
    /// address as its local end.
    pub ipip: Option<Ipv4Addr>,
}

/// The MAC of this node's VXLAN device: derived from its address, so that
/// it stays the same across restarts and device re-creation (locally
/// administered, unicast).
pub fn vtep_mac(local: Ipv4Addr) -> [u8; 6] {
    let o = local.octets();
    [0x0e, 0x74, o[0], o[1], o[2], o[3]]
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Vxlan,
    Ipip,
}

struct EncapPool {
    net: Ipv4Net,
    kind: Kind,
    mode: EncapMode,
}

/// Routes to other nodes' addresses in encapsulated pools, and the tunnels.
/// `ipip_available`: the kernel can make an IPIP device; without it IPIP
/// pools are routed natively (reaching only nodes on this subnet).
pub fn remote(node: &str, state: &State, ipip_available: bool) -> (Routes, Tunnels) {
    let mut pools = Vec::new();
    for (name, p) in &state.pools {
        let kind = match (p.vxlan_mode, p.ipip_mode) {
            (EncapMode::Never, EncapMode::Never) => continue,
            (m, EncapMode::Never) => (Kind::Vxlan, m),
            (EncapMode::Never, m) => (Kind::Ipip, m),
            // Refused by validation; never both.
            _ => continue,
        };
        match p.network() {
            Ok(IpNet::V4(net)) => pools.push(EncapPool {
                net,
                kind: kind.0,
                mode: kind.1,
            }),
            Ok(IpNet::V6(_)) => {
                debug!(pool = %name, "VXLAN for IPv6 pools is not implemented; routed by BGP")
            }
            Err(_) => {}
        }
    }
    let me = state.node(node).and_then(|n| n.ipv4);
    let mut tunnels = Tunnels {
        ipip: me
            .filter(|_| pools.iter().any(|p| p.kind == Kind::Ipip))
            .map(|m| m.addr()),
        vxlan: None,
    };
    if pools.iter().any(|p| p.kind == Kind::Vxlan) {
        match me {
            Some(m) => {
                tunnels.vxlan = Some(Vxlan {
                    local: m.addr(),
                    mac: vtep_mac(m.addr()),
                    peers: BTreeMap::new(),
                })
            }
            None => warn!(
                node,
                "this node has no IPv4 address annotation; no VXLAN device"
            ),
        }
    }
    let mut routes = Routes::new();
    if pools.is_empty() {
        return (routes, tunnels);
    }
    let pool_of = |a: Ipv4Addr| pools.iter().find(|p| p.net.contains(&a));
    // How traffic for `pool` reaches `other`; None: not yet (no address or
    // no MAC known).
    let mut target = |other: &str, pool: &EncapPool| -> Option<Target> {
        let info = state.node(other)?;
        let Some(addr) = info.ipv4 else {
            warn!(
                node = other,
                "node has no IPv4 address annotation; its pods are not routed"
            );
            return None;
        };
        let gw = addr.addr();
        let cross = me.is_none_or(|m| !m.contains(&gw));
        let encapsulate = match pool.mode {
            EncapMode::Always => true,
            EncapMode::CrossSubnet => cross,
            EncapMode::Never => false,
        };
        let native = Target::Via {
            gateway: IpAddr::V4(gw),
            device: None,
        };
        if !encapsulate {
            return Some(native);
        }
        match pool.kind {
            Kind::Vxlan => {
                let v = tunnels.vxlan.as_mut()?;
                let Some(mac) = info.vxlan_mac else {
                    debug!(node = other, "waiting for the node's VTEP MAC");
                    return None;
                };
                v.peers.insert(gw, mac);
                Some(Target::Via {
                    gateway: IpAddr::V4(gw),
                    device: Some(VXLAN_DEVICE.into()),
                })
            }
            Kind::Ipip if ipip_available => Some(Target::Via {
                gateway: IpAddr::V4(gw),
                device: Some(IPIP_DEVICE.into()),
            }),
            Kind::Ipip => Some(native),
        }
    };
    // Blocks of other nodes.
    // Each node's blocks, so that an endpoint's address is looked for in
    // its own node's few rather than in every block of the cluster (at
    // 5,000 nodes, 150,000 endpoints against 5,000 blocks on every pass).
    let mut affine: HashMap<&str, Vec<Ipv4Net>> = HashMap::new();
    for b in state.blocks.values() {
        if b.deleted {
            continue;
        }
        let (Some(owner), Some(IpNet::V4(net))) = (b.affine_node(), b.network()) else {
            continue;
        };
        affine.entry(owner).or_default().push(net);
        if owner == node {
            continue;
        }
        let Some(pool) = pool_of(net.network()) else {
            continue;
        };
        if let Some(t) = target(owner, pool) {
            routes.insert(IpNet::V4(net), t);
        }
    }
    // Addresses a node took from a block that is not its own.
    for (_, r) in state.endpoints.remote() {
        for a in r.addrs() {
            let IpAddr::V4(a) = a else { continue };
            let Some(pool) = pool_of(a) else { continue };
            let in_own_block = affine
                .get(r.node())
                .is_some_and(|nets| nets.iter().any(|net| net.contains(&a)));
            if in_own_block {
                continue;
            }
            if let Some(t) = target(r.node(), pool) {
                routes.insert(IpNet::V4(Ipv4Net::from(a)), t);
            }
        }
    }
    (routes, tunnels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calc::state::Labels;
    use crate::calc::state::NodeInfo;
    use tartan_api::resources::{IpPoolSpec, IpamBlockSpec, WorkloadEndpointSpec};

    fn node(s: &mut State, name: &str, addr: &str, mac: Option<[u8; 6]>) {
        s.nodes.insert(
            format!("/{name}"),
            NodeInfo {
                ipv4: Some(addr.parse().unwrap()),
                vxlan_mac: mac,
                uid: None,
            },
        );
    }

    fn block(s: &mut State, cidr: &str, owner: &str) {
        let mut b = IpamBlockSpec::empty(&cidr.parse().unwrap());
        b.affinity = Some(format!("host:{owner}"));
        s.blocks.insert(cidr.replace('/', "-"), b.into());
    }

    fn pool(s: &mut State, vxlan: EncapMode, ipip: EncapMode) {
        let mut p = IpPoolSpec::new("10.244.0.0/16");
        p.vxlan_mode = vxlan;
        p.ipip_mode = ipip;
        s.pools.insert("default".into(), p);
    }

    /// n1 and n2 share 192.168.1.0/24; n3 is on 192.168.2.0/24.
    fn cluster(vxlan: EncapMode, ipip: EncapMode) -> State {
        let mut s = State::for_node("n1");
        pool(&mut s, vxlan, ipip);
        node(&mut s, "n1", "192.168.1.2/24", Some([2, 0, 0, 0, 0, 1]));
        node(&mut s, "n2", "192.168.1.3/24", Some([2, 0, 0, 0, 0, 2]));
        node(&mut s, "n3", "192.168.2.2/24", Some([2, 0, 0, 0, 0, 3]));
        block(&mut s, "10.244.1.0/26", "n1");
        block(&mut s, "10.244.2.0/26", "n2");
        block(&mut s, "10.244.3.0/26", "n3");
        s
    }

    fn shown(r: &Routes) -> Vec<String> {
        r.iter()
            .map(|(k, v)| match v {
                Target::Via { gateway, device } => {
                    format!(
                        "{k} via {gateway} {}",
                        device.as_deref().unwrap_or("native")
                    )
                }
                other => format!("{k} {other:?}"),
            })
            .collect()
    }

    #[test]
    fn cross_subnet_tunnels_only_to_the_other_subnet() {
        let s = cluster(EncapMode::CrossSubnet, EncapMode::Never);
        let (r, t) = remote("n1", &s, false);
        assert_eq!(
            shown(&r),
            [
                "10.244.2.0/26 via 192.168.1.3 native",
                "10.244.3.0/26 via 192.168.2.2 tartan.vxlan"
            ]
        );
        let v = t.vxlan.unwrap();
        assert_eq!(v.local, "192.168.1.2".parse::<Ipv4Addr>().unwrap());
        assert_eq!(v.mac, vtep_mac(v.local));
        assert_eq!(
            v.peers.into_iter().collect::<Vec<_>>(),
            [("192.168.2.2".parse().unwrap(), [2, 0, 0, 0, 0, 3])]
        );
        assert!(t.ipip.is_none());
    }

    #[test]
    fn always_tunnels_everything_and_never_leaves_routes_to_bgp() {
        let s = cluster(EncapMode::Always, EncapMode::Never);
        let (r, t) = remote("n1", &s, false);
        assert_eq!(
            shown(&r),
            [
                "10.244.2.0/26 via 192.168.1.3 tartan.vxlan",
                "10.244.3.0/26 via 192.168.2.2 tartan.vxlan"
            ]
        );
        assert_eq!(t.vxlan.unwrap().peers.len(), 2);
        let s = cluster(EncapMode::Never, EncapMode::Never);
        assert_eq!(remote("n1", &s, true), (Routes::new(), Tunnels::default()));
    }

    #[test]
    fn a_node_without_a_published_mac_is_not_routed_through_vxlan_yet() {
        let mut s = cluster(EncapMode::Always, EncapMode::Never);
        node(&mut s, "n3", "192.168.2.2/24", None);
        let (r, t) = remote("n1", &s, false);
        assert_eq!(shown(&r), ["10.244.2.0/26 via 192.168.1.3 tartan.vxlan"]);
        assert_eq!(t.vxlan.unwrap().peers.len(), 1);
    }

    #[test]
    fn ipip_through_its_device_or_natively_without_one() {
        let s = cluster(EncapMode::Never, EncapMode::CrossSubnet);
        let (r, t) = remote("n1", &s, true);
        assert!(t.ipip.is_some() && t.vxlan.is_none());
        assert_eq!(
            shown(&r),
            [
                "10.244.2.0/26 via 192.168.1.3 native",
                "10.244.3.0/26 via 192.168.2.2 tartan.ipip"
            ]
        );
        let (r, _) = remote("n1", &s, false);
        assert_eq!(
            shown(&r),
            [
                "10.244.2.0/26 via 192.168.1.3 native",
                "10.244.3.0/26 via 192.168.2.2 native"
            ]
        );
    }

    #[test]
    fn borrowed_addresses_follow_the_node_that_uses_them() {
        let mut s = cluster(EncapMode::CrossSubnet, EncapMode::Never);
        let wep = |node: &str, ip: &str| WorkloadEndpointSpec {
            node: node.into(),
            pod: "p".into(),
            container_id: "c".into(),
            endpoint: "eth0".into(),
            interface_name: "tarx".into(),
            mac: None,
            ip_networks: vec![ip.into()],
            ports: vec![],
        };
        // n3 took an address from n2's block, and one from n1's.
        let mut add = |k: &str, w| s.endpoints.set(k, Some((w, Labels::new())));
        add("a/x", wep("n3", "10.244.2.9/32"));
        add("a/y", wep("n3", "10.244.1.9/32"));
        // In its own block: covered by the block's route.
        add("a/z", wep("n3", "10.244.3.9/32"));
        // Local endpoints are felix's device routes, not these.
        add("a/w", wep("n1", "10.244.2.10/32"));
        let (r, _) = remote("n1", &s, false);
        assert_eq!(
            shown(&r),
            [
                "10.244.1.9/32 via 192.168.2.2 tartan.vxlan",
                "10.244.2.0/26 via 192.168.1.3 native",
                "10.244.2.9/32 via 192.168.2.2 tartan.vxlan",
                "10.244.3.0/26 via 192.168.2.2 tartan.vxlan"
            ]
        );
    }

    #[test]
    fn no_own_address_means_no_vxlan_device_and_every_node_is_remote() {
        let mut s = cluster(EncapMode::CrossSubnet, EncapMode::Never);
        s.nodes.remove("/n1");
        let (r, t) = remote("n1", &s, false);
        assert!(t.vxlan.is_none());
        // Without a device no route can use it; not even the same-subnet
        // nodes are known to be near.
        assert!(r.is_empty(), "{:?}", shown(&r));
    }
}
