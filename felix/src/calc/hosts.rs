//! Host endpoints as felix keeps them, and what the policy compiler gets
//! of them: this node's (their interfaces found) and every node's
//! addresses (for rule selectors). Pure.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use tartan_api::resources::HostEndpoint;
use tartan_policy::compile::host::{FailsafePort, HostEndpoint as HostEp, HostInterface, Hosts};
use tartan_policy::compile::{NamedPort, NetSet};

use super::encap::VXLAN_PORT;
use super::state::{Labels, State};

/// What felix keeps of a readable HostEndpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEndpointInfo {
    pub node: String,
    pub labels: Arc<Labels>,
    /// `None`: found by `ips`; `Some("*")`: every interface.
    pub interface: Option<String>,
    pub ips: Vec<IpAddr>,
    pub ports: Arc<[NamedPort]>,
}

/// A HostEndpoint felix cannot read: the node it names, when even that
/// much can be read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableHostEndpoint {
    pub node: Option<String>,
    pub why: String,
}

pub type WatchedHostEndpoint = Result<HostEndpointInfo, UnreadableHostEndpoint>;

impl HostEndpointInfo {
    pub fn from_object(h: &HostEndpoint) -> HostEndpointInfo {
        let ports: Vec<NamedPort> = h
            .spec
            .ports
            .iter()
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone(),
                    protocol: match p.protocol.as_str() {
                        "TCP" => 6,
                        "UDP" => 17,
                        "SCTP" => 132,
                        _ => return None,
                    },
                    port: p.port,
                })
            })
            .collect();
        HostEndpointInfo {
            node: h.spec.node.clone(),
            labels: Arc::new(h.metadata.labels.clone().unwrap_or_default()),
            interface: h.spec.interface_name.clone(),
            ips: h.spec.addresses(),
            ports: ports.into(),
        }
    }
}

/// The failsafe ports Calico opens by default into a host endpoint:
/// SSH, DHCP (client), BGP, etcd, Calico's Typha, the Kubernetes API and
/// Calico's (old) etcd proxy ports.
pub const FAILSAFE_IN_DEFAULT: &str =
    "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667";
/// And out of one: DNS, DHCP (server), BGP, etcd, Typha, the Kubernetes
/// API and the etcd proxy ports.
pub const FAILSAFE_OUT_DEFAULT: &str =
    "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667";

/// A failsafe list as felix's flags take it: `none`, or a comma-separated
/// list of `PROTOCOL:PORT` (`tcp`, `udp` or `sctp`) or `PORT` (TCP).
pub fn parse_failsafe(text: &str) -> Result<Vec<FailsafePort>, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") || text.is_empty() {
        return Ok(vec![]);
    }
    text.split(',')
        .map(|item| {
            let item = item.trim();
            let (proto, port) = match item.rsplit_once(':') {
                Some((p, n)) => (p, n),
                None => ("tcp", item),
            };
            let protocol = match proto.to_ascii_lowercase().as_str() {
                "tcp" => 6,
                "udp" => 17,
                "sctp" => 132,
                _ if proto.contains(['/', '.', ':']) => {
                    return Err(format!(
                        "{item:?}: a network in a failsafe entry is not supported; give PROTOCOL:PORT"
                    ));
                }
                _ => return Err(format!("{item:?}: the protocol is not tcp, udp or sctp")),
            };
            let port: u16 = port
                .parse()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("{item:?}: the port is not 1 to 65535"))?;
            Ok(FailsafePort { protocol, port })
        })
        .collect()
}

/// Every node's readable host endpoints as GlobalNetworkSets of their
/// `expectedIPs`: what rule selectors pick of them (as in Calico).
pub fn as_net_sets(state: &State) -> impl Iterator<Item = NetSet> + '_ {
    state
        .host_endpoints
        .values()
        .filter_map(|h| h.as_ref().ok())
        .filter(|h| !h.ips.is_empty())
        .map(|h| NetSet {
            namespace: None,
            labels: h.labels.clone(),
            nets: h.ips.iter().map(|a| IpNet::from(*a)).collect(),
        })
}

/// Whether an unreadable host endpoint may govern `node`: when it names
/// `node`. When the node it names cannot be read either, it may be any
/// node's: it governs `node` only if `node` has opted in to host
/// protection (`opted_in`: it has a readable host endpoint of its own).
/// Otherwise an unreadable endpoint would lock every node of the cluster
/// to the failsafe ports; it is only logged and counted (by the fold).
fn may_govern(u: &UnreadableHostEndpoint, node: &str, opted_in: bool) -> bool {
    match u.node.as_deref() {
        Some(n) => n == node,
        None => opted_in,
    }
}

/// What the compiler needs of `node`'s host endpoints.
pub fn for_node(node: &str, state: &State) -> Hosts {
    let mut endpoints = Vec::new();
    let opted_in = state
        .host_endpoints
        .values()
        .any(|h| matches!(h, Ok(h) if h.node == node));
    for (key, h) in &state.host_endpoints {
        let name = key.trim_start_matches('/').to_string();
        match h {
            Ok(h) if h.node == node => {
                let interface = match h.interface.as_deref() {
                    Some(tartan_api::resources::hostendpoint::ALL_INTERFACES) => HostInterface::All,
                    Some(i) => HostInterface::Named(i.to_string()),
                    // The interface holding one of its addresses; none
                    // (yet): nothing to govern.
                    None => match h.ips.iter().find_map(|a| state.host_addrs.get(a)) {
                        Some(i) => HostInterface::Named(i.clone()),
                        None => continue,
                    },
                };
                endpoints.push(HostEp {
                    name,
                    labels: h.labels.clone(),
                    ports: h.ports.clone(),
                    interface,
                    locked: false,
                });
            }
            Ok(_) => {}
            Err(u) if may_govern(u, node, opted_in) => endpoints.push(HostEp {
                name: format!("unreadable:{name}"),
                labels: Arc::default(),
                ports: Arc::from(Vec::new()),
                interface: HostInterface::All,
                locked: true,
            }),
            Err(_) => {}
        }
    }
    let me = state.node(node).and_then(|n| n.ipv4).map(|n| n.addr());
    let tunnel_peers: BTreeSet<IpAddr> = state
        .nodes
        .values()
        .filter_map(|n| n.ipv4)
        .map(|n| IpAddr::V4(n.addr()))
        .filter(|a| Some(*a) != me.map(IpAddr::V4))
        .collect();
    Hosts {
        endpoints,
        failsafe_in: state.failsafe_in.clone(),
        failsafe_out: state.failsafe_out.clone(),
        tunnel_peers,
        vxlan_port: VXLAN_PORT,
    }
}

