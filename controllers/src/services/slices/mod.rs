//! The EndpointSlice controller's part, pure: from a Service with a
//! selector and the pods of its namespace, the slices that should exist;
//! and the writes that turn the stored slices into those.
//!
//! - A pod is an endpoint when its labels match the selector and it has an
//!   address and a node (phase neither Succeeded nor Failed).
//! - Conditions as upstream: `serving` is the pod's Ready condition,
//!   `terminating` whether it has a deletionTimestamp, and `ready` is
//!   serving and not terminating (always true with
//!   `publishNotReadyAddresses`).
//! - Ports: each Service port's targetPort, by number (none: the port
//!   itself), or by name against the pod's container ports of the same
//!   protocol; a pod that lacks a named port is left out of that port.
//!   Pods whose ports resolve alike share a slice; one slice per distinct
//!   set, named `<service>-<hash of the set>` so that it keeps its name.
//! - A Service whose selector selects nothing keeps one empty slice, as
//!   upstream does. The slices carry `kubernetes.io/service-name` and
//!   `endpointslice.kubernetes.io/managed-by: tartan-lab`; only slices
//!   with that manager are changed or removed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "tartan-lab";

/// What the controller needs of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub ip: Option<String>,
    pub node: Option<String>,
    pub ready: bool,
    pub terminating: bool,
    pub finished: bool,
    /// (name, port, protocol) of every container port.
    pub ports: Vec<(Option<String>, i32, String)>,
}

impl PodView {
    pub fn from_pod(p: &Pod) -> PodView {
        let status = p.status.as_ref();
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let ip = status.and_then(|s| {
            s.pod_ip
                .clone()
                .or_else(|| s.pod_ips.as_ref()?.first().map(|i| i.ip.clone()))
        });
        let phase = status.and_then(|s| s.phase.as_deref());
        let spec = p.spec.as_ref();
        PodView {
            namespace: p
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone(),
            labels: p.metadata.labels.clone().unwrap_or_default(),
            ip: ip.filter(|i| !i.is_empty()),
            node: spec.and_then(|s| s.node_name.clone()),
            ready,
            terminating: p.metadata.deletion_timestamp.is_some(),
            finished: matches!(phase, Some("Succeeded" | "Failed")),
            ports: spec
                .map(|s| &s.containers)
                .into_iter()
                .flatten()
                .flat_map(|c| c.ports.iter().flatten())
                .map(|cp| {
                    (
                        cp.name.clone(),
                        cp.container_port,
                        cp.protocol.clone().unwrap_or_else(|| "TCP".into()),
                    )
                })
                .collect(),
        }
    }
}

/// One resolved port of a slice: (name, number, protocol).
type SlicePort = (String, i32, String);

/// The ports `pod` serves of `svc`'s ports.
fn resolve(svc: &Service, pod: &PodView) -> Vec<SlicePort> {
    let mut out = Vec::new();
    for p in svc.spec.iter().flat_map(|s| s.ports.iter().flatten()) {
        let proto = p.protocol.clone().unwrap_or_else(|| "TCP".into());
        let number = match &p.target_port {
            None => Some(p.port),
            Some(IntOrString::Int(0)) => Some(p.port),
            Some(IntOrString::Int(n)) => Some(*n),
            Some(IntOrString::String(name)) => pod
                .ports
                .iter()
                .find(|(n, _, pr)| n.as_deref() == Some(name) && *pr == proto)
                .map(|(_, num, _)| *num),
        };
        if let Some(n) = number {
            out.push((p.name.clone().unwrap_or_default(), n, proto));
        }
    }
    out
}

