//! Running the EndpointSlice plan ([`super::slices`]) against a store:
//! for every Service ([`sync_slices`], which lists Services, Pods and
//! slices), or for a few named Services ([`sync_slices_of`], which reads
//! each Service by name, its slices by a narrowed listing and its
//! namespace's Pods only when it selects Pods), so that a write of some
//! Services costs what they need, not what the store holds.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Service};
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

/// The EndpointSlices brought in line with the Services and Pods; the
/// number of writes.
pub async fn sync_slices(store: &dyn Datastore) -> Result<usize, Error> {
    // A write that races another writer is read again and retried.
    for _ in 0..5 {
        let (services, _) = store.list_typed::<Service>(None).await?;
        let (pods, _) = store.list_typed::<Pod>(None).await?;
        let (stored, _) = store.list_typed::<EndpointSlice>(None).await?;
        let views: Vec<PodView> = pods.iter().map(PodView::from_pod).collect();
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
/// the namespaces where one of them selects.
pub async fn sync_slices_of(
    store: &dyn Datastore,
    keys: &[(String, String)],
) -> Result<usize, Error> {
    let mut total = 0;
    let mut pods: BTreeMap<String, Vec<PodView>> = BTreeMap::new();
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
                pods.insert(ns.clone(), p.iter().map(PodView::from_pod).collect());
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
