//! The control plane's Service parts, as the API server, a load-balancer
//! controller and the EndpointSlice controller play them:
//!
//! - [`complete`] gives each Service being written what the API server
//!   and a load-balancer controller would ([`alloc`]: ClusterIP from the
//!   service range, NodePorts, LoadBalancer ingress IPs from the LB
//!   range); a refused allocation gives every problem and nothing else.
//! - [`sync_slices`] brings the EndpointSlices in line with the Services
//!   and Pods ([`slices`]).
//!
//! Both work on any [`Datastore`]; the caller (today `tartan-lab`) says
//! when they run and keeps two of them from interleaving.

pub mod alloc;
pub mod slices;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::store::typed::{TypedStore, from_dynamic, to_dynamic};
use tartan_api::store::{Datastore, DynamicObject, StoreError};

pub use alloc::Ranges;

/// What can stop the Service controllers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The datastore refused or failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Other writers kept changing the EndpointSlices between reads.
    #[error("the EndpointSlices kept changing under the lab's controller")]
    KeptChanging,
    /// Fewer Services came back from allocation than went in.
    #[error("a Service went missing")]
    ServiceMissing,
}

/// The EndpointSlices brought in line with the Services and Pods; the
/// number of writes.
pub async fn sync_slices(store: &dyn Datastore) -> Result<usize, Error> {
    // A write that races another writer is read again and retried.
    for _ in 0..5 {
        let (services, _) = store.list_typed::<Service>(None).await?;
        let (pods, _) = store.list_typed::<Pod>(None).await?;
        let (stored, _) = store.list_typed::<EndpointSlice>(None).await?;
        let views: Vec<slices::PodView> = pods.iter().map(slices::PodView::from_pod).collect();
        let plan = slices::plan(&services, &views, &stored);
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
        if !conflict {
            return Ok(writes);
        }
    }
    Err(Error::KeptChanging)
}

/// `objects` (from files) with their Services completed; every problem
/// otherwise.
pub async fn complete(
    store: &dyn Datastore,
    ranges: &Ranges,
    objects: Vec<DynamicObject>,
) -> Result<Result<Vec<DynamicObject>, Vec<String>>, Error> {
    let is_service = |o: &DynamicObject| {
        o.types
            .as_ref()
            .is_some_and(|t| t.api_version == "v1" && t.kind == "Service")
    };
    let mut incoming = Vec::new();
    let mut problems = Vec::new();
    for o in objects.iter().filter(|o| is_service(o)) {
        match from_dynamic::<Service>(o.clone()) {
            Ok(s) => incoming.push(s),
            Err(e) => problems.push(e.to_string()),
        }
    }
    if !problems.is_empty() {
        return Ok(Err(problems));
    }
    if incoming.is_empty() {
        return Ok(Ok(objects));
    }
    let (stored, _) = store.list_typed::<Service>(None).await?;
    let done = match alloc::allocate(ranges, &stored, &incoming) {
        Ok(d) => d,
        Err(p) => return Ok(Err(p)),
    };
    let mut done = done.into_iter();
    let mut out = Vec::with_capacity(objects.len());
    for o in objects {
        if is_service(&o) {
            let s = done.next().ok_or(Error::ServiceMissing)?;
            out.push(to_dynamic(&s)?);
        } else {
            out.push(o);
        }
    }
    Ok(Ok(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[tokio::test]
    async fn files_complete_against_the_store_and_refuse_whole() {
        let store = tartan_api::store::connect("memory", None).await.unwrap();
        let ranges = Ranges::new(
            "10.96.0.0/16".parse().unwrap(),
            "192.0.2.0/24".parse().unwrap(),
        );
        let obj = |v: Value| -> DynamicObject { serde_json::from_value(v).unwrap() };
        let svc = |name: &str, node_port: Option<i32>| {
            let mut port = json!({"port": 80});
            if let Some(n) = node_port {
                port["nodePort"] = json!(n);
            }
            obj(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [port]}}))
        };
        let pool = obj(json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "p"}, "spec": {"cidr": "10.1.0.0/16"}}));
        let out = complete(&*store, &ranges, vec![pool.clone(), svc("a", Some(30080))])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&out[0]).unwrap(),
            serde_json::to_value(&pool).unwrap(),
            "other kinds pass untouched"
        );
        assert_eq!(out[1].data["spec"]["clusterIP"], "10.96.0.2");
        store.create(out[1].clone()).await.unwrap();
        let refused = complete(
            &*store,
            &ranges,
            vec![svc("b", None), svc("c", Some(30080))],
        )
        .await
        .unwrap()
        .unwrap_err();
        assert_eq!(
            refused,
            vec![
                "Service default/c: spec.ports[0].nodePort: 30080 is already allocated to Service default/a"
            ]
        );
    }
}
