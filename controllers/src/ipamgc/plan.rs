//! What to release for Nodes that are gone, pure: from the Nodes that are
//! gone and the IPAM records, the block writes, the deletions and the
//! affinity labels one pass makes.
//!
//! - An address belongs to the node its allocation names
//!   (`secondary.node`), else to the block's node. Those of gone nodes
//!   are released from their block.
//! - A block affine to a gone node is deleted once it holds nothing else
//!   (addresses lent to live nodes keep it, without new allocations).
//! - A handle goes once an address of it is released here, or when a
//!   WorkloadEndpoint of a gone node names its container; BlockAffinities
//!   and WorkloadEndpoints of gone nodes go too.
//! - A live node's BlockAffinity without the `tartan.dev/node` label gets
//!   it (an ADD finds its node's affinities by that label).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use tartan_api::resources::{
    BlockAffinity, IpamBlock, IpamBlockSpec, IpamHandle, WorkloadEndpoint,
};
use tartan_cni::ipam::block::{address_at, in_use, release_where};
use tartan_cni::ipam::report::container_of;
use tartan_cni::ipam::{NODE_LABEL, node_label_value};

/// One block's change.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockChange {
    pub name: String,
    /// The version read; the write replaces only it.
    pub version: String,
    /// The block with the gone nodes' addresses released, or `None` when
    /// the block itself goes.
    pub spec: Option<IpamBlockSpec>,
    /// What was released: (node, handle, address).
    pub released: Vec<(String, String, IpAddr)>,
}

/// What one pass writes.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Plan {
    pub blocks: Vec<BlockChange>,
    /// IPAMHandle object names.
    pub handles: Vec<String>,
    /// BlockAffinity names.
    pub affinities: Vec<String>,
    /// WorkloadEndpoints: (namespace, name).
    pub endpoints: Vec<(String, String)>,
    /// BlockAffinity names to label with their node.
    pub label: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        *self == Plan::default()
    }
}

/// Every node name the IPAM records mention.
pub fn mentioned(
    blocks: &[IpamBlock],
    affinities: &[BlockAffinity],
    endpoints: &[WorkloadEndpoint],
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for b in blocks {
        out.extend(b.spec.affine_node().map(str::to_string));
        for a in &b.spec.attributes {
            out.extend(a.secondary.get("node").cloned());
        }
    }
    out.extend(affinities.iter().map(|a| a.spec.node.clone()));
    out.extend(endpoints.iter().map(|w| w.spec.node.clone()));
    out.retain(|n| !n.is_empty());
    out
}

/// The pass for the nodes in `gone`, at time `now` (unix seconds, for the
/// released addresses' cool-down).
pub fn plan(
    gone: &BTreeSet<String>,
    blocks: &[IpamBlock],
    affinities: &[BlockAffinity],
    handles: &[IpamHandle],
    endpoints: &[WorkloadEndpoint],
    now: i64,
) -> Plan {
    let mut p = Plan::default();
    let mut released_handles = BTreeSet::new();
    for b in blocks {
        let (Some(name), Some(version)) = (&b.metadata.name, &b.metadata.resource_version) else {
            continue;
        };
        let Ok(net) = b.spec.network() else { continue };
        let block_node = b.spec.affine_node().unwrap_or("");
        let mut spec = b.spec.clone();
        let mut released = Vec::new();
        release_where(&mut spec, now, |o, attr| {
            let node = attr
                .secondary
                .get("node")
                .map_or(block_node, String::as_str);
            let hit = gone.contains(node);
            if hit && let Some(a) = address_at(&net, o) {
                let h = attr.handle_id.clone().unwrap_or_default();
                released.push((node.to_string(), h, a));
            }
            hit
        });
        let goes = gone.contains(block_node) && in_use(&spec) == 0;
        if released.is_empty() && !goes {
            continue;
        }
        released_handles.extend(released.iter().map(|(_, h, _)| h.clone()));
        p.blocks.push(BlockChange {
            name: name.clone(),
            version: version.clone(),
            spec: (!goes).then_some(spec),
            released,
        });
    }
    let gone_containers: BTreeSet<&str> = endpoints
        .iter()
        .filter(|w| gone.contains(&w.spec.node))
        .map(|w| w.spec.container_id.as_str())
        .filter(|c| !c.is_empty())
        .collect();
    for h in handles {
        let id = h.spec.handle_id.as_str();
        if (released_handles.contains(id) || gone_containers.contains(container_of(id)))
            && let Some(name) = &h.metadata.name
        {
            p.handles.push(name.clone());
        }
    }
    for a in affinities {
        let Some(name) = &a.metadata.name else {
            continue;
        };
        if gone.contains(&a.spec.node) {
            p.affinities.push(name.clone());
        } else if !a.spec.node.is_empty()
            && a.metadata.labels.as_ref().and_then(|l| l.get(NODE_LABEL))
                != Some(&node_label_value(&a.spec.node))
        {
            p.label.push(name.clone());
        }
    }
    for w in endpoints.iter().filter(|w| gone.contains(&w.spec.node)) {
        if let (Some(ns), Some(name)) = (&w.metadata.namespace, &w.metadata.name) {
            p.endpoints.push((ns.clone(), name.clone()));
        }
    }
    p
}

/// The nodes missing from `nodes` that the records mention, with how long
/// each has been missing: a node is gone once missing for `grace` (a
/// Node deleted and created again at once, or a listing that raced a
/// create, is left alone).
#[derive(Debug, Default)]
pub struct Missing {
    since: BTreeMap<String, i64>,
}

impl Missing {
    /// The nodes gone at `now` (seconds), given the Nodes that exist and
    /// the names the records mention.
    pub fn gone(
        &mut self,
        nodes: &BTreeSet<String>,
        mentioned: &BTreeSet<String>,
        now: i64,
        grace: i64,
    ) -> BTreeSet<String> {
        self.since
            .retain(|n, _| mentioned.contains(n) && !nodes.contains(n));
        for n in mentioned.difference(nodes) {
            self.since.entry(n.clone()).or_insert(now);
        }
        self.since
            .iter()
            .filter(|(_, since)| now - **since >= grace)
            .map(|(n, _)| n.clone())
            .collect()
    }
}
