//! The WorkloadEndpoint record of a wired interface, with the pod's labels
//! and named ports taken from its Pod object.

use std::collections::BTreeMap;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Pod;
use tartan_api::resources::{EndpointPort, WorkloadEndpoint, WorkloadEndpointSpec, workload_name};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;
use tracing::{info, warn};

use super::context::{Context, store_error};
use crate::spec::CniError;

/// Namespace and pod name of the call: from CNI_ARGS, or, when a runtime
/// passes none (plain CNI use), `default` and `cni-<container id prefix>`.
pub fn pod_of(cx: &Context) -> (String, String) {
    match cx.inv.pod() {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => {
            let id: String = cx
                .inv
                .container_id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .take(12)
                .collect();
            ("default".into(), format!("cni-{}", id.to_ascii_lowercase()))
        }
    }
}

/// What the record carries from the Pod object.
pub type PodFacts = (BTreeMap<String, String>, Vec<EndpointPort>);

/// The pod's labels and named ports; empty when the Pod object does not
/// exist (logged: policy will see an unlabelled pod).
pub async fn pod_facts(cx: &Context) -> Result<PodFacts, CniError> {
    let (ns, name) = pod_of(cx);
    let (ns, name) = (ns.as_str(), name.as_str());
    if cx.inv.pod().is_none() {
        return Ok(Default::default());
    }
    let pod: Pod = match cx.store.get_typed(Some(ns), name).await {
        Ok(p) => p,
        Err(StoreError::NotFound(_)) => {
            warn!(
                namespace = ns,
                pod = name,
                "no Pod object; the interface gets no labels"
            );
            return Ok(Default::default());
        }
        Err(e) => return Err(store_error(e)),
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let ports = named_ports(&pod);
    Ok((labels, ports))
}

/// The named ports of a Pod's containers and of its native sidecars
/// (init containers with `restartPolicy: Always`, which run beside them);
/// other init containers have ended before the pod serves.
fn named_ports(pod: &Pod) -> Vec<EndpointPort> {
    let sidecars = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let serving = pod.spec.iter().flat_map(|s| &s.containers).chain(sidecars);
    let mut ports = Vec::new();
    for c in serving {
        for p in c.ports.iter().flatten() {
            let (Some(pname), Ok(port)) = (&p.name, u16::try_from(p.container_port)) else {
                continue;
            };
            if port == 0 {
                continue;
            }
            ports.push(EndpointPort {
                name: pname.clone(),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            });
        }
    }
    ports
}

/// Write (or overwrite) the record of this interface.
pub async fn record(
    cx: &Context,
    facts: PodFacts,
    host_ifname: &str,
    mac: &str,
    addresses: &[IpNet],
) -> Result<(), CniError> {
    let (ns, pod) = pod_of(cx);
    let (labels, ports) = facts;
    let name = workload_name(&pod, &cx.inv.ifname);
    let mut w = WorkloadEndpoint::new(
        &name,
        WorkloadEndpointSpec {
            node: cx.node.clone(),
            pod: pod.clone(),
            container_id: cx.inv.container_id.clone(),
            endpoint: cx.inv.ifname.clone(),
            interface_name: host_ifname.to_string(),
            mac: (!mac.is_empty()).then(|| mac.to_string()),
            ip_networks: addresses.iter().map(|a| a.to_string()).collect(),
            ports,
        },
    );
    w.metadata.namespace = Some(ns.clone());
    w.metadata.labels = Some(labels);
    for _ in 0..20 {
        match cx.store.create_typed(&w).await {
            Ok(_) => {
                info!(namespace = %ns, name = %name, "workload endpoint written");
                return Ok(());
            }
            Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(store_error(e)),
        }
        // A record of an earlier sandbox of the same pod: replace it.
        let old: WorkloadEndpoint = match cx.store.get_typed(Some(&ns), &name).await {
            Ok(o) => o,
            Err(StoreError::NotFound(_)) => continue,
            Err(e) => return Err(store_error(e)),
        };
        let mut new = w.clone();
        new.metadata.resource_version = old.metadata.resource_version.clone();
        match cx.store.update_typed(&new).await {
            Ok(_) => {
                info!(namespace = %ns, name = %name, previous = %old.spec.container_id, "workload endpoint replaced");
                return Ok(());
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
            Err(e) => return Err(store_error(e)),
        }
    }
    Err(CniError::new(
        crate::spec::error::code::TRY_AGAIN,
        format!("workload endpoint {ns}/{name} kept changing under us"),
    ))
}

/// The record of this interface, if it is this container's.
pub async fn find(cx: &Context) -> Result<Option<WorkloadEndpoint>, CniError> {
    let (ns, pod) = pod_of(cx);
    let name = workload_name(&pod, &cx.inv.ifname);
    match cx
        .store
        .get_typed::<WorkloadEndpoint>(Some(&ns), &name)
        .await
    {
        Ok(w) if w.spec.container_id == cx.inv.container_id => Ok(Some(w)),
        Ok(_) | Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(store_error(e)),
    }
}

/// Delete this interface's record; one written by another sandbox of the
/// same pod is left alone.
pub async fn remove(cx: &Context) -> Result<(), CniError> {
    let Some(w) = find(cx).await? else {
        return Ok(());
    };
    remove_record(cx, &w).await
}

pub async fn remove_record(cx: &Context, w: &WorkloadEndpoint) -> Result<(), CniError> {
    let ns = w.metadata.namespace.clone().unwrap_or_default();
    let name = w.metadata.name.clone().unwrap_or_default();
    match cx
        .store
        .delete_typed::<WorkloadEndpoint>(Some(&ns), &name, w.metadata.resource_version.as_deref())
        .await
    {
        Ok(()) | Err(StoreError::NotFound(_)) => {
            info!(namespace = %ns, name = %name, "workload endpoint removed");
            Ok(())
        }
        // Replaced meanwhile by a newer sandbox: not ours to delete.
        Err(StoreError::Conflict { .. }) => Ok(()),
        Err(e) => Err(store_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_ports_of_containers_and_native_sidecars_only() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [
                    {"name": "proxy", "restartPolicy": "Always",
                     "ports": [{"name": "metrics", "containerPort": 9090}]},
                    {"name": "setup", "ports": [{"name": "once", "containerPort": 7000}]},
                ],
                "containers": [
                    {"name": "app", "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                        {"containerPort": 9999},
                    ]},
                ],
            },
        }))
        .unwrap();
        let got: Vec<(String, String, u16)> = named_ports(&pod)
            .into_iter()
            .map(|p| (p.name, p.protocol, p.port))
            .collect();
        assert_eq!(
            got,
            vec![
                ("http".into(), "TCP".into(), 8080),
                ("dns".into(), "UDP".into(), 53),
                ("metrics".into(), "TCP".into(), 9090),
            ]
        );
    }
}
