//! The drop before an update's checks, one family of fields at a time: a
//! value left as stored is cleared and the update accepted; a changed one
//! is kept and refused with the API server's message.

use serde_json::{Value, json};

use super::drop_type_dependent_fields;
use crate::kind::Kind;

fn service(spec: Value, status: Option<Value>) -> Value {
    let mut v = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"}, "spec": spec});
    if let Some(s) = status {
        v["status"] = s;
    }
    v
}

/// `new` over `old` as the API server prepares it: the object then, and
/// its problems.
fn update(old: Value, new: Value) -> (Value, Vec<(String, String)>) {
    let mut new = service(new, None);
    drop_type_dependent_fields(&mut new, &service(old, None));
    let p = super::super::problems(Kind::Service, &new);
    (new, p)
}

fn checked(spec: Value) -> Vec<(String, String)> {
    super::super::problems(Kind::Service, &service(spec, None))
}

fn fields(p: &[(String, String)]) -> Vec<&str> {
    p.iter().map(|(f, _)| f.as_str()).collect()
}

/// `base` with `extra`'s fields set over it.
fn with(base: &Value, extra: Value) -> Value {
    let mut v = base.clone();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

fn cluster_ip() -> Value {
    json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
           "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
           "selector": {"app": "web"}, "ports": [{"port": 80}]})
}

fn to_external_name(old: &Value) -> Value {
    with(
        old,
        json!({"type": "ExternalName", "externalName": "db.example.com"}),
    )
}

#[test]
fn a_cluster_ip_left_over_is_dropped_on_a_change_to_external_name() {
    let old = cluster_ip();
    let new = to_external_name(&old);
    // As sent, the API server would refuse it: the drop is what lets it in.
    assert_eq!(
        fields(&checked(new.clone())),
        ["spec.clusterIPs", "spec.ipFamilies", "spec.ipFamilyPolicy"]
    );
    let (after, p) = update(old.clone(), new);
    assert!(p.is_empty(), "{p:?}");
    for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert!(after["spec"].get(f).is_none(), "{f}: {after}");
    }
    assert_eq!(after["spec"]["externalName"], "db.example.com");
    assert_eq!(after["spec"]["selector"], json!({"app": "web"}), "kept");
    // `clusterIP` alone is the same value as the stored pair (the API
    // server fills one from the other).
    let mut new = to_external_name(&old);
    new.as_object_mut().unwrap().remove("clusterIPs");
    let (after, p) = update(old, new);
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"].get("clusterIP").is_none());
}

#[test]
fn a_changed_cluster_ip_is_kept_and_refused() {
    let old = cluster_ip();
    let new = with(
        &to_external_name(&old),
        json!({"clusterIP": "10.96.0.11", "clusterIPs": ["10.96.0.11"]}),
    );
    let (after, p) = update(old.clone(), new);
    assert_eq!(after["spec"]["clusterIP"], "10.96.0.11");
    assert_eq!(fields(&p), ["spec.clusterIPs"], "{p:?}");
    assert_eq!(
        p[0].1,
        "Forbidden: may not be set for ExternalName services"
    );
    // Each field on its own: an unchanged address goes, changed families
    // stay and are refused.
    let new = with(&to_external_name(&old), json!({"ipFamilies": ["IPv6"]}));
    let (after, p) = update(old, new);
    assert!(after["spec"].get("clusterIP").is_none());
    assert!(after["spec"].get("ipFamilyPolicy").is_none());
    assert_eq!(fields(&p), ["spec.ipFamilies"], "{p:?}");
    assert_eq!(
        p[0].1,
        "Forbidden: may not be set for ExternalName services"
    );
}

#[test]
fn nothing_is_dropped_while_the_new_type_still_needs_it() {
    // ClusterIP to NodePort: the address is still needed.
    let old = cluster_ip();
    let new = with(&old, json!({"type": "NodePort"}));
    let (after, p) = update(old, new);
    assert!(p.is_empty(), "{p:?}");
    assert_eq!(after["spec"]["clusterIP"], "10.96.0.10");
    // From ExternalName: nothing was held.
    let old = json!({"type": "ExternalName", "externalName": "a.example.com",
                     "externalTrafficPolicy": "Local"});
    let new = with(&old, json!({"type": "ClusterIP", "ports": [{"port": 80}]}));
    let (after, _) = update(old, new);
    assert_eq!(after["spec"]["externalTrafficPolicy"], "Local");
}

fn load_balancer() -> Value {
    json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10",
           "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                     {"name": "https", "port": 443, "nodePort": 30443}],
           "allocateLoadBalancerNodePorts": true, "loadBalancerClass": "example.com/lb",
           "externalTrafficPolicy": "Local", "healthCheckNodePort": 30100})
}

