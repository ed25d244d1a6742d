//! The defaults the Kubernetes API server gives the Kubernetes kinds Tartan
//! stores, set before an object is checked and written (etcd and the
//! in-process store have no API server to do it; on Kubernetes the server
//! sets the same values, so setting them first changes nothing). Only
//! fields left unset are filled in; nothing given is changed, except a
//! Service's `sessionAffinityConfig`, which the API server clears when the
//! affinity is `None`. Pure.
//!
//! - Service: `type` ClusterIP; `sessionAffinity` None (and with ClientIP
//!   a timeout of 10800 s); each port's `protocol` TCP and `targetPort`
//!   its `port`; `externalTrafficPolicy` Cluster when externally
//!   accessible; `internalTrafficPolicy` Cluster (not for ExternalName);
//!   `allocateLoadBalancerNodePorts` true for a LoadBalancer; each
//!   LoadBalancer ingress IP's `ipMode` VIP.
//! - NetworkPolicy: `policyTypes` Ingress, plus Egress when it has egress
//!   rules; each port's `protocol` TCP.
//! - EndpointSlice: each port's `name` "" and `protocol` TCP.
//! - Secret: `type` Opaque.
//! - Namespace: `spec.finalizers` [kubernetes], `status.phase` Active, and
//!   the label `kubernetes.io/metadata.name` with its name (which the API
//!   server sets whatever was given).

use serde_json::{Map, Value, json};

use crate::store::DynamicObject;

/// The timeout a ClientIP session affinity gets when it gives none.
const CLIENT_IP_TIMEOUT: u64 = 10_800;

/// Fill in `obj`'s unset fields as the API server would.
pub fn apply(obj: &mut DynamicObject) {
    let Some(t) = obj.types.as_ref() else { return };
    match (t.api_version.as_str(), t.kind.as_str()) {
        ("v1", "Service") => service(&mut obj.data),
        ("networking.k8s.io/v1", "NetworkPolicy") => network_policy(&mut obj.data),
        ("discovery.k8s.io/v1", "EndpointSlice") => endpoint_slice(&mut obj.data),
        ("v1", "Namespace") => namespace(obj),
        ("v1", "Secret") => {
            if let Some(o) = obj.data.as_object_mut() {
                unset_to(o, "type", json!("Opaque"));
            }
        }
        _ => {}
    }
}

fn namespace(obj: &mut DynamicObject) {
    if let Some(name) = obj.metadata.name.clone() {
        obj.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(NAMESPACE_NAME_LABEL.to_string(), name);
    }
    let Some(o) = obj.data.as_object_mut() else {
        return;
    };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut()
        && spec.get("finalizers").is_none_or(Value::is_null)
    {
        spec.insert("finalizers".into(), json!(["kubernetes"]));
    }
    let status = o.entry("status").or_insert_with(|| json!({}));
    if let Some(status) = status.as_object_mut() {
        unset_to(status, "phase", json!("Active"));
    }
}

/// The label the API server gives every Namespace: its name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `o[key] = value` when `o` has no `key` (or it is null, or the empty
/// string: a Go string field's unset value).
fn unset_to(o: &mut Map<String, Value>, key: &str, value: Value) {
    if o.get(key)
        .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
    {
        o.insert(key.to_string(), value);
    }
}

