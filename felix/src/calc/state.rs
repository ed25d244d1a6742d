//! What felix knows of the datastore: the objects it watches, by key.

use std::collections::BTreeMap;

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::node::{BGP_IPV4_ADDRESS, VXLAN_TUNNEL_MAC, parse_mac};
use tartan_api::resources::{IpPoolSpec, IpamBlockSpec, WorkloadEndpointSpec};
use tartan_policy::ir::Policy;

/// A policy as watched: converted once when it changes; a policy that
/// does not decode or does not convert is kept as its error, and enforced
/// as an isolation of what it would have governed (`isolations` in
/// `policy.rs`).
pub type Converted = Result<Policy, String>;

/// What felix needs of a Node: where it is on the underlay, and its VXLAN
/// endpoint's MAC once the node's felix has published it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's IPv4 address with its subnet's prefix.
    pub ipv4: Option<Ipv4Net>,
    pub vxlan_mac: Option<[u8; 6]>,
}

impl NodeInfo {
    /// Unreadable annotations read as absent (the node is then not
    /// reached through a tunnel, and felix says so where it matters).
    pub fn from_node(n: &Node) -> NodeInfo {
        let ann = n.metadata.annotations.as_ref();
        let get = |k: &str| ann.and_then(|a| a.get(k)).map(String::as_str);
        NodeInfo {
            ipv4: get(BGP_IPV4_ADDRESS).and_then(|v| v.parse().ok()),
            vxlan_mac: get(VXLAN_TUNNEL_MAC).and_then(parse_mac),
        }
    }
}

/// The watched objects that shape this node's routes.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// `namespace/name` → endpoint.
    pub endpoints: BTreeMap<String, WorkloadEndpointSpec>,
    /// block name → block.
    pub blocks: BTreeMap<String, IpamBlockSpec>,
    /// pool name → pool.
    pub pools: BTreeMap<String, IpPoolSpec>,
    /// `/name` (the key of a cluster-scoped object) → node.
    pub nodes: BTreeMap<String, NodeInfo>,
    /// `namespace/name` of an endpoint → the labels the CNI plugin copied
    /// from its Pod.
    pub endpoint_labels: BTreeMap<String, Labels>,
    /// `namespace/name` of a Pod → its labels (they change; the copy on
    /// the endpoint does not).
    pub pod_labels: BTreeMap<String, Labels>,
    /// `/name` of a Namespace → its labels.
    pub namespaces: BTreeMap<String, Labels>,
    /// Policies by `namespace/name` (`/name` for global ones).
    pub kube_policies: BTreeMap<String, Converted>,
    pub tartan_policies: BTreeMap<String, Converted>,
    pub global_policies: BTreeMap<String, Converted>,
}

pub type Labels = BTreeMap<String, String>;

impl State {
    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(&format!("/{name}"))
    }
}
