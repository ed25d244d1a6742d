//! A node's BGP settings, kept as annotations on its Kubernetes Node:
//!
//! | annotation | value |
//! |---|---|
//! | `tartan.dev/bgp-ipv4-address` | the node's IPv4 BGP address with its prefix, e.g. `10.0.0.5/24` |
//! | `tartan.dev/bgp-ipv6-address` | the node's IPv6 BGP address with its prefix, e.g. `fd00::5/64` |
//! | `tartan.dev/bgp-as-number` | the node's AS, overriding BGPConfiguration `asNumber` |
//! | `tartan.dev/route-reflector-cluster-id` | dotted IPv4; a node with it is a route reflector |
//! | `tartan.dev/vxlan-tunnel-mac` | the MAC of the node's VXLAN device (felix publishes it) |
//!
//! The prefix tells which other nodes share the node's subnet (for
//! `CrossSubnet` encapsulation). A Node's zone is its
//! `topology.kubernetes.io/zone` label ([`zone`]).

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use k8s_openapi::api::core::v1::Node;

use super::common::{Problems, check_as_number};
use crate::validate::Invalid;
use crate::validate::names::all_digits;

pub const BGP_IPV4_ADDRESS: &str = "tartan.dev/bgp-ipv4-address";
pub const BGP_IPV6_ADDRESS: &str = "tartan.dev/bgp-ipv6-address";
pub const BGP_AS_NUMBER: &str = "tartan.dev/bgp-as-number";
pub const ROUTE_REFLECTOR_CLUSTER_ID: &str = "tartan.dev/route-reflector-cluster-id";
/// Written by felix on its own Node: the MAC other nodes put in their
/// neighbour and forwarding entries for this node's VXLAN endpoint.
pub const VXLAN_TUNNEL_MAC: &str = "tartan.dev/vxlan-tunnel-mac";

/// The label naming a Node's zone: its pods' endpoints carry it, and the
/// topology hints of EndpointSlices are read against it.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// A Node's zone, from its metadata; an empty label is none (as
/// Kubernetes' EndpointSlice controller reads it).
pub fn zone(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.labels
        .as_ref()?
        .get(ZONE_LABEL)
        .map(String::as_str)
        .filter(|z| !z.is_empty())
}

/// A MAC address written `aa:bb:cc:dd:ee:ff`, in either case.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next()?;
        // Two hex digits (from_str_radix alone would take "+a").
        if p.len() != 2 || !p.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// `mac` written `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A node's BGP settings, from its annotations; each is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeBgp {
    /// IPv4 address and the prefix of its subnet.
    pub ipv4_address: Option<Ipv4Net>,
    /// IPv6 address and the prefix of its subnet.
    pub ipv6_address: Option<Ipv6Net>,
    /// The node's own AS, overriding the cluster's.
    pub as_number: Option<u32>,
    /// Set on route reflectors: their cluster ID (RFC 4456).
    pub route_reflector_cluster_id: Option<Ipv4Addr>,
}

impl NodeBgp {
    /// The settings of `node`; an error lists every bad annotation.
    pub fn from_node(node: &Node) -> Result<NodeBgp, Invalid> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let empty = BTreeMap::new();
        let ann = node.metadata.annotations.as_ref().unwrap_or(&empty);
        NodeBgp::from_annotations(name, ann)
    }

    /// The settings in a Node's annotations; `name` is for messages.
    pub fn from_annotations(
        name: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<NodeBgp, Invalid> {
        let mut p = Problems::default();
        let mut out = NodeBgp::default();
        let field = |key: &str| format!("metadata.annotations[{key}]");
        if let Some(v) = annotations.get(BGP_IPV4_ADDRESS) {
            match parse_interface_address(v) {
                Ok(IpNet::V4(n)) => out.ipv4_address = Some(n),
                Ok(IpNet::V6(_)) => p.add(
                    field(BGP_IPV4_ADDRESS),
                    format!("{v:?} is IPv6; put it in {BGP_IPV6_ADDRESS}"),
                ),
                Err(e) => p.add(field(BGP_IPV4_ADDRESS), e),
            }
        }
        if let Some(v) = annotations.get(BGP_IPV6_ADDRESS) {
            match parse_interface_address(v) {
                Ok(IpNet::V6(n)) => out.ipv6_address = Some(n),
                Ok(IpNet::V4(_)) => p.add(
                    field(BGP_IPV6_ADDRESS),
                    format!("{v:?} is IPv4; put it in {BGP_IPV4_ADDRESS}"),
                ),
                Err(e) => p.add(field(BGP_IPV6_ADDRESS), e),
            }
        }
        if let Some(v) = annotations.get(BGP_AS_NUMBER) {
            // Digits only: Rust's parsing would take "+65000".
            match v.parse::<u32>().ok().filter(|_| all_digits(v)) {
                Some(asn) => match check_as_number(asn) {
                    Ok(()) => out.as_number = Some(asn),
                    Err(e) => p.add(field(BGP_AS_NUMBER), e),
                },
                None => p.add(
                    field(BGP_AS_NUMBER),
                    format!("{v:?} is not an AS number; allowed a whole number 1 to 4294967295"),
                ),
            }
        }
        if let Some(v) = annotations.get(ROUTE_REFLECTOR_CLUSTER_ID) {
            match v.parse::<Ipv4Addr>() {
                Ok(id) => out.route_reflector_cluster_id = Some(id),
                Err(_) => p.add(
                    field(ROUTE_REFLECTOR_CLUSTER_ID),
                    format!(
                        "{v:?} is not a cluster ID; expected a dotted IPv4 value such as 244.0.0.1"
                    ),
                ),
            }
        }
        if p.0.is_empty() {
            Ok(out)
        } else {
            Err(Invalid {
                object: format!("Node {name:?}"),
                problems: p.0,
            })
        }
    }

    /// Whether the node is a route reflector.
    pub fn is_route_reflector(&self) -> bool {
        self.route_reflector_cluster_id.is_some()
    }
}

