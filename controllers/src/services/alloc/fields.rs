//! What allocation reads of a Service: its key and type, whether it wants
//! NodePorts or a health-check NodePort, and the ClusterIP, ports and
//! LoadBalancer addresses it already gives.

use k8s_openapi::api::core::v1::{Service, ServiceSpec};

/// `namespace/name`.
pub fn key(s: &Service) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or("default"),
        s.metadata.name.as_deref().unwrap_or("")
    )
}

pub(super) fn type_of(s: &Service) -> &str {
    s.spec
        .as_ref()
        .and_then(|sp| sp.type_.as_deref())
        .unwrap_or("ClusterIP")
}

pub(super) fn wants_node_ports(s: &Service) -> bool {
    match type_of(s) {
        "NodePort" => true,
        "LoadBalancer" => s
            .spec
            .as_ref()
            .and_then(|sp| sp.allocate_load_balancer_node_ports)
            .unwrap_or(true),
        _ => false,
    }
}

/// A LoadBalancer Service with `externalTrafficPolicy: Local` has a
/// `healthCheckNodePort` (where load balancers ask a node whether it has
/// local endpoints), from the NodePort range.
pub(super) fn wants_health_port(s: &Service) -> bool {
    type_of(s) == "LoadBalancer"
        && s.spec
            .as_ref()
            .and_then(|sp| sp.external_traffic_policy.as_deref())
            == Some("Local")
}

pub(super) fn health_port(s: &Service) -> Option<i32> {
    s.spec
        .as_ref()
        .and_then(|sp| sp.health_check_node_port)
        .filter(|n| *n != 0)
}

/// The ClusterIP a Service gives (`clusterIP`, else `clusterIPs[0]`);
/// `None` when it gives none (or "").
pub(super) fn given_cluster_ip(s: &Service) -> Option<String> {
    given_cluster_ip_spec(s.spec.as_ref()?)
}

/// [`given_cluster_ip`] of a Service's spec.
pub(super) fn given_cluster_ip_spec(sp: &ServiceSpec) -> Option<String> {
    sp.cluster_ip
        .clone()
        .filter(|ip| !ip.is_empty())
        .or_else(|| sp.cluster_ips.as_ref()?.first().cloned())
        .filter(|ip| !ip.is_empty())
}

/// Every ClusterIP a Service's spec gives (`clusterIPs`, else
/// `clusterIP`), without "None" and "".
pub(super) fn cluster_ip_list(sp: &ServiceSpec) -> Vec<String> {
    let list: Vec<String> = match sp.cluster_ips.as_deref() {
        Some(l) if !l.is_empty() => l.to_vec(),
        _ => sp.cluster_ip.clone().into_iter().collect(),
    };
    list.into_iter()
        .filter(|ip| !ip.is_empty() && ip != "None")
        .collect()
}

pub(super) fn ingress_ips(s: &Service) -> Vec<String> {
    s.status
        .as_ref()
        .and_then(|st| st.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}
