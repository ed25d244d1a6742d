//! Running the EndpointSlice plan ([`super::slices`]) against a store:
//! for every Service ([`sync_slices`], which lists Services, Pods and
//! slices), or for a few named Services ([`sync_slices_of`], which reads
//! each Service by name, its slices by a narrowed listing and its
//! namespace's Pods only when it selects Pods), so that a write of some
//! Services costs what they need, not what the store holds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, Narrow, StoreError};

use super::Error;
use super::slices::{self, PodView, SERVICE_NAME_LABEL};

/// Carries out `plan`; the number of writes, and whether another writer
/// got in the way.
async fn run(store: &dyn Datastore, plan: &slices::Plan) -> Result<(usize, bool), Error> {
    let mut writes = 0;
    let mut conflict = false;
    for s in &plan.create {
        match store.create_typed(s).await {
            Ok(_) => writes += 1,
            Err(StoreError::AlreadyExists(_)) => conflict = true,
            Err(e) => return Err(e.into()),
        }
    }
    for s in &plan.update {
        match store.update_typed(s).await {
            Ok(_) => writes += 1,
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => conflict = true,
            Err(e) => return Err(e.into()),
        }
    }
    for (ns, name) in &plan.delete {
        match store
            .delete_typed::<EndpointSlice>(Some(ns), name, None)
            .await
        {
            Ok(()) | Err(StoreError::NotFound(_)) => writes += 1,
            Err(e) => return Err(e.into()),
        }
    }
    Ok((writes, conflict))
}

/// A Node's zone ([`tartan_api::resources::node::zone`]).
fn zone_of(n: &Node) -> Option<String> {
    tartan_api::resources::node::zone(&n.metadata).map(str::to_string)
}

/// Each view's `zone`, from `zones` (node name to its zone, `None`: none).
fn with_zones(views: &mut [PodView], zones: &BTreeMap<String, Option<String>>) {
    for v in views {
        v.zone = v
            .node
            .as_ref()
            .and_then(|n| zones.get(n).cloned().flatten());
    }
}

/// The zones of the nodes `views` run on that `zones` does not hold yet,
/// read Node by Node (a Node not found has none).
async fn read_zones(
    store: &dyn Datastore,
    views: &[PodView],
    zones: &mut BTreeMap<String, Option<String>>,
) -> Result<(), Error> {
    for node in views
        .iter()
        .filter(|v| v.ip.is_some() && !v.finished)
        .filter_map(|v| v.node.as_ref())
    {
        if zones.contains_key(node) {
            continue;
        }
        let zone = match store.get_typed::<Node>(None, node).await {
            Ok(n) => zone_of(&n),
            Err(StoreError::NotFound(_)) => None,
            Err(e) => return Err(e.into()),
        };
        zones.insert(node.clone(), zone);
    }
    Ok(())
}

/// The EndpointSlices brought in line with the Services and Pods; the
/// number of writes.
pub async fn sync_slices(store: &dyn Datastore) -> Result<usize, Error> {
    // A write that races another writer is read again and retried.
    for _ in 0..5 {
        let (services, _) = store.list_typed::<Service>(None).await?;
        let (pods, _) = store.list_typed::<Pod>(None).await?;
        let (stored, _) = store.list_typed::<EndpointSlice>(None).await?;
        let (nodes, _) = store.list_typed::<Node>(None).await?;
        let zones: BTreeMap<String, Option<String>> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, zone_of(n))))
            .collect();
        let mut views: Vec<PodView> = pods.iter().map(PodView::from_pod).collect();
        with_zones(&mut views, &zones);
        let (writes, conflict) = run(store, &slices::plan(&services, &views, &stored)).await?;
        if !conflict {
            return Ok(writes);
        }
    }
    Err(Error::KeptChanging)
}

/// The EndpointSlices of the Services `keys` (`(namespace, name)`; gone
/// ones lose their managed slices) brought in line with the Pods; the
/// number of writes. Reads no other Service's objects, and Pods only of
/// the namespaces where one of them selects, with the Nodes those Pods
/// run on (for their zones).
pub async fn sync_slices_of(
    store: &dyn Datastore,
    keys: &[(String, String)],
) -> Result<usize, Error> {
    let mut total = 0;
    let mut pods: BTreeMap<String, Vec<PodView>> = BTreeMap::new();
    let mut zones: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (ns, name) in keys {
        let mut done = false;
        for _ in 0..5 {
            let svc = match store.get_typed::<Service>(Some(ns), name).await {
                Ok(s) => Some(s),
                Err(StoreError::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            };
            let services: Vec<Service> = svc.into_iter().collect();
            if services.iter().any(slices::managed) && !pods.contains_key(ns) {
                let (p, _) = store.list_typed::<Pod>(Some(ns)).await?;
                let mut views: Vec<PodView> = p.iter().map(PodView::from_pod).collect();
                read_zones(store, &views, &mut zones).await?;
                with_zones(&mut views, &zones);
                pods.insert(ns.clone(), views);
            }
            let prefix = format!("{name}-");
            let narrow = Narrow {
                name_prefix: &prefix,
                label: (SERVICE_NAME_LABEL, name),
            };
            let stored = store
                .list_narrow_typed::<EndpointSlice>(Some(ns), narrow)
                .await?;
            let views = pods.get(ns).map(Vec::as_slice).unwrap_or_default();
            let (writes, conflict) = run(store, &slices::plan(&services, views, &stored)).await?;
            total += writes;
            if !conflict {
                done = true;
                break;
            }
        }
        if !done {
            return Err(Error::KeptChanging);
        }
    }
    Ok(total)
}