/// The objects of the array `o[key]`, if it is one.
fn objects<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn service(data: &mut Value) {
    let Some(spec) = data.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    unset_to(spec, "type", json!("ClusterIP"));
    unset_to(spec, "sessionAffinity", json!("None"));
    match spec.get("sessionAffinity").and_then(Value::as_str) {
        Some("None") => {
            spec.remove("sessionAffinityConfig");
        }
        Some("ClientIP") => {
            let timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"));
            if timeout.is_none_or(Value::is_null) {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": CLIENT_IP_TIMEOUT}}),
                );
            }
        }
        _ => {}
    }
    for port in objects(spec, "ports") {
        unset_to(port, "protocol", json!("TCP"));
        let unset = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if unset && let Some(p) = port.get("port").cloned() {
            port.insert("targetPort".into(), p);
        }
    }
    let kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    // `ExternallyAccessible`, as validation reads it.
    let external = matches!(kind.as_str(), "NodePort" | "LoadBalancer")
        || (kind == "ClusterIP" && has_external_ips);
    if external {
        unset_to(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        unset_to(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if kind == "LoadBalancer" {
        unset_to(spec, "allocateLoadBalancerNodePorts", json!(true));
        let ingress = data
            .get_mut("status")
            .and_then(|s| s.get_mut("loadBalancer"))
            .and_then(Value::as_object_mut);
        for i in ingress.into_iter().flat_map(|lb| objects(lb, "ingress")) {
            if i.get("ip")
                .and_then(Value::as_str)
                .is_some_and(|ip| !ip.is_empty())
            {
                unset_to(i, "ipMode", json!("VIP"));
            }
        }
    }
}

fn network_policy(data: &mut Value) {
    let Some(spec) = data.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let no_types = spec
        .get("policyTypes")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if no_types {
        let egress = spec
            .get("egress")
            .and_then(Value::as_array)
            .is_some_and(|e| !e.is_empty());
        let types = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
        spec.insert("policyTypes".into(), types);
    }
    for direction in ["ingress", "egress"] {
        for rule in objects(spec, direction) {
            for port in objects(rule, "ports") {
                unset_to(port, "protocol", json!("TCP"));
            }
        }
    }
}

fn endpoint_slice(data: &mut Value) {
    let Some(o) = data.as_object_mut() else {
        return;
    };
    for port in objects(o, "ports") {
        unset_to(port, "name", json!(""));
        unset_to(port, "protocol", json!("TCP"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(v: Value) -> Value {
        let mut o: DynamicObject = serde_json::from_value(v).unwrap();
        apply(&mut o);
        serde_json::to_value(&o).unwrap()
    }

    fn svc(spec: Value) -> Value {
        defaulted(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}))["spec"]
            .clone()
    }

    #[test]
    fn a_service_gets_the_api_servers_defaults() {
        let s = svc(
            json!({"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}),
        );
        assert_eq!(
            s,
            json!({"type": "ClusterIP", "sessionAffinity": "None",
                   "internalTrafficPolicy": "Cluster",
                   "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                             {"port": 53, "protocol": "UDP", "targetPort": "dns"}]})
        );
        // Externally accessible: the external policy too; a LoadBalancer
        // allocates node ports unless told not to.
        let s = svc(json!({"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": 0}]}));
        assert_eq!(s["externalTrafficPolicy"], "Cluster");
        assert_eq!(s["allocateLoadBalancerNodePorts"], true);
        assert_eq!(s["ports"][0]["targetPort"], 80);
        // An empty string is an unset Go string.
        let s = svc(
            json!({"type": "", "sessionAffinity": "", "ports": [{"port": 80, "protocol": ""}]}),
        );
        assert_eq!(
            (&s["type"], &s["sessionAffinity"]),
            (&json!("ClusterIP"), &json!("None"))
        );
        assert_eq!(s["ports"][0]["protocol"], "TCP");
        let s = svc(json!({"externalIPs": ["192.0.2.7"], "ports": [{"port": 80}]}));
        assert_eq!(s["externalTrafficPolicy"], "Cluster");
        let s = svc(json!({"type": "NodePort", "externalTrafficPolicy": "Local",
                           "allocateLoadBalancerNodePorts": false, "ports": [{"port": 80}]}));
        assert_eq!(s["externalTrafficPolicy"], "Local", "given: kept");
        // ExternalName: neither traffic policy.
        let s = svc(json!({"type": "ExternalName", "externalName": "db.example.com"}));
        assert!(s.get("internalTrafficPolicy").is_none(), "{s}");
        assert!(s.get("externalTrafficPolicy").is_none(), "{s}");
    }

    #[test]
    fn session_affinity_gets_its_timeout_or_loses_its_config() {
        let s = svc(json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}]}));
        assert_eq!(
            s["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"],
            10_800
        );
        let s = svc(
            json!({"sessionAffinity": "ClientIP", "ports": [{"port": 80}],
                           "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}),
        );
        assert_eq!(s["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"], 60);
        let s = svc(json!({"sessionAffinity": "None", "ports": [{"port": 80}],
                           "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 60}}}));
        assert!(s.get("sessionAffinityConfig").is_none(), "{s}");
    }

    #[test]
    fn a_load_balancer_ingress_ip_is_a_vip_unless_told() {
        let v = defaulted(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [
                {"ip": "192.0.2.10"}, {"ip": "192.0.2.11", "ipMode": "Proxy"},
                {"hostname": "lb.example.com"}]}}}));
        let ingress = &v["status"]["loadBalancer"]["ingress"];
        assert_eq!(ingress[0]["ipMode"], "VIP");
        assert_eq!(ingress[1]["ipMode"], "Proxy");
        assert!(ingress[2].get("ipMode").is_none());
    }

    #[test]
    fn a_network_policy_gets_its_types_and_port_protocols() {
        let np = |spec: Value| {
            defaulted(
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
            )["spec"]
                .clone()
        };
        let s = np(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}));
        assert_eq!(s["policyTypes"], json!(["Ingress"]));
        assert_eq!(s["ingress"][0]["ports"][0]["protocol"], "TCP");
        let s = np(
            json!({"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]}),
        );
        assert_eq!(s["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(s["egress"][0]["ports"][0]["protocol"], "UDP");
        // An empty egress list is no egress rule; given types are kept.
        let s = np(json!({"podSelector": {}, "egress": []}));
        assert_eq!(s["policyTypes"], json!(["Ingress"]));
        let s = np(json!({"podSelector": {}, "policyTypes": ["Egress"]}));
        assert_eq!(s["policyTypes"], json!(["Egress"]));
    }

    #[test]
    fn endpoint_slice_ports_and_secrets() {
        let v = defaulted(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-1", "namespace": "default"}, "addressType": "IPv4",
            "endpoints": [], "ports": [{"port": 8080}, {"name": "dns", "port": 53, "protocol": "UDP"}]}),
        );
        assert_eq!(
            v["ports"],
            json!([{"name": "", "port": 8080, "protocol": "TCP"},
                   {"name": "dns", "port": 53, "protocol": "UDP"}])
        );
        let v = defaulted(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"}}));
        assert_eq!(v["type"], "Opaque");
        let ns = defaulted(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "web", "labels": {"kubernetes.io/metadata.name": "other"}}}));
        assert_eq!(ns["spec"], json!({"finalizers": ["kubernetes"]}));
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        assert_eq!(
            ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "web"
        );
        // Other kinds are left as they are.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"}, "data": {"a": "b"}});
        assert_eq!(defaulted(cm.clone()), cm);
    }
}