/// FNV-1a, for stable slice names.
fn fnv(text: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn slice_name(svc: &str, ports: &[SlicePort]) -> String {
    let sig: Vec<String> = ports
        .iter()
        .map(|(n, p, pr)| format!("{n}:{p}/{pr}"))
        .collect();
    format!("{svc}-{:08x}", fnv(&sig.join(",")))
}

/// Whether the controller keeps slices for `svc`: it has a selector and
/// is not ExternalName.
pub fn managed(svc: &Service) -> bool {
    let Some(spec) = &svc.spec else { return false };
    spec.type_.as_deref() != Some("ExternalName")
        && spec.selector.as_ref().is_some_and(|s| !s.is_empty())
}

/// The slices `svc` should have, given every pod of the lab.
pub fn desired(svc: &Service, pods: &[PodView]) -> Vec<EndpointSlice> {
    if !managed(svc) {
        return vec![];
    }
    let spec = svc.spec.as_ref().expect("managed() checked the spec");
    let selector = spec.selector.clone().unwrap_or_default();
    let ns = svc
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = svc.metadata.name.clone().unwrap_or_default();
    let publish = spec.publish_not_ready_addresses.unwrap_or(false);
    let mut groups: BTreeMap<Vec<SlicePort>, Vec<Endpoint>> = BTreeMap::new();
    let mut selected: Vec<&PodView> = pods
        .iter()
        .filter(|p| p.namespace == ns && !p.finished && p.ip.is_some() && p.node.is_some())
        .filter(|p| selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
        .collect();
    selected.sort_by(|a, b| a.name.cmp(&b.name));
    for p in selected {
        let ports = resolve(svc, p);
        groups.entry(ports).or_default().push(Endpoint {
            addresses: vec![p.ip.clone().unwrap_or_default()],
            conditions: Some(EndpointConditions {
                ready: Some(publish || (p.ready && !p.terminating)),
                serving: Some(publish || p.ready),
                terminating: Some(p.terminating),
            }),
            node_name: p.node.clone(),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some(p.namespace.clone()),
                name: Some(p.name.clone()),
                uid: p.uid.clone(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    if groups.is_empty() {
        groups.insert(vec![], vec![]);
    }
    groups
        .into_iter()
        .map(|(ports, endpoints)| EndpointSlice {
            metadata: ObjectMeta {
                name: Some(slice_name(&name, &ports)),
                namespace: Some(ns.clone()),
                labels: Some(
                    [
                        (SERVICE_NAME_LABEL.to_string(), name.clone()),
                        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
                    ]
                    .into(),
                ),
                owner_references: svc.metadata.uid.as_ref().map(|uid| {
                    vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Service".into(),
                        name: name.clone(),
                        uid: uid.clone(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]
                }),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints,
            ports: Some(
                ports
                    .into_iter()
                    .map(|(n, p, pr)| EndpointPort {
                        name: Some(n),
                        port: Some(p),
                        protocol: Some(pr),
                        ..Default::default()
                    })
                    .collect(),
            ),
        })
        .collect()
}

/// The writes that make the stored slices the desired ones.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<EndpointSlice>,
    /// Desired content with the stored resourceVersion.
    pub update: Vec<EndpointSlice>,
    /// (namespace, name).
    pub delete: Vec<(String, String)>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

fn slice_key(s: &EndpointSlice) -> (String, String) {
    (
        s.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        s.metadata.name.clone().unwrap_or_default(),
    )
}

fn same(a: &EndpointSlice, b: &EndpointSlice) -> bool {
    a.endpoints == b.endpoints
        && a.ports == b.ports
        && a.address_type == b.address_type
        && a.metadata.labels == b.metadata.labels
        && a.metadata.owner_references == b.metadata.owner_references
}

/// Every Service's desired slices against the stored ones (only those
/// this controller manages are touched).
pub fn plan(services: &[Service], pods: &[PodView], stored: &[EndpointSlice]) -> Plan {
    let want: BTreeMap<(String, String), EndpointSlice> = services
        .iter()
        .flat_map(|s| desired(s, pods))
        .map(|s| (slice_key(&s), s))
        .collect();
    let ours: BTreeMap<(String, String), &EndpointSlice> = stored
        .iter()
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MANAGED_BY_LABEL))
                .is_some_and(|m| m == MANAGED_BY)
        })
        .map(|s| (slice_key(s), s))
        .collect();
    let mut p = Plan::default();
    for (k, w) in &want {
        match ours.get(k) {
            None => p.create.push(w.clone()),
            Some(old) if !same(old, w) => {
                let mut u = w.clone();
                u.metadata.resource_version = old.metadata.resource_version.clone();
                p.update.push(u);
            }
            Some(_) => {}
        }
    }
    for k in ours.keys().filter(|k| !want.contains_key(*k)) {
        p.delete.push(k.clone());
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn svc(name: &str, spec: Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": "svc-uid"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn pod(name: &str, ip: &str, node: &str, app: &str) -> PodView {
        PodView {
            namespace: "default".into(),
            name: name.into(),
            uid: Some(format!("uid-{name}")),
            labels: [("app".to_string(), app.to_string())].into(),
            ip: Some(ip.into()),
            node: Some(node.into()),
            ready: true,
            terminating: false,
            finished: false,
            ports: vec![],
        }
    }

    fn addrs(s: &EndpointSlice) -> Vec<&str> {
        s.endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect()
    }

    fn cond(s: &EndpointSlice, i: usize) -> (bool, bool, bool) {
        let c = s.endpoints[i].conditions.as_ref().unwrap();
        (c.ready.unwrap(), c.serving.unwrap(), c.terminating.unwrap())
    }

    #[test]
    fn selected_pods_with_numbered_ports() {
        let s = svc(
            "web",
            json!({"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": 8080},
                {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        );
        let mut other_ns = pod("x", "10.0.0.9", "node-1", "web");
        other_ns.namespace = "other".into();
        let mut no_ip = pod("y", "", "node-1", "web");
        no_ip.ip = None;
        let pods = [
            pod("b", "10.0.0.2", "node-2", "web"),
            pod("a", "10.0.0.1", "node-1", "web"),
            pod("c", "10.0.0.3", "node-1", "db"),
            other_ns,
            no_ip,
        ];
        let d = desired(&s, &pods);
        assert_eq!(d.len(), 1);
        let sl = &d[0];
        assert_eq!(addrs(sl), vec!["10.0.0.1", "10.0.0.2"]);
        assert_eq!(sl.address_type, "IPv4");
        assert_eq!(
            sl.metadata.labels.as_ref().unwrap()[SERVICE_NAME_LABEL],
            "web"
        );
        assert_eq!(sl.endpoints[0].node_name.as_deref(), Some("node-1"));
        assert_eq!(
            sl.endpoints[1].target_ref.as_ref().unwrap().name.as_deref(),
            Some("b")
        );
        let ports: Vec<(Option<String>, Option<i32>, Option<String>)> = sl
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
            .collect();
        assert_eq!(
            ports,
            vec![
                (Some("http".into()), Some(8080), Some("TCP".into())),
                (Some("dns".into()), Some(53), Some("UDP".into())),
            ]
        );
        assert_eq!(cond(sl, 0), (true, true, false));
        // It reads back as felix reads it.
        let info = tartan_felix::services::SliceInfo::from_slice(sl).unwrap();
        assert_eq!(info.service, "default/web");
        assert_eq!(info.ports["http"], (tartan_felix::services::TCP, 8080));
    }

    #[test]
    fn named_target_ports_resolve_per_pod_and_split_slices() {
        let s = svc(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "http"}]}),
        );
        let mut a = pod("a", "10.0.0.1", "node-1", "web");
        a.ports = vec![(Some("http".into()), 8080, "TCP".into())];
        let mut b = pod("b", "10.0.0.2", "node-2", "web");
        b.ports = vec![(Some("http".into()), 9090, "TCP".into())];
        let mut c = pod("c", "10.0.0.3", "node-2", "web");
        // Same name, other protocol: not a match.
        c.ports = vec![(Some("http".into()), 7070, "UDP".into())];
        let d = desired(&s, &[a, b, c]);
        let mut by_port: Vec<(Option<i32>, Vec<&str>)> = d
            .iter()
            .map(|sl| {
                (
                    sl.ports.as_ref().unwrap().first().and_then(|p| p.port),
                    addrs(sl),
                )
            })
            .collect();
        by_port.sort();
        assert_eq!(
            by_port,
            vec![
                (None, vec!["10.0.0.3"]),
                (Some(8080), vec!["10.0.0.1"]),
                (Some(9090), vec!["10.0.0.2"]),
            ]
        );
        let names: std::collections::BTreeSet<_> =
            d.iter().map(|s| s.metadata.name.clone()).collect();
        assert_eq!(names.len(), 3, "distinct names");
    }

    #[test]
    fn readiness_and_termination() {
        let s = svc(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}),
        );
        let mut nr = pod("a", "10.0.0.1", "node-1", "web");
        nr.ready = false;
        let mut term = pod("b", "10.0.0.2", "node-1", "web");
        term.terminating = true;
        let mut done = pod("c", "10.0.0.3", "node-1", "web");
        done.finished = true;
        let d = desired(&s, &[nr.clone(), term.clone(), done]);
        assert_eq!(addrs(&d[0]), vec!["10.0.0.1", "10.0.0.2"]);
        assert_eq!(cond(&d[0], 0), (false, false, false));
        assert_eq!(cond(&d[0], 1), (false, true, true));
        let mut s2 = s.clone();
        s2.spec.as_mut().unwrap().publish_not_ready_addresses = Some(true);
        let d = desired(&s2, &[nr, term]);
        assert_eq!(cond(&d[0], 0), (true, true, false));
    }

    #[test]
    fn no_selector_no_slices_nothing_selected_one_empty_slice() {
        let none = svc("manual", json!({"ports": [{"port": 80}]}));
        assert!(desired(&none, &[pod("a", "10.0.0.1", "n", "web")]).is_empty());
        let ext = svc(
            "ext",
            json!({"type": "ExternalName", "externalName": "x.org", "selector": {"app": "web"}}),
        );
        assert!(desired(&ext, &[]).is_empty());
        let empty = svc(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}),
        );
        let d = desired(&empty, &[]);
        assert_eq!(d.len(), 1);
        assert!(d[0].endpoints.is_empty());
        // Headless Services with a selector get slices too.
        let headless = svc(
            "h",
            json!({"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"port": 80}]}),
        );
        assert_eq!(
            addrs(&desired(&headless, &[pod("a", "10.0.0.1", "n", "web")])[0]),
            vec!["10.0.0.1"]
        );
    }

    #[test]
    fn plan_creates_updates_and_deletes_only_its_own() {
        let s = svc(
            "web",
            json!({"selector": {"app": "web"}, "ports": [{"port": 80}]}),
        );
        let pods = vec![pod("a", "10.0.0.1", "node-1", "web")];
        let p = plan(std::slice::from_ref(&s), &pods, &[]);
        assert_eq!(p.create.len(), 1);
        assert!(p.update.is_empty() && p.delete.is_empty());
        let mut stored = p.create[0].clone();
        stored.metadata.resource_version = Some("7".into());
        // Unchanged: nothing to do.
        assert!(
            plan(
                std::slice::from_ref(&s),
                &pods,
                std::slice::from_ref(&stored)
            )
            .is_empty()
        );
        // A pod more: an update with the stored version.
        let more = vec![pods[0].clone(), pod("b", "10.0.0.2", "node-2", "web")];
        let p = plan(
            std::slice::from_ref(&s),
            &more,
            std::slice::from_ref(&stored),
        );
        assert_eq!(p.update.len(), 1);
        assert_eq!(p.update[0].metadata.resource_version.as_deref(), Some("7"));
        // The Service gone: its slice goes; someone else's slice stays.
        let mut foreign = stored.clone();
        foreign.metadata.name = Some("hand-made".into());
        foreign
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove(MANAGED_BY_LABEL);
        let p = plan(&[], &pods, &[stored.clone(), foreign]);
        assert_eq!(p.delete, vec![slice_key(&stored)]);
        assert!(p.create.is_empty());
    }

    #[test]
    fn pod_view_from_a_pod_object() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "x", "labels": {"app": "web"},
                         "deletionTimestamp": "2025-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "none",
                "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let v = PodView::from_pod(&p);
        assert_eq!(v.ip.as_deref(), Some("10.0.0.1"));
        assert!(v.ready && v.terminating && !v.finished);
        assert_eq!(v.ports, vec![(Some("http".into()), 8080, "TCP".into())]);
        assert_eq!(v.node.as_deref(), Some("node-1"));
    }
}
