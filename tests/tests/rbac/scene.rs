//! The cluster the RBAC test's daemons find in the stand-in's store, the
//! pods the CNI plugin wires, and what the test reads back.

use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::ObjectKey;
use tartan_lab::cni::Call;
use tartan_lab::netns::Netns;
use tartan_tests::standin::StandIn;

pub fn key(kind: Kind, ns: Option<&str>, name: &str) -> ObjectKey {
    ObjectKey::new(kind, ns, name)
}

/// The cluster the daemons find: three Nodes (node-1 is the one running
/// here), two pools of one block each, BGP settings with a peer whose
/// password is a Secret, two Services (one of type LoadBalancer) and an
/// EndpointSlice, the pods the CNI plugin wires, and node-3's old BGP
/// status report.
pub fn seed(api: &StandIn) -> anyhow::Result<()> {
    for ns in ["default", "kube-system", "tartan-system"] {
        api.create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))?;
    }
    for i in 1..=3 {
        api.create(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("node-{i}"), "labels": {"kubernetes.io/os": "linux"}},
            "status": {"addresses": [{"type": "InternalIP", "address": format!("10.77.0.{i}")}]}
        }))?;
    }
    let objects = [
        // The install's settings: the controllers' first start reads them.
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "tartan-config", "namespace": "tartan-system"},
               "data": {"ipv4-pool-cidr": "10.246.0.0/26", "encapsulation": "None"}}),
        json!({"apiVersion": "tartan.dev/v1", "kind": "BGPConfiguration", "metadata": {"name": "default"},
               "spec": {"asNumber": 64512, "nodeToNodeMeshEnabled": true,
                        "serviceLoadBalancerIPs": [{"cidr": "192.0.2.0/28"}]}}),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "bgp-pw", "namespace": "tartan-system"},
               "data": {"password": "czNjcmV0"}}),
        json!({"apiVersion": "tartan.dev/v1", "kind": "BGPPeer", "metadata": {"name": "tor"},
               "spec": {"peerIP": "10.77.0.254", "asNumber": 65001,
                        "password": {"secretKeyRef": {"name": "bgp-pw", "key": "password"}}}}),
        json!({"apiVersion": "tartan.dev/v1", "kind": "LoadBalancerIPPool", "metadata": {"name": "lb"},
               "spec": {"cidrs": ["192.0.2.0/28"]}}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.20", "clusterIPs": ["10.96.0.20"],
                        "selector": {"app": "web"},
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-1", "namespace": "default",
                            "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4",
               "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": true}, "nodeName": "node-2"}],
               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb", "namespace": "default"},
               "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.21", "clusterIPs": ["10.96.0.21"],
                        "selector": {"app": "web"},
                        "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080, "nodePort": 30080}]}}),
        json!({"apiVersion": "tartan.dev/v1", "kind": "BGPNodeStatus", "metadata": {"name": "node-3"},
               "spec": {"node": "node-3", "updated": 1, "refreshSeconds": 30,
                        "routerID": "10.77.0.3", "asn": 64512}}),
    ];
    for o in objects {
        api.create(o)?;
    }
    for pod in ["a", "b"] {
        api.create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "example"}]}}))?;
    }
    Ok(())
}

/// The scene's two pools (pool-a for Linux nodes), written once the controllers' first start made
/// (and the test removed) the default one: node-1 claims a block of
/// pool-a, node-3 one of pool-b.
pub fn seed_pools(api: &StandIn) -> anyhow::Result<()> {
    // pool-a selects nodes by label: the CNI plugin reads its Node.
    for (name, cidr, selector) in [
        ("pool-a", "10.244.0.0/26", "kubernetes.io/os == 'linux'"),
        ("pool-b", "10.245.0.0/26", "all()"),
    ] {
        api.create(
            json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": name},
               "spec": {"cidr": cidr, "blockSize": 26, "nodeSelector": selector}}),
        )?;
    }
    Ok(())
}

/// A pod's namespace and the CNI call that wires it.
pub fn pod(name: &str) -> (Netns, Call) {
    let ns = Netns::new("rbp").unwrap();
    let id = format!("c{}", ns.name().replace('x', "0"));
    let call = Call::for_pod(&id, ns.name(), "default", name);
    (ns, call)
}

pub fn annotation(o: &Value, name: &str) -> Option<String> {
    o.pointer(&format!(
        "/metadata/annotations/{}",
        name.replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .map(str::to_string)
}

/// Objects of `kind` whose `spec.node` is `node`.
pub fn of_node(api: &StandIn, kind: Kind, node: &str) -> usize {
    api.list(kind)
        .iter()
        .filter(|o| {
            serde_json::to_value(o)
                .ok()
                .and_then(|v| v.pointer("/spec/node").cloned())
                .is_some_and(|n| n == node)
        })
        .count()
}

/// node-3's blocks, and its addresses in other nodes' blocks.
pub fn node_3_blocks(api: &StandIn) -> (usize, usize) {
    let (mut own, mut borrowed) = (0, 0);
    for b in api.list(Kind::IpamBlock) {
        let v = serde_json::to_value(b).unwrap_or_default();
        if v.pointer("/spec/affinity") == Some(&json!("host:node-3")) {
            own += 1;
            continue;
        }
        borrowed += v
            .pointer("/spec/attributes")
            .and_then(Value::as_array)
            .map_or(0, |a| {
                a.iter()
                    .filter(|x| x.pointer("/secondary/node") == Some(&json!("node-3")))
                    .count()
            });
    }
    (own, borrowed)
}