#[test]
fn a_load_balancer_turned_cluster_ip_loses_what_it_left_behind() {
    let old = load_balancer();
    let new = with(&old, json!({"type": "ClusterIP"}));
    assert_eq!(
        fields(&checked(new.clone())),
        [
            "spec.ports[0].nodePort",
            "spec.ports[1].nodePort",
            "spec.externalTrafficPolicy",
            "spec.allocateLoadBalancerNodePorts",
            "spec.loadBalancerClass",
            "spec.healthCheckNodePort"
        ]
    );
    let mut sent = service(new, None);
    sent["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}});
    drop_type_dependent_fields(&mut sent, &service(old.clone(), None));
    let p = super::super::problems(Kind::Service, &sent);
    assert!(p.is_empty(), "{p:?}");
    let spec = &sent["spec"];
    for f in [
        "allocateLoadBalancerNodePorts",
        "loadBalancerClass",
        "externalTrafficPolicy",
        "healthCheckNodePort",
    ] {
        assert!(spec.get(f).is_none(), "{f}: {spec}");
    }
    assert!(
        spec["ports"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("nodePort").is_none())
    );
    assert_eq!(spec["clusterIP"], "10.96.0.10", "still a ClusterIP Service");
    assert_eq!(sent["status"], json!({"loadBalancer": {}}));
    // A port removed with its node port is no new node port.
    let new = with(
        &old,
        json!({"type": "ClusterIP", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}),
    );
    let (_, p) = update(old.clone(), new);
    assert!(p.is_empty(), "{p:?}");
    // allocateLoadBalancerNodePorts stored as left out reads as true.
    let mut stored = old.clone();
    stored
        .as_object_mut()
        .unwrap()
        .remove("allocateLoadBalancerNodePorts");
    let (after, p) = update(stored, with(&old, json!({"type": "ClusterIP"})));
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"].get("allocateLoadBalancerNodePorts").is_none());
}

#[test]
fn load_balancer_fields_changed_on_the_way_out_are_refused() {
    let old = load_balancer();
    let new = with(
        &old,
        json!({"type": "ClusterIP", "allocateLoadBalancerNodePorts": false,
               "loadBalancerClass": "example.com/other"}),
    );
    let (_, p) = update(old, new);
    assert_eq!(
        fields(&p),
        [
            "spec.allocateLoadBalancerNodePorts",
            "spec.loadBalancerClass"
        ],
        "{p:?}"
    );
    assert!(
        p.iter()
            .all(|(_, w)| w == "Forbidden: may only be used when `type` is 'LoadBalancer'")
    );
}

#[test]
fn a_node_port_changed_on_the_way_to_cluster_ip_is_refused() {
    let old = json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]});
    let new = json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30081}]});
    let (after, p) = update(old.clone(), new);
    assert_eq!(after["spec"]["ports"][0]["nodePort"], 30081);
    assert_eq!(fields(&p), ["spec.ports[0].nodePort"], "{p:?}");
    assert_eq!(p[0].1, "may not be used when `type` is 'ClusterIP'");
    // Unchanged: dropped.
    let new = json!({"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30080}]});
    let (after, p) = update(old, new);
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"]["ports"][0].get("nodePort").is_none());
}

#[test]
fn the_health_check_port_goes_when_traffic_policy_goes_local_to_cluster() {
    let old = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                     "healthCheckNodePort": 30100, "ports": [{"port": 80, "nodePort": 30080}]});
    let new = with(&old, json!({"externalTrafficPolicy": "Cluster"}));
    assert_eq!(fields(&checked(new.clone())), ["spec.healthCheckNodePort"]);
    let (after, p) = update(old.clone(), new);
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"].get("healthCheckNodePort").is_none());
    assert_eq!(after["spec"]["ports"][0]["nodePort"], 30080, "still needed");
    // A changed one is the user's: refused.
    let new = with(
        &old,
        json!({"externalTrafficPolicy": "Cluster", "healthCheckNodePort": 30101}),
    );
    let (_, p) = update(old, new);
    assert_eq!(fields(&p), ["spec.healthCheckNodePort"], "{p:?}");
    assert_eq!(
        p[0].1,
        "30101: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"
    );
}

#[test]
fn the_external_traffic_policy_goes_with_external_access() {
    // Left out on the NodePort Service, it read as Cluster.
    let old = json!({"type": "NodePort", "ports": [{"port": 80}]});
    let new = json!({"type": "ClusterIP", "externalTrafficPolicy": "Cluster",
                     "ports": [{"port": 80}]});
    let (after, p) = update(old.clone(), new);
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"].get("externalTrafficPolicy").is_none());
    let new = json!({"type": "ClusterIP", "externalTrafficPolicy": "Local",
                     "ports": [{"port": 80}]});
    let (_, p) = update(old, new);
    assert_eq!(fields(&p), ["spec.externalTrafficPolicy"], "{p:?}");
    // A ClusterIP Service losing its external addresses.
    let old = json!({"externalIPs": ["192.0.2.9"], "externalTrafficPolicy": "Local",
                     "ports": [{"port": 80}]});
    let new = json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]});
    let (after, p) = update(old, new);
    assert!(p.is_empty(), "{p:?}");
    assert!(after["spec"].get("externalTrafficPolicy").is_none());
}

#[test]
fn fields_of_one_type_are_refused_on_another() {
    for (extra, field) in [
        (
            json!({"allocateLoadBalancerNodePorts": true}),
            "spec.allocateLoadBalancerNodePorts",
        ),
        (
            json!({"loadBalancerClass": "example.com/lb"}),
            "spec.loadBalancerClass",
        ),
        (
            json!({"healthCheckNodePort": 30100}),
            "spec.healthCheckNodePort",
        ),
    ] {
        let spec = with(&json!({"type": "NodePort", "ports": [{"port": 80}]}), extra);
        assert_eq!(fields(&checked(spec.clone())), [field], "{spec}");
    }
    assert!(checked(load_balancer()).is_empty());
    assert_eq!(
        fields(&checked(with(
            &load_balancer(),
            json!({"loadBalancerClass": "-bad-"})
        ))),
        ["spec.loadBalancerClass"]
    );
}
