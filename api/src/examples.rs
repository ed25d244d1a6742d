//! One small, valid object of every kind, in its stored shape. Tests of
//! every backend round-trip these, and they show a newcomer what each kind
//! looks like at its simplest.

use serde_json::json;

use crate::kind::Kind;
use crate::store::DynamicObject;

/// A valid `kind` object named `name` (in namespace `default` when the kind
/// is namespaced).
pub fn example(kind: Kind, name: &str) -> DynamicObject {
    let spec = match kind {
        Kind::IpPool => {
            json!({"spec": {"cidr": "10.244.0.0/16", "blockSize": 26, "natOutgoing": true}})
        }
        Kind::IpReservation => {
            json!({"spec": {"reservedCIDRs": ["10.244.0.1/32", "10.244.1.0/28"]}})
        }
        Kind::BgpConfiguration => {
            json!({"spec": {"asNumber": 64512, "nodeToNodeMeshEnabled": true}})
        }
        Kind::BgpPeer => json!({"spec": {"peerIP": "192.0.2.1", "asNumber": 65001}}),
        Kind::BgpFilter => json!({"spec": {"exportV4": [
            {"cidr": "10.244.0.0/16", "matchOperator": "In", "action": "Accept"}
        ]}}),
        Kind::NetworkPolicy | Kind::GlobalNetworkPolicy => json!({"spec": {
            "order": 100, "selector": "all()", "types": ["Ingress"],
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [80]}}]
        }}),
        Kind::NetworkSet | Kind::GlobalNetworkSet => {
            json!({"spec": {"nets": ["198.51.100.0/28", "203.0.113.7"]}})
        }
        Kind::HostEndpoint => json!({
            "metadata": {"labels": {"role": "worker"}},
            "spec": {"node": "node-a", "interfaceName": "eth0", "expectedIPs": ["192.0.2.10"],
                "ports": [{"name": "ssh", "protocol": "TCP", "port": 22}]}
        }),
        Kind::IpamBlock => json!({"spec": {
            "cidr": "10.244.0.0/30", "affinity": "host:node-a",
            "allocations": [null, 0, null, null], "unallocated": [0, 2, 3],
            "attributes": [{"handleID": "tartan.c0ffee", "secondary": {"node": "node-a"}}]
        }}),
        Kind::IpamHandle => {
            json!({"spec": {"handleID": "tartan.c0ffee", "block": {"10.244.0.0/30": 1}}})
        }
        Kind::BlockAffinity => {
            json!({"spec": {"node": "node-a", "cidr": "10.244.0.0/26", "state": "Confirmed"}})
        }
        Kind::WorkloadEndpoint => json!({"spec": {
            "node": "node-a", "pod": "web-0", "containerID": "c0ffee", "endpoint": "eth0",
            "interfaceName": "tar0123456789a", "ipNetworks": ["10.244.0.5/32"],
            "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]
        }}),
        Kind::BgpNodeStatus => json!({"spec": {
            "node": "node-a", "updated": 1_700_000_000, "refreshSeconds": 30,
            "routerID": "192.0.2.10", "asn": 64512,
            "sessions": [{"peer": "192.0.2.11", "asn": 64512, "state": "Established",
                "since": 1_699_999_000, "prefixesReceived": 1, "prefixesSent": 1}]
        }}),
        Kind::RangeAllocation => json!({"spec": {"range": "30000-32767", "data": "0f"}}),
        Kind::Node => json!({
            "metadata": {"annotations": {"tartan.dev/bgp-ipv4-address": "192.0.2.10/24"}},
            "spec": {"podCIDR": "10.244.0.0/24"}
        }),
        Kind::Namespace => json!({"metadata": {"labels": {"kubernetes.io/metadata.name": name}}}),
        Kind::Pod => {
            json!({"spec": {"containers": [{"name": "app", "image": "busybox"}], "nodeName": "node-a"}})
        }
        Kind::Service => {
            json!({"spec": {"type": "ClusterIP", "ports": [{"port": 80, "protocol": "TCP"}]}})
        }
        // "tartan" in base64.
        Kind::Secret => json!({"type": "Opaque", "data": {"password": "dGFydGFu"}}),
        Kind::ServiceAccount => json!({"metadata": {"labels": {"team": "db"}}}),
        Kind::ConfigMap => json!({"data": {"ipv4-pool-cidr": "10.244.0.0/16", "mtu": "auto"}}),
        Kind::EndpointSlice => json!({
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.244.0.5"]}],
            "ports": [{"port": 8080, "protocol": "TCP"}]
        }),
        Kind::KubeNetworkPolicy => json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
        Kind::LoadBalancerIpPool => {
            json!({"spec": {"cidrs": ["198.51.100.0/28"], "serviceSelector": "all()"}})
        }
        Kind::Lease => json!({"spec": {
            "holderIdentity": "tartan-controllers-0", "leaseDurationSeconds": 15,
            "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 0
        }}),
    };
    let info = kind.info();
    let mut v = json!({
        "apiVersion": kind.api_version(),
        "kind": info.name,
        "metadata": {"name": name},
    });
    if info.namespaced {
        v["metadata"]["namespace"] = "default".into();
    }
    if let serde_json::Value::Object(extra) = spec {
        for (k, val) in extra {
            match (k.as_str(), val) {
                ("metadata", serde_json::Value::Object(m)) => {
                    for (mk, mv) in m {
                        v["metadata"][mk] = mv;
                    }
                }
                (_, val) => v[k] = val,
            }
        }
    }
    serde_json::from_value(v).expect("examples are well-formed")
}

/// Change an example's content in a kind-appropriate way (for update
/// tests): the result is still valid and differs from the input.
pub fn modified(obj: &DynamicObject, n: u32) -> DynamicObject {
    let mut o = obj.clone();
    o.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("tartan.dev/revision".into(), n.to_string());
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_an_example_that_names_itself() {
        for kind in Kind::all() {
            let o = example(kind, "x");
            let key = crate::store::ObjectKey::of(&o).unwrap();
            assert_eq!(key.kind, kind);
            assert_eq!(key.name, "x");
        }
    }
}
