//! What the API server does to a Service being updated before it checks
//! it (`dropTypeDependentFields`, from the Service strategy's
//! `PrepareForUpdate`): a Service is a union discriminated by `type`, and
//! a change of type leaves fields behind that the new type refuses. Each
//! such field is cleared, but only when the update left it as stored: a
//! leftover of the old type. One the user changed is theirs, and is
//! checked (and refused if the new type does not allow it).
//!
//! Pure, on the objects as JSON: the update as sent (`new`) and the stored
//! object (`old`). Never on a create.
//!
//! Tartan stores Services as written (it does not write the API server's
//! defaults into them), so values are compared in their defaulted reading:
//! `type` left out is ClusterIP, `externalTrafficPolicy` left out on an
//! externally-accessible Service is Cluster, `allocateLoadBalancerNodePorts`
//! left out on a LoadBalancer is true, and `clusterIP`/`clusterIPs` are one
//! value in two shapes (the API server fills each from the other).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Clears from `new` what its type no longer allows and the update did
/// not change from `old`, as `dropTypeDependentFields` does.
pub fn drop_type_dependent_fields(new: &mut Value, old: &Value) {
    let empty = Value::Object(Map::new());
    let old_spec = old.get("spec").unwrap_or(&empty);
    // Read before anything is cleared: each rule sees the update as sent.
    let new_view = new.get("spec").cloned().unwrap_or_default();
    let (n, o) = (&new_view, old_spec);
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };

    // "None" counts as a value: only a change to ExternalName frees it.
    if needs_cluster_ip(o) && !needs_cluster_ip(n) {
        if cluster_ips(o) == cluster_ips(n) {
            // Freed by the Service allocator once written.
            spec.remove("clusterIP");
            spec.remove("clusterIPs");
        }
        if list(o, "ipFamilies") == list(n, "ipFamilies") {
            spec.remove("ipFamilies");
        }
        if text(o, "ipFamilyPolicy") == text(n, "ipFamilyPolicy") {
            spec.remove("ipFamilyPolicy");
        }
    }

    // Ports may be added, removed or changed, as long as no node port is
    // new.
    if needs_node_ports(o) && !needs_node_ports(n) && node_ports(n).is_subset(&node_ports(o)) {
        for port in spec
            .get_mut("ports")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(p) = port.as_object_mut() {
                p.remove("nodePort");
            }
        }
    }

    if needs_health_check_port(o)
        && !needs_health_check_port(n)
        && number(o, "healthCheckNodePort") == number(n, "healthCheckNodePort")
    {
        spec.remove("healthCheckNodePort");
    }

    if kind(o) == "LoadBalancer" && kind(n) != "LoadBalancer" {
        // Only a value given on both sides is compared (as the API server
        // does); the stored one as defaulted.
        let old_alloc = old_allocate_lb_node_ports(o);
        let new_alloc = n
            .get("allocateLoadBalancerNodePorts")
            .and_then(Value::as_bool);
        if old_alloc.is_some() && old_alloc == new_alloc {
            spec.remove("allocateLoadBalancerNodePorts");
        }
        if text(o, "loadBalancerClass") == text(n, "loadBalancerClass") {
            spec.remove("loadBalancerClass");
        }
    }

    if externally_accessible(o)
        && !externally_accessible(n)
        && external_traffic_policy(o) == external_traffic_policy(n)
    {
        spec.remove("externalTrafficPolicy");
    }

    // The addresses a load balancer was given are no longer the Service's
    // (de-provisioning happens later; the Service says so at once).
    if kind(n) != "LoadBalancer"
        && let Some(status) = new.get_mut("status").and_then(Value::as_object_mut)
        && status.contains_key("loadBalancer")
    {
        status.insert("loadBalancer".into(), Value::Object(Map::new()));
    }
}

/// `spec.type`, ClusterIP when left out.
fn kind(spec: &Value) -> &str {
    match spec.get("type").and_then(Value::as_str) {
        None | Some("") => "ClusterIP",
        Some(t) => t,
    }
}

fn needs_cluster_ip(spec: &Value) -> bool {
    kind(spec) != "ExternalName"
}

fn needs_node_ports(spec: &Value) -> bool {
    matches!(kind(spec), "NodePort" | "LoadBalancer")
}

/// `ExternallyAccessible`: NodePort, LoadBalancer, or ClusterIP with
/// external addresses.
fn externally_accessible(spec: &Value) -> bool {
    match kind(spec) {
        "NodePort" | "LoadBalancer" => true,
        "ClusterIP" => !list(spec, "externalIPs").is_empty(),
        _ => false,
    }
}

fn needs_health_check_port(spec: &Value) -> bool {
    kind(spec) == "LoadBalancer" && external_traffic_policy(spec) == "Local"
}

/// As defaulted: Cluster on an externally-accessible Service.
fn external_traffic_policy(spec: &Value) -> String {
    match text(spec, "externalTrafficPolicy") {
        p if p.is_empty() && externally_accessible(spec) => "Cluster".into(),
        p => p,
    }
}

/// The stored (LoadBalancer) Service's value, as defaulted: true.
fn old_allocate_lb_node_ports(spec: &Value) -> Option<bool> {
    match spec.get("allocateLoadBalancerNodePorts") {
        None | Some(Value::Null) => Some(true),
        Some(v) => v.as_bool(),
    }
}

/// `clusterIP` and `clusterIPs` as one value: each filled from the other
/// when left out.
fn cluster_ips(spec: &Value) -> (String, Vec<String>) {
    let single = text(spec, "clusterIP");
    let mut plural = list(spec, "clusterIPs");
    if plural.is_empty() && !single.is_empty() {
        plural.push(single.clone());
    }
    let single = if single.is_empty() {
        plural.first().cloned().unwrap_or_default()
    } else {
        single
    };
    (single, plural)
}

/// The non-zero node ports of the Service's ports.
fn node_ports(spec: &Value) -> BTreeSet<i64> {
    spec.get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("nodePort").and_then(Value::as_i64))
        .filter(|n| *n != 0)
        .collect()
}

/// A string field; "" when left out (as Go reads it).
fn text(spec: &Value, field: &str) -> String {
    spec.get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A number field; 0 when left out.
fn number(spec: &Value, field: &str) -> i64 {
    spec.get(field).and_then(Value::as_i64).unwrap_or(0)
}

/// A list of strings; empty when left out.
fn list(spec: &Value, field: &str) -> Vec<String> {
    spec.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

#[cfg(test)]
#[path = "service_update_tests.rs"]
mod tests;
