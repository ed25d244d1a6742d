//! The EndpointSlice controller's part, pure: from a Service with a
//! selector and the pods of its namespace, the slices that should exist;
//! and the writes that turn the stored slices into those.
//!
//! - One set of slices per family of the Service's `ipFamilies` (IPv4
//!   when none), of that `addressType`; slices of a family it no longer
//!   has are deleted.
//! - A pod is an endpoint of a family when its labels match the selector
//!   and it has an address of that family (in `status.podIPs`) and a
//!   node (phase neither Succeeded nor Failed).
//! - Conditions as upstream: `serving` is the pod's Ready condition,
//!   `terminating` whether it has a deletionTimestamp, and `ready` is
//!   serving and not terminating (always true with
//!   `publishNotReadyAddresses`).
//! - Ports: each Service port's targetPort, by number (none: the port
//!   itself), or by name against the pod's container ports of the same
//!   protocol; a pod that lacks a named port is left out of that port.
//!   Pods whose ports resolve alike share a slice; one slice per distinct
//!   set, named `<service>-<hash of the set>` so that it keeps its name.
//! - Each endpoint carries its node's zone (`zone`), and with a Service's
//!   `trafficDistribution` (`PreferClose`, `PreferSameZone`,
//!   `PreferSameNode`) each ready endpoint gets the hints proxies route by,
//!   as upstream's controller gives them: its own zone in
//!   `hints.forZones`, and for `PreferSameNode` its own node in
//!   `hints.forNodes`. (The `service.kubernetes.io/topology-mode: Auto`
//!   annotation, whose hints spread endpoints over zones by their CPUs, is
//!   not followed here; without `trafficDistribution` no hints are given.)
//! - A Service whose selector selects nothing keeps one empty slice, as
//!   upstream does. The slices carry `kubernetes.io/service-name` and
//!   `endpointslice.kubernetes.io/managed-by: tartan-lab`; only slices
//!   with that manager are changed or removed.

mod pod;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointHints, EndpointPort, EndpointSlice, ForNode, ForZone,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use pod::PodView;

pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "tartan-lab";

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

fn slice_name(svc: &str, family: &str, ports: &[SlicePort]) -> String {
    let sig: Vec<String> = ports
        .iter()
        .map(|(n, p, pr)| format!("{n}:{p}/{pr}"))
        .collect();
    // IPv4 slices keep the names they had before there were others.
    let sig = match family {
        "IPv4" => sig.join(","),
        other => format!("{other}|{}", sig.join(",")),
    };
    format!("{svc}-{:08x}", fnv(&sig))
}

/// The families a Service's slices are of: its `ipFamilies`, else IPv4.
fn families(svc: &Service) -> Vec<String> {
    let f: Vec<String> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f == "IPv4" || f == "IPv6")
        .collect();
    if f.is_empty() { vec!["IPv4".into()] } else { f }
}

/// The hints of a ready endpoint on `node` in `zone` for a Service's
/// `trafficDistribution` (`None`: no hints).
fn hints(
    distribution: Option<&str>,
    node: Option<&str>,
    zone: Option<&str>,
) -> Option<EndpointHints> {
    let same_node = match distribution? {
        "PreferClose" | "PreferSameZone" => false,
        "PreferSameNode" => true,
        _ => return None,
    };
    let for_zones = zone.map(|z| {
        vec![ForZone {
            name: z.to_string(),
        }]
    });
    let for_nodes = node.filter(|_| same_node).map(|n| {
        vec![ForNode {
            name: n.to_string(),
        }]
    });
    (for_zones.is_some() || for_nodes.is_some()).then_some(EndpointHints {
        for_zones,
        for_nodes,
    })
}

/// Whether the controller keeps slices for `svc`: it has a selector and
/// is not ExternalName.
pub fn managed(svc: &Service) -> bool {
    let Some(spec) = &svc.spec else { return false };
    spec.type_.as_deref() != Some("ExternalName")
        && spec.selector.as_ref().is_some_and(|s| !s.is_empty())
}

/// The slices `svc` should have, given every pod of the lab: those of
/// each of its families.
pub fn desired(svc: &Service, pods: &[PodView]) -> Vec<EndpointSlice> {
    if !managed(svc) {
        return vec![];
    }
    families(svc)
        .iter()
        .flat_map(|f| desired_of(svc, f, pods))
        .collect()
}

/// The slices of `svc` of `family` (`IPv4` or `IPv6`).
fn desired_of(svc: &Service, family: &str, pods: &[PodView]) -> Vec<EndpointSlice> {
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
        .filter(|p| {
            p.namespace == ns && !p.finished && p.address_of(family).is_some() && p.node.is_some()
        })
        .filter(|p| selector.iter().all(|(k, v)| p.labels.get(k) == Some(v)))
        .collect();
    selected.sort_by(|a, b| a.name.cmp(&b.name));
    let distribution = spec.traffic_distribution.as_deref();
    for p in selected {
        let ports = resolve(svc, p);
        let ready = publish || (p.ready && !p.terminating);
        groups.entry(ports).or_default().push(Endpoint {
            addresses: vec![p.address_of(family).unwrap_or_default().to_string()],
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                serving: Some(publish || p.ready),
                terminating: Some(p.terminating),
            }),
            node_name: p.node.clone(),
            zone: p.zone.clone(),
            hints: hints(distribution, p.node.as_deref(), p.zone.as_deref()).filter(|_| ready),
            // As Kubernetes' controller: the pod's hostname, when its
            // subdomain names this Service (in the pod's namespace).
            hostname: p
                .hostname
                .clone()
                .filter(|_| p.subdomain.as_deref() == Some(name.as_str())),
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
                name: Some(slice_name(&name, family, &ports)),
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
            address_type: family.into(),
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
mod family_tests;
#[cfg(test)]
mod tests;
