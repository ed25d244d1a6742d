//! What felix knows of the datastore: the objects it watches, by key.

use std::collections::BTreeMap;

use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::node::{BGP_IPV4_ADDRESS, VXLAN_TUNNEL_MAC, parse_mac};
use tartan_api::resources::{IpPoolSpec, IpamBlockSpec};
use tartan_policy::compile::NetSet;
use tartan_policy::compile::host::FailsafePort;
use tartan_policy::ir::Policy;

use super::endpoints::Endpoints;

/// A policy as watched: converted once when it changes; a policy that
/// does not decode or does not convert is kept as its error, and enforced
/// as an isolation of what it would have governed (`isolations` in
/// `policy.rs`).
pub type Converted = Result<Policy, String>;

/// A NetworkSet or GlobalNetworkSet as watched, in the form the policy
/// compiler takes (its labels with the automatic one, see
/// [`labels`](super::labels)); one that does not read is kept as its
/// error, and the policies whose rules could pick it drop what reaches
/// them (`desired_cached` in `policy.rs`).
pub type WatchedNetSet = Result<NetSet, String>;

/// A ServiceAccount's labels as felix reads them (`namespace/name`), or
/// why it cannot.
pub type WatchedServiceAccount = Result<Labels, String>;

/// What felix needs of a Node: where it is on the underlay, its VXLAN
/// endpoint's MAC once the node's felix has published it, and which Node
/// object it is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's IPv4 address with its subnet's prefix.
    pub ipv4: Option<Ipv4Net>,
    pub vxlan_mac: Option<[u8; 6]>,
    /// The Node's `metadata.uid`: another one is the node registered
    /// anew (deleted and created again), which felix marks again.
    pub uid: Option<String>,
}

impl NodeInfo {
    /// Unreadable annotations read as absent (the node is then not
    /// reached through a tunnel, and felix says so where it matters).
    pub fn from_node(n: &Node) -> NodeInfo {
        NodeInfo {
            uid: n.metadata.uid.clone(),
            ..NodeInfo::from_annotations(n.metadata.annotations.as_ref())
        }
    }

    /// [`NodeInfo::from_node`] from the Node's annotations alone.
    pub fn from_annotations(ann: Option<&BTreeMap<String, String>>) -> NodeInfo {
        let get = |k: &str| ann.and_then(|a| a.get(k)).map(String::as_str);
        NodeInfo {
            ipv4: get(BGP_IPV4_ADDRESS).and_then(|v| v.parse().ok()),
            vxlan_mac: get(VXLAN_TUNNEL_MAC).and_then(parse_mac),
            uid: None,
        }
    }
}

/// What felix needs of an IPAM block: its network and node. Not its
/// allocations: they change with every pod anywhere, and would make each
/// such change a pass on every node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    /// `None`: the block's network does not parse (the block is skipped).
    network: Option<IpNet>,
    /// From `host:<nodename>`.
    node: Option<String>,
    /// Being released.
    pub deleted: bool,
}

impl BlockInfo {
    pub fn from_spec(b: &IpamBlockSpec) -> BlockInfo {
        BlockInfo {
            network: b.network().ok(),
            node: b.affine_node().map(String::from),
            deleted: b.deleted,
        }
    }

    pub fn network(&self) -> Option<IpNet> {
        self.network
    }

    /// The node the block belongs to.
    pub fn affine_node(&self) -> Option<&str> {
        self.node.as_deref()
    }
}

impl From<IpamBlockSpec> for BlockInfo {
    fn from(b: IpamBlockSpec) -> BlockInfo {
        BlockInfo::from_spec(&b)
    }
}

/// The watched objects that shape this node's routes.
#[derive(Debug, Default, Clone)]
pub struct State {
    /// Every endpoint (with the labels of its Pod), whole only on this
    /// node.
    pub endpoints: Endpoints,
    /// block name → what felix uses of the block.
    pub blocks: BTreeMap<String, BlockInfo>,
    /// pool name → pool.
    pub pools: BTreeMap<String, IpPoolSpec>,
    /// `/name` (the key of a cluster-scoped object) → node.
    pub nodes: BTreeMap<String, NodeInfo>,
    /// `/name` of a Namespace → its labels.
    pub namespaces: BTreeMap<String, Labels>,
    /// Policies by `namespace/name` (`/name` for global ones).
    pub kube_policies: BTreeMap<String, Converted>,
    pub tartan_policies: BTreeMap<String, Converted>,
    pub global_policies: BTreeMap<String, Converted>,
    /// NetworkSets by `namespace/name` and GlobalNetworkSets by `/name`.
    pub net_sets: BTreeMap<String, WatchedNetSet>,
    /// ServiceAccounts by `namespace/name`: their labels, which their
    /// pods' endpoints carry as `pcsa.` labels.
    pub service_accounts: BTreeMap<String, WatchedServiceAccount>,
    /// Every node's HostEndpoints by `/name`.
    pub host_endpoints: BTreeMap<String, super::hosts::WatchedHostEndpoint>,
    /// This host's addresses → the interface holding each (read only
    /// while a host endpoint of this node is found by its addresses).
    pub host_addrs: BTreeMap<std::net::IpAddr, String>,
    /// The failsafe ports (felix's flags), into and out of the host.
    pub failsafe_in: Vec<FailsafePort>,
    pub failsafe_out: Vec<FailsafePort>,
}

pub type Labels = BTreeMap<String, String>;

impl State {
    /// Nothing seen yet, as node `node` sees it (only its own endpoints
    /// are kept whole).
    pub fn for_node(node: &str) -> State {
        State {
            endpoints: Endpoints::for_node(node),
            ..State::default()
        }
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(&format!("/{name}"))
    }
}
