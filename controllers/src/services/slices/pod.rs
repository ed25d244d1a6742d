//! What the EndpointSlice controller reads of a Pod: its addresses, node,
//! labels, container ports, conditions, and hostname and subdomain.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;

/// What the controller needs of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// The primary address (`status.podIP`).
    pub ip: Option<String>,
    /// Every address (`status.podIPs`; the primary alone when absent):
    /// a dual-stack pod has one per family.
    pub ips: Vec<String>,
    pub node: Option<String>,
    pub ready: bool,
    pub terminating: bool,
    pub finished: bool,
    /// (name, port, protocol) of every container port.
    pub ports: Vec<(Option<String>, i32, String)>,
    /// `spec.hostname` and `spec.subdomain` (empty as unset): a pod whose
    /// subdomain is a Service's name has its hostname on that Service's
    /// endpoint (the StatefulSet name `web-0.web.ns.svc...`).
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
    /// The zone of the pod's node (its `topology.kubernetes.io/zone`),
    /// filled in from the Node by the caller: not a field of the Pod.
    pub zone: Option<String>,
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
        let mut ips: Vec<String> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .map(|i| i.ip.clone())
            .filter(|i| !i.is_empty())
            .collect();
        if ips.is_empty() {
            ips.extend(ip.clone().filter(|i| !i.is_empty()));
        }
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
            ips,
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
            hostname: spec
                .and_then(|s| s.hostname.clone())
                .filter(|h| !h.is_empty()),
            subdomain: spec
                .and_then(|s| s.subdomain.clone())
                .filter(|h| !h.is_empty()),
            zone: None,
        }
    }
}

impl PodView {
    /// The pod's address of a family (`IPv4` or `IPv6`, as an
    /// EndpointSlice's `addressType`).
    pub fn address_of(&self, family: &str) -> Option<&str> {
        let v6 = family == "IPv6";
        self.ips
            .iter()
            .find(|a| {
                a.parse::<std::net::IpAddr>()
                    .is_ok_and(|a| a.is_ipv6() == v6)
            })
            .map(String::as_str)
    }
}
