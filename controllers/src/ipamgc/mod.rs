//! IPAM garbage collection for deleted Nodes: a pass reads the Nodes and
//! the IPAM records, [`plan`] decides what belongs to Nodes gone for the
//! grace period, and the pass writes it: blocks first (compare-and-swap
//! on the version read), then, only when every block write went through,
//! the IPAMHandles, BlockAffinities and WorkloadEndpoints (so that a
//! pass cut short leaves what the next one needs to find the rest).
//! Every released address is logged. The same pass deletes the
//! BGPNodeStatus reports of Nodes that no longer exist (a node's bgpd
//! deletes its own when it sees its Node go; this catches those that
//! could not), once per cluster instead of by every node.

pub mod plan;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::{
    BgpNodeStatus, BlockAffinity, IpamBlock, IpamHandle, WorkloadEndpoint,
};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tartan_cni::ipam::{NODE_LABEL, node_label_value};
use tracing::{info, warn};

pub use plan::{Missing, Plan, mentioned, plan};

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    pub gone: BTreeSet<String>,
    pub addresses: usize,
    pub blocks: usize,
    pub handles: usize,
    pub affinities: usize,
    pub endpoints: usize,
    pub labelled: usize,
    /// BGPNodeStatus reports of Nodes that no longer exist, deleted.
    pub reports: usize,
}

/// The collector: remembers since when each node has been missing.
#[derive(Debug)]
pub struct Collector {
    missing: Missing,
    /// Seconds a node must be missing before its records go.
    pub grace: i64,
}

fn ok_if_gone(r: Result<(), StoreError>) -> Result<bool, StoreError> {
    match r {
        Ok(()) => Ok(true),
        Err(StoreError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

impl Collector {
    pub fn new(grace: i64) -> Collector {
        Collector {
            missing: Missing::default(),
            grace,
        }
    }

    /// One pass at `now` (unix seconds).
    pub async fn pass(&mut self, store: &dyn Datastore, now: i64) -> Result<Report, StoreError> {
        let (nodes, _) = store.list_typed::<Node>(None).await?;
        let (blocks, _) = store.list_typed::<IpamBlock>(None).await?;
        let (affinities, _) = store.list_typed::<BlockAffinity>(None).await?;
        let (handles, _) = store.list_typed::<IpamHandle>(None).await?;
        let (endpoints, _) = store.list_typed::<WorkloadEndpoint>(None).await?;
        let mut r = Report::default();
        if nodes.is_empty() {
            // No Nodes at all reads as a store that lost them, not a
            // cluster that has none: release nothing.
            warn!("no Nodes in the datastore; IPAM garbage collection waits for some");
            return Ok(r);
        }
        let names: BTreeSet<String> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let named = mentioned(&blocks, &affinities, &endpoints);
        r.gone = self.missing.gone(&names, &named, now, self.grace);
        let p = plan(&r.gone, &blocks, &affinities, &handles, &endpoints, now);
        let mut complete = true;
        for c in &p.blocks {
            let Some(b) = blocks
                .iter()
                .find(|b| b.metadata.name.as_deref() == Some(&c.name))
            else {
                continue;
            };
            let written = match &c.spec {
                Some(spec) => {
                    let mut nb = b.clone();
                    nb.spec = spec.clone();
                    store.update_typed(&nb).await.map(|_| ())
                }
                None => {
                    store
                        .delete_typed::<IpamBlock>(None, &c.name, Some(&c.version))
                        .await
                }
            };
            match written {
                Ok(()) => {
                    for (node, handle, addr) in &c.released {
                        info!(%node, block = %c.name, %handle, address = %addr, "released the address of a deleted node");
                    }
                    r.addresses += c.released.len();
                    if c.spec.is_none() {
                        info!(block = %c.name, "deleted the block of a deleted node");
                        r.blocks += 1;
                    }
                }
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => complete = false,
                Err(e) => return Err(e),
            }
        }
        if complete {
            for h in &p.handles {
                if ok_if_gone(store.delete_typed::<IpamHandle>(None, h, None).await)? {
                    info!(handle = %h, "deleted the IPAMHandle of a deleted node");
                    r.handles += 1;
                }
            }
            for a in &p.affinities {
                if ok_if_gone(store.delete_typed::<BlockAffinity>(None, a, None).await)? {
                    info!(affinity = %a, "deleted the BlockAffinity of a deleted node");
                    r.affinities += 1;
                }
            }
            for (ns, name) in &p.endpoints {
                if ok_if_gone(
                    store
                        .delete_typed::<WorkloadEndpoint>(Some(ns), name, None)
                        .await,
                )? {
                    info!(endpoint = %format!("{ns}/{name}"), "deleted the WorkloadEndpoint of a deleted node");
                    r.endpoints += 1;
                }
            }
        }
        for name in &p.label {
            let Some(a) = affinities
                .iter()
                .find(|a| a.metadata.name.as_deref() == Some(name))
            else {
                continue;
            };
            let mut a = a.clone();
            a.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(NODE_LABEL.to_string(), node_label_value(&a.spec.node));
            match store.update_typed(&a).await {
                Ok(_) => {
                    info!(affinity = %name, "labelled the BlockAffinity with its node");
                    r.labelled += 1;
                }
                Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        r.reports = delete_orphan_reports(store, &names).await?;
        Ok(r)
    }
}

/// Deletes the BGPNodeStatus reports whose Node is not among `nodes`;
/// how many went.
async fn delete_orphan_reports(
    store: &dyn Datastore,
    nodes: &BTreeSet<String>,
) -> Result<usize, StoreError> {
    let (reports, _) = store.list_typed::<BgpNodeStatus>(None).await?;
    let mut deleted = 0;
    for name in reports.into_iter().filter_map(|r| r.metadata.name) {
        if nodes.contains(&name) {
            continue;
        }
        if ok_if_gone(store.delete_typed::<BgpNodeStatus>(None, &name, None).await)? {
            info!(node = %name, "deleted the BGP status report of a deleted node");
            deleted += 1;
        }
    }
    Ok(deleted)
}
