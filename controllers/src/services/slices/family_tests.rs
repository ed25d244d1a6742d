//! Tests of the EndpointSlice controller on a dual-stack Service: a set
//! of slices per family of its `ipFamilies`, each endpoint's address the
//! pod's of that family, and the slices of a family it drops deleted.

use super::tests::{pod as v4_pod, svc as web};
use super::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// A pod on `node` with an IPv4 and, when given, an IPv6 address.
fn pod(name: &str, v4: &str, v6: Option<&str>, node: &str) -> PodView {
    let mut p = v4_pod(name, v4, node, "web");
    p.ips.extend(v6.map(String::from));
    p
}

fn by_family(slices: &[EndpointSlice]) -> BTreeMap<String, Vec<Vec<String>>> {
    let mut out: BTreeMap<String, Vec<Vec<String>>> = BTreeMap::new();
    for s in slices {
        out.entry(s.address_type.clone())
            .or_default()
            .push(s.endpoints.iter().map(|e| e.addresses[0].clone()).collect());
    }
    out
}

fn spec(families: &[&str]) -> serde_json::Value {
    json!({"selector": {"app": "web"}, "ipFamilies": families,
           "ports": [{"name": "http", "port": 80, "targetPort": 8080}]})
}

#[test]
fn a_dual_stack_service_has_slices_of_each_family() {
    let pods = [
        pod("a", "10.0.0.1", Some("fd00:10:244::1"), "node-1"),
        pod("b", "10.0.0.2", Some("fd00:10:244::2"), "node-2"),
        // IPv4 only: an endpoint of the IPv4 slice alone.
        pod("c", "10.0.0.3", None, "node-2"),
    ];
    let svc = web("web", spec(&["IPv4", "IPv6"]));
    let d = desired(&svc, &pods);
    assert_eq!(
        by_family(&d),
        BTreeMap::from([
            (
                "IPv4".to_string(),
                vec![vec![
                    "10.0.0.1".into(),
                    "10.0.0.2".into(),
                    "10.0.0.3".into()
                ]]
            ),
            (
                "IPv6".to_string(),
                vec![vec!["fd00:10:244::1".into(), "fd00:10:244::2".into()]]
            ),
        ])
    );
    let names: Vec<_> = d.iter().map(|s| s.metadata.name.clone().unwrap()).collect();
    assert_ne!(names[0], names[1], "one name per family");
    // The IPv4 slice keeps the name a single-stack Service's had before
    // there were IPv6 slices (FNV-1a of `http:8080/TCP`).
    assert_eq!(d[0].address_type, "IPv4");
    assert_eq!(d[0].metadata.name.as_deref(), Some("web-175fa98d"));
    let single = desired(&web("web", spec(&["IPv4"])), &pods);
    assert_eq!(single.len(), 1);
    assert_eq!(single[0].metadata.name, d[0].metadata.name);
    // IPv6 alone; nothing selected leaves one empty IPv6 slice.
    let v6 = desired(&web("web", spec(&["IPv6"])), &pods);
    assert_eq!(by_family(&v6).keys().collect::<Vec<_>>(), vec!["IPv6"]);
    let none = desired(&web("web", spec(&["IPv6"])), &[]);
    assert_eq!(none.len(), 1);
    assert_eq!(
        (none[0].address_type.as_str(), none[0].endpoints.len()),
        ("IPv6", 0)
    );
}

#[test]
fn a_family_dropped_loses_its_slices() {
    let pods = [pod("a", "10.0.0.1", Some("fd00:10:244::1"), "node-1")];
    let both = desired(&web("web", spec(&["IPv4", "IPv6"])), &pods);
    let p = plan(&[web("web", spec(&["IPv4"]))], &pods, &both);
    assert!(p.create.is_empty() && p.update.is_empty(), "{p:?}");
    let v6 = both.iter().find(|s| s.address_type == "IPv6").unwrap();
    assert_eq!(
        p.delete,
        vec![("default".to_string(), v6.metadata.name.clone().unwrap())]
    );
}

#[test]
fn a_pod_view_reads_every_pod_ip() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "namespace": "default"},
        "spec": {"nodeName": "node-1", "containers": []},
        "status": {"podIP": "10.0.0.1",
                   "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00:10:244::1"}]}
    }))
    .unwrap();
    let v = PodView::from_pod(&p);
    assert_eq!(v.ip.as_deref(), Some("10.0.0.1"));
    assert_eq!(v.address_of("IPv4"), Some("10.0.0.1"));
    assert_eq!(v.address_of("IPv6"), Some("fd00:10:244::1"));
}
