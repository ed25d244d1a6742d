//! The WorkloadEndpoint record of a wired interface, with the pod's labels
//! and named ports taken from its Pod object.

use std::collections::BTreeMap;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};
use tartan_api::resources::{EndpointPort, WorkloadEndpoint, WorkloadEndpointSpec, workload_name};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;
use tracing::{info, warn};

use super::context::{Context, store_error};
use crate::spec::CniError;

/// Namespace and pod name of the call: from CNI_ARGS, or, when a runtime
/// passes none (plain CNI use), `default` and a name of the container ID
/// (see [`fallback_pod_name`]).
pub fn pod_of(cx: &Context) -> (String, String) {
    match cx.inv.pod() {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => ("default".into(), fallback_pod_name(&cx.inv.container_id)),
    }
}

/// The pod name of a container without Kubernetes' pod args, one per
/// container ID: `cni-<id>` when that is a DNS label; else `cni-`, the
/// ID's first 12 letters and digits (lowercased, for the reader) and a
/// hash of the whole ID, since IDs often share a prefix (`cnitool-<hex>`,
/// `testcontainer1` and `testcontainer2`).
pub fn fallback_pod_name(container_id: &str) -> String {
    let whole = format!("cni-{container_id}");
    if tartan_api::resources::common::dns_label(&whole).is_ok() {
        return whole;
    }
    let digest = Sha256::digest(container_id.as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("cni-{}-{hash}", legacy_prefix(container_id))
}

/// The first 12 letters and digits of a container ID, lowercased: all
/// that earlier versions named a record without pod args by.
fn legacy_prefix(container_id: &str) -> String {
    container_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .map(|c| c.to_ascii_lowercase())
        .collect()
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
        let old: WorkloadEndpoint = match cx.store.get_typed(Some(&ns), &name).await {
            Ok(o) => o,
            Err(StoreError::NotFound(_)) => continue,
            Err(e) => return Err(store_error(e)),
        };
        // A pod's record held by an earlier sandbox of the same pod is
        // replaced (the runtime runs one sandbox of a pod at a time). Without
        // pod args the name stands for the container ID: a record under it
        // of another container is that container's, and is left alone.
        if cx.inv.pod().is_none() && old.spec.container_id != cx.inv.container_id {
            return Err(CniError::new(
                crate::spec::error::code::DATASTORE,
                format!(
                    "workload endpoint {ns}/{name} belongs to container {:?}; not replacing it",
                    old.spec.container_id
                ),
            ));
        }
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

/// The record of this interface, if it is this container's. Without pod
/// args, a record an earlier version named by the ID's prefix alone is
/// found too, so that its DEL removes it.
pub async fn find(cx: &Context) -> Result<Option<WorkloadEndpoint>, CniError> {
    let (ns, pod) = pod_of(cx);
    let mut pods = vec![pod];
    if cx.inv.pod().is_none() {
        let legacy = format!("cni-{}", legacy_prefix(&cx.inv.container_id));
        if legacy != pods[0] {
            pods.push(legacy);
        }
    }
    for pod in pods {
        let name = workload_name(&pod, &cx.inv.ifname);
        match cx
            .store
            .get_typed::<WorkloadEndpoint>(Some(&ns), &name)
            .await
        {
            Ok(w) if w.spec.container_id == cx.inv.container_id => return Ok(Some(w)),
            Ok(_) | Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(store_error(e)),
        }
    }
    Ok(None)
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
    use std::sync::Arc;

    use tartan_api::store::Datastore;
    use tartan_api::store::connect::Checked;
    use tartan_api::store::memory::MemoryStore;

    use super::*;
    use crate::spec::{Command, Invocation, NetConf};

    fn store() -> Arc<dyn Datastore> {
        // Checked: every record must also pass validation.
        Arc::new(Checked(Box::new(MemoryStore::new())))
    }

    /// An ADD of `container` (with Kubernetes' pod args when `pod` is
    /// given) on node `n1`.
    fn cx(store: &Arc<dyn Datastore>, container: &str, pod: Option<&str>) -> Context {
        let mut args = BTreeMap::new();
        if let Some(p) = pod {
            args.insert("K8S_POD_NAMESPACE".to_string(), "default".to_string());
            args.insert("K8S_POD_NAME".to_string(), p.to_string());
        }
        let inv = Invocation {
            command: Command::Add,
            container_id: container.into(),
            netns: Some("/var/run/netns/test".into()),
            ifname: "eth0".into(),
            args,
            path: vec![],
        };
        let conf = NetConf::parse(br#"{"cniVersion":"1.1.0","name":"n","type":"tartan"}"#).unwrap();
        Context::for_tests(inv, conf, "n1", store.clone())
    }

    async fn add(cx: &Context, addr: &str) -> Result<(), CniError> {
        let host = crate::wire::host_interface_name(&cx.inv.container_id, &cx.inv.ifname);
        record(cx, Default::default(), &host, "", &[addr.parse().unwrap()]).await
    }

    async fn records(store: &Arc<dyn Datastore>) -> Vec<(String, String)> {
        let (weps, _) = store.list_typed::<WorkloadEndpoint>(None).await.unwrap();
        weps.into_iter()
            .map(|w| (w.metadata.name.unwrap(), w.spec.container_id))
            .collect()
    }

    #[test]
    fn fallback_names_are_one_per_container_id() {
        assert_eq!(fallback_pod_name("testcontainer1"), "cni-testcontainer1");
        let long = "0123456789abcdef".repeat(4);
        let mut other = long.clone();
        other.replace_range(63.., "0");
        let names: Vec<String> = [
            "testcontainer1",
            "testcontainer2",
            "cnitool-0123456789abcdef0",
            "cnitool-0123456789abcdef1",
            &long,
            &other,
            "Upper",
            "upper",
            "a_b",
            "a.b",
        ]
        .iter()
        .map(|id| fallback_pod_name(id))
        .collect();
        for (i, n) in names.iter().enumerate() {
            assert!(tartan_api::resources::common::dns_label(n).is_ok(), "{n}");
            assert!(!names[..i].contains(n), "{n} twice in {names:?}");
        }
        // The same ID always gets the same name (DEL finds what ADD wrote).
        assert_eq!(fallback_pod_name(&long), fallback_pod_name(&long.clone()));
    }

    /// Two containers whose IDs share their first 12 characters each keep
    /// a record: the second ADD replaced the first's before.
    #[tokio::test]
    async fn containers_without_pod_args_keep_records_of_their_own() {
        let s = store();
        let (a, b) = (
            cx(&s, "testcontainer1", None),
            cx(&s, "testcontainer2", None),
        );
        add(&a, "10.0.0.1/32").await.unwrap();
        add(&b, "10.0.0.2/32").await.unwrap();
        let mut got = records(&s).await;
        got.sort();
        assert_eq!(
            got,
            [
                ("cni-testcontainer1.eth0".into(), "testcontainer1".into()),
                ("cni-testcontainer2.eth0".into(), "testcontainer2".into()),
            ]
        );
        // A repeated ADD of the same container rewrites its own record.
        add(&a, "10.0.0.3/32").await.unwrap();
        let w = find(&a).await.unwrap().unwrap();
        assert_eq!(w.spec.ip_networks, ["10.0.0.3/32"]);
        remove(&b).await.unwrap();
        assert_eq!(records(&s).await.len(), 1);
    }

    /// A record under the name of another container (a name collision, or
    /// one written otherwise) is refused, not replaced.
    #[tokio::test]
    async fn an_add_without_pod_args_leaves_another_containers_record() {
        let s = store();
        let other = cx(&s, "other", None);
        add(&other, "10.0.0.1/32").await.unwrap();
        let mut w: WorkloadEndpoint = s
            .get_typed(Some("default"), "cni-other.eth0")
            .await
            .unwrap();
        w.metadata.name = Some("cni-mine.eth0".into());
        w.metadata.resource_version = None;
        s.create_typed(&w).await.unwrap();
        let mine = cx(&s, "mine", None);
        let e = add(&mine, "10.0.0.2/32").await.unwrap_err();
        assert!(e.msg.contains("belongs to container \"other\""), "{e}");
        let kept: WorkloadEndpoint = s.get_typed(Some("default"), "cni-mine.eth0").await.unwrap();
        assert_eq!(kept.spec.container_id, "other");
        assert_eq!(kept.spec.ip_networks, ["10.0.0.1/32"]);
        // Not this container's: its DEL leaves it too.
        remove(&mine).await.unwrap();
        assert_eq!(records(&s).await.len(), 2);
    }

    /// A pod's new sandbox takes over the record of its earlier one.
    #[tokio::test]
    async fn a_pods_new_sandbox_replaces_the_earlier_ones_record() {
        let s = store();
        add(&cx(&s, "sandbox1", Some("web-0")), "10.0.0.1/32")
            .await
            .unwrap();
        add(&cx(&s, "sandbox2", Some("web-0")), "10.0.0.2/32")
            .await
            .unwrap();
        assert_eq!(
            records(&s).await,
            [("web-0.eth0".to_string(), "sandbox2".to_string())]
        );
    }

    /// A record an earlier version named by the ID's prefix is removed by
    /// its container's DEL.
    #[tokio::test]
    async fn del_finds_a_record_named_the_earlier_way() {
        let s = store();
        let id = "cnitool-0123456789abcdef";
        let c = cx(&s, id, None);
        add(&c, "10.0.0.1/32").await.unwrap();
        let mut w: WorkloadEndpoint = s
            .get_typed(Some("default"), &format!("{}.eth0", fallback_pod_name(id)))
            .await
            .unwrap();
        s.delete_typed::<WorkloadEndpoint>(
            Some("default"),
            w.metadata.name.as_deref().unwrap(),
            None,
        )
        .await
        .unwrap();
        w.metadata.name = Some("cni-cnitool01234.eth0".into());
        w.spec.pod = "cni-cnitool01234".into();
        w.metadata.resource_version = None;
        s.create_typed(&w).await.unwrap();
        assert!(find(&c).await.unwrap().is_some());
        remove(&c).await.unwrap();
        assert!(records(&s).await.is_empty());
    }

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