/// An interface address with its prefix length, e.g. `10.0.0.5/24`.
fn parse_interface_address(s: &str) -> Result<IpNet, String> {
    let net: IpNet = s.parse().map_err(|_| {
        if s.parse::<std::net::IpAddr>().is_ok() {
            format!("{s:?} has no prefix length; write the address with its subnet's, e.g. {s}/24")
        } else {
            format!("{s:?} is not an address with a prefix length, e.g. 10.0.0.5/24 or fd00::5/64")
        }
    })?;
    let a = net.addr();
    if a.is_unspecified() || a.is_multicast() || a.is_loopback() {
        return Err(format!(
            "{s:?} is not a usable node address; give the node's unicast address"
        ));
    }
    Ok(net)
}

/// Whether a watched Node can be read for its metadata alone (what the
/// node agents use of Nodes: name, labels, annotations), without parsing
/// its spec and status: a kubelet posts those every few seconds, and
/// parsing each post whole cost more than all else an agent does with it.
/// Not readable: a placeholder for a stored value that did not parse,
/// another kind, or a spec or status that is not an object. What is
/// inside spec and status is not checked.
pub fn metadata_readable(o: &crate::store::DynamicObject) -> Result<(), String> {
    let name = o.metadata.name.as_deref().unwrap_or("");
    if let Some(why) = crate::store::placeholder::placeholder_reason(o) {
        return Err(format!("stored Node {name:?} does not parse: {why}"));
    }
    if let Some(t) = &o.types
        && (t.api_version != "v1" || t.kind != "Node")
    {
        return Err(format!(
            "stored Node {name:?} does not parse: it is a {} {}",
            t.api_version, t.kind
        ));
    }
    for field in ["spec", "status"] {
        match o.data.get(field) {
            None | Some(serde_json::Value::Null | serde_json::Value::Object(_)) => {}
            Some(_) => {
                return Err(format!(
                    "stored Node {name:?} does not parse: {field}: not an object"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_every_annotation() {
        let b = NodeBgp::from_annotations(
            "n1",
            &ann(&[
                (BGP_IPV4_ADDRESS, "10.0.0.5/24"),
                (BGP_IPV6_ADDRESS, "fd00::5/64"),
                (BGP_AS_NUMBER, "65010"),
                (ROUTE_REFLECTOR_CLUSTER_ID, "244.0.0.1"),
                ("unrelated", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(b.ipv4_address, Some("10.0.0.5/24".parse().unwrap()));
        assert_eq!(b.ipv6_address, Some("fd00::5/64".parse().unwrap()));
        assert_eq!(b.as_number, Some(65010));
        assert!(b.is_route_reflector());
        assert_eq!(
            NodeBgp::from_annotations("n1", &BTreeMap::new()),
            Ok(NodeBgp::default())
        );
    }

    #[test]
    fn as_numbers_are_digits_only() {
        let read = |v: &str| NodeBgp::from_annotations("n1", &ann(&[(BGP_AS_NUMBER, v)]));
        assert_eq!(read("65000").unwrap().as_number, Some(65000));
        for bad in [
            "+65000",
            " 65000",
            "65000 ",
            "-1",
            "",
            "65000.0",
            "4294967296",
        ] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn macs_round_trip_and_bad_ones_are_refused() {
        let m = parse_mac("0e:74:0A:d5:01:02").unwrap();
        assert_eq!(m, [0x0e, 0x74, 0x0a, 0xd5, 0x01, 0x02]);
        assert_eq!(format_mac(&m), "0e:74:0a:d5:01:02");
        for bad in [
            "",
            "0e:74:0a:d5:01",
            "0e:74:0a:d5:01:02:03",
            "0e-74-0a-d5-01-02",
            "0e:74:0a:d5:01:zz",
            "e:74:0a:d5:01:002",
            "+e:74:0a:d5:01:02",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn every_bad_annotation_is_reported() {
        let e = NodeBgp::from_annotations(
            "n1",
            &ann(&[
                (BGP_IPV4_ADDRESS, "10.0.0.5"),
                (BGP_IPV6_ADDRESS, "10.0.0.6/24"),
                (BGP_AS_NUMBER, "0"),
                (ROUTE_REFLECTOR_CLUSTER_ID, "cluster-1"),
            ]),
        )
        .unwrap_err();
        assert_eq!(e.object, "Node \"n1\"");
        assert_eq!(e.problems.len(), 4, "{e}");
    }

    #[test]
    fn a_node_is_read_for_its_metadata_whatever_its_status_holds() {
        let read =
            |v: serde_json::Value| metadata_readable(&crate::store::shape::from_value(v).unwrap());
        let meta =
            serde_json::json!({"name": "n1", "annotations": {BGP_IPV4_ADDRESS: "10.0.0.1/24"}});
        assert!(
            read(
                serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"conditions": "not checked"}})
            )
            .is_ok()
        );
        assert!(read(serde_json::json!({"metadata": meta})).is_ok());
        for bad in [
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta}),
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": "x"}),
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": [1]}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_nodes_zone_is_its_zone_label_or_none() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
        let meta = |labels: &[(&str, &str)]| ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        };
        assert_eq!(zone(&ObjectMeta::default()), None);
        assert_eq!(
            zone(&meta(&[
                ("failure-domain.beta.kubernetes.io/zone", "old"),
                (ZONE_LABEL, "eu-1a")
            ])),
            Some("eu-1a")
        );
        assert_eq!(zone(&meta(&[(ZONE_LABEL, "")])), None);
    }
}
