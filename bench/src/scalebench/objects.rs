//! The simulated cluster's objects, generated from indexes (the same
//! options give the same objects): Nodes as kubelets post them, one block
//! and its affinity per node, WorkloadEndpoints, the route-reflector BGP
//! settings, and the real node's Pods and NetworkPolicies.

use std::net::Ipv4Addr;

use ipnet::{IpNet, Ipv4Net};
use serde_json::{Value, json};
use tartan_api::resources::{IpamBlockSpec, block_name};
use tartan_cni::ipam::{NODE_LABEL, affinity_name, node_label_value};

/// The pool every block comes from: 8,192 blocks of /26.
pub const POOL: &str = "10.128.0.0/13";
/// Blocks left free at the start of the pool for the real node to claim.
const FREE_AT_START: u32 = 16;
/// The AS of the node and its reflectors (iBGP).
pub const ASN: u32 = 64512;
/// Labels the real node's pods carry; policies select them by `app`.
pub const APPS: usize = 50;

/// Simulated node `k` (1-based; 0 is the real node).
pub fn sim_name(k: usize) -> String {
    format!("sim-{k}")
}

/// Simulated node `k`'s address (172.16.0.0/12, never on a link).
pub fn sim_address(k: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(172, 16, 0, 0)) + k as u32)
}

/// Simulated node `k`'s block; `extra` past the cluster's for new blocks.
pub fn block_net(k: usize) -> Ipv4Net {
    let base = u32::from(Ipv4Addr::new(10, 128, 0, 0));
    let a = Ipv4Addr::from(base + (FREE_AT_START + k as u32) * 64);
    Ipv4Net::new(a, 26).expect("a /26")
}

/// A Node as a kubelet writes it: its InternalIP, the BGP address a
/// Tartan node publishes, and a Ready condition whose heartbeat is `now`.
pub fn node(name: &str, address: Ipv4Addr, prefix: u8, now: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"tartan.dev/bgp-ipv4-address": format!("{address}/{prefix}")}
        },
        "status": {
            "addresses": [{"type": "InternalIP", "address": address.to_string()},
                          {"type": "Hostname", "address": name}],
            "conditions": [ready(now)]
        }
    })
}

/// The Ready condition of a kubelet's status post at `now`.
pub fn ready(now: &str) -> Value {
    json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
           "message": "kubelet is posting ready status",
           "lastHeartbeatTime": now, "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

/// Node `node`'s block `net` (no address allocated in it: the simulated
/// pods' addresses are only in their endpoints) and its affinity.
pub fn block_and_affinity(node: &str, net: Ipv4Net) -> [Value; 2] {
    let cidr = IpNet::V4(net);
    let mut spec = IpamBlockSpec::empty(&cidr);
    spec.affinity = Some(format!("host:{node}"));
    let labels = json!({NODE_LABEL: node_label_value(node)});
    [
        json!({"apiVersion": "tartan.dev/v1", "kind": "IPAMBlock",
               "metadata": {"name": block_name(&cidr), "labels": labels},
               "spec": serde_json::to_value(spec).unwrap_or_default()}),
        json!({"apiVersion": "tartan.dev/v1", "kind": "BlockAffinity",
               "metadata": {"name": affinity_name(node, &cidr), "labels": labels},
               "spec": {"node": node, "cidr": net.to_string(), "state": "Confirmed", "deleted": false}}),
    ]
}

/// Pod `j` of simulated node `k`, as the CNI plugin records it.
pub fn workload(k: usize, j: usize) -> Value {
    let node = sim_name(k);
    let net = block_net(k);
    let addr = Ipv4Addr::from(u32::from(net.network()) + 1 + j as u32);
    let pod = format!("p{k}-{j}");
    json!({
        "apiVersion": "tartan.dev/v1", "kind": "WorkloadEndpoint",
        "metadata": {"name": format!("{pod}.eth0"), "namespace": namespace(k),
                     "labels": {"app": format!("app-{}", (k + j) % APPS)}},
        "spec": {"node": node, "pod": pod, "containerID": format!("c{k:08x}{j:04x}"),
                 "endpoint": "eth0", "interfaceName": format!("tar{k:07x}{j:04x}"),
                 "ipNetworks": [format!("{addr}/32")],
                 "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]}
    })
}

/// The namespace of simulated node `k`'s pods (100 namespaces in all).
pub fn namespace(k: usize) -> String {
    format!("ns-{}", k % 100)
}

/// The route-reflector topology: no node mesh, and every node peering
/// with the two reflectors (iBGP).
pub fn bgp_settings(reflectors: [Ipv4Addr; 2]) -> Vec<Value> {
    let mut out = vec![json!({
        "apiVersion": "tartan.dev/v1", "kind": "BGPConfiguration",
        "metadata": {"name": "default"},
        "spec": {"asNumber": ASN, "nodeToNodeMeshEnabled": false}
    })];
    for (i, r) in reflectors.iter().enumerate() {
        out.push(json!({
            "apiVersion": "tartan.dev/v1", "kind": "BGPPeer",
            "metadata": {"name": format!("rr-{}", i + 1)},
            "spec": {"peerIP": r.to_string(), "asNumber": ASN}
        }));
    }
    out
}

/// Pod `i` on the real node (its labels are what policies select).
pub fn local_pod(node: &str, i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("local-{i}"), "namespace": "default",
                     "labels": {"app": format!("app-{}", i % APPS)}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "none"}]}
    })
}

/// NetworkPolicy `i`: pods of one app accept TCP from another app's pods
/// and from a /24, on one of ten ports.
pub fn policy(i: usize) -> Value {
    json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": format!("np-{i}"), "namespace": "default"},
        "spec": {
            "podSelector": {"matchLabels": {"app": format!("app-{}", i % APPS)}},
            "policyTypes": ["Ingress"],
            "ingress": [{
                "from": [{"podSelector": {"matchLabels": {"app": format!("app-{}", (i + 1) % APPS)}}},
                         {"ipBlock": {"cidr": format!("192.168.{}.0/24", i % 256)}}],
                "ports": [{"protocol": "TCP", "port": 8000 + (i % 10) as u16}]
            }]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_distinct_inside_the_pool_and_clear_of_the_free_start() {
        let pool: Ipv4Net = POOL.parse().unwrap();
        let first = block_net(1);
        let last = block_net(5_000);
        assert!(pool.contains(&first) && pool.contains(&last));
        assert_ne!(block_net(1), block_net(2));
        assert!(u32::from(first.network()) >= u32::from(pool.network()) + 16 * 64);
    }

    #[test]
    fn workloads_take_addresses_of_their_nodes_block() {
        let w = workload(7, 29);
        let a: Ipv4Net = w["spec"]["ipNetworks"][0]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(block_net(7).contains(&a.addr()));
        let name = w["spec"]["interfaceName"].as_str().unwrap();
        assert!(name.len() <= 15, "{name}");
    }
}