/// Whether some host endpoint of `node` is found by its addresses (felix
/// then reads the host's addresses).
pub fn needs_addresses(node: &str, state: &State) -> bool {
    state
        .host_endpoints
        .values()
        .filter_map(|h| h.as_ref().ok())
        .any(|h| h.node == node && h.interface.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failsafe_lists_parse_as_calico_writes_them() {
        let d = parse_failsafe(FAILSAFE_IN_DEFAULT).unwrap();
        assert_eq!(d.len(), 9);
        assert_eq!(
            d[0],
            FailsafePort {
                protocol: 6,
                port: 22
            }
        );
        assert_eq!(d[1].protocol, 17);
        assert_eq!(parse_failsafe("none").unwrap(), vec![]);
        assert_eq!(
            parse_failsafe("2222, SCTP:9").unwrap(),
            vec![
                FailsafePort {
                    protocol: 6,
                    port: 2222
                },
                FailsafePort {
                    protocol: 132,
                    port: 9
                }
            ]
        );
        assert!(parse_failsafe("icmp:1").is_err());
        assert!(parse_failsafe("tcp:0").is_err());
        assert!(
            parse_failsafe("10.0.0.0/8:tcp:22")
                .unwrap_err()
                .contains("network")
        );
    }

    fn unreadable(node: Option<&str>) -> WatchedHostEndpoint {
        Err(UnreadableHostEndpoint {
            node: node.map(String::from),
            why: "x".into(),
        })
    }

    fn readable(node: &str) -> WatchedHostEndpoint {
        Ok(HostEndpointInfo {
            node: node.into(),
            labels: Arc::default(),
            interface: Some("eth0".into()),
            ips: vec![],
            ports: Arc::from(Vec::new()),
        })
    }

    fn locked(node: &str, s: &State) -> usize {
        for_node(node, s)
            .endpoints
            .iter()
            .filter(|e| e.locked)
            .count()
    }

    #[test]
    fn an_unreadable_endpoint_of_no_known_node_locks_only_opted_in_nodes() {
        let mut s = State::for_node("n1");
        s.host_endpoints.insert("/u".into(), unreadable(None));
        // No node has a host endpoint: none is locked (the object is only
        // logged and counted).
        assert_eq!(locked("n1", &s), 0);
        assert_eq!(locked("n2", &s), 0);
        // n2 opts in: n2 is locked, n1 is still not.
        s.host_endpoints.insert("/r2".into(), readable("n2"));
        assert_eq!(locked("n1", &s), 0);
        assert_eq!(locked("n2", &s), 1);
        // One whose node still reads governs that node, opted in or not.
        s.host_endpoints
            .insert("/k1".into(), unreadable(Some("n3")));
        assert_eq!(locked("n3", &s), 1);
        assert_eq!(locked("n1", &s), 0);
    }

    #[test]
    fn only_this_nodes_endpoints_govern_and_an_unreadable_one_locks() {
        let mut s = State::for_node("n1");
        let info = |node: &str, iface: Option<&str>, ip: &str| {
            Ok(HostEndpointInfo {
                node: node.into(),
                labels: Arc::default(),
                interface: iface.map(String::from),
                ips: vec![ip.parse().unwrap()],
                ports: Arc::from(Vec::new()),
            })
        };
        s.host_endpoints
            .insert("/a".into(), info("n1", Some("eth0"), "192.0.2.1"));
        s.host_endpoints
            .insert("/b".into(), info("n2", Some("eth0"), "192.0.2.2"));
        s.host_endpoints
            .insert("/c".into(), info("n1", None, "192.0.2.3"));
        let h = for_node("n1", &s);
        assert_eq!(h.endpoints.len(), 1, "{h:?}");
        assert_eq!(
            h.endpoints[0].interface,
            HostInterface::Named("eth0".into())
        );
        assert_eq!(as_net_sets(&s).count(), 3);
        // The address appears on an interface: /c is found by it.
        s.host_addrs
            .insert("192.0.2.3".parse().unwrap(), "eth1".into());
        let h = for_node("n1", &s);
        assert_eq!(
            h.endpoints[1].interface,
            HostInterface::Named("eth1".into())
        );
        s.host_endpoints.insert(
            "/d".into(),
            Err(UnreadableHostEndpoint {
                node: Some("n2".into()),
                why: "x".into(),
            }),
        );
        assert!(for_node("n1", &s).endpoints.iter().all(|e| !e.locked));
        s.host_endpoints.insert(
            "/e".into(),
            Err(UnreadableHostEndpoint {
                node: None,
                why: "x".into(),
            }),
        );
        let h = for_node("n1", &s);
        let locked: Vec<_> = h.endpoints.iter().filter(|e| e.locked).collect();
        assert_eq!(locked.len(), 1);
        assert_eq!(locked[0].interface, HostInterface::All);
    }
}
