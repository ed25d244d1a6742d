//! Tests of the EndpointSlice controller: endpoints from selected pods,
//! conditions, named ports, and the plan of writes.
use super::*;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

pub(super) fn svc(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": "svc-uid"},
        "spec": spec,
    }))
    .unwrap()
}

pub(super) fn pod(name: &str, ip: &str, node: &str, app: &str) -> PodView {
    PodView {
        namespace: "default".into(),
        name: name.into(),
        uid: Some(format!("uid-{name}")),
        labels: [("app".to_string(), app.to_string())].into(),
        ip: Some(ip.into()),
        ips: vec![ip.into()],
        node: Some(node.into()),
        ready: true,
        terminating: false,
        finished: false,
        ports: vec![],
        hostname: None,
        subdomain: None,
        zone: None,
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
    no_ip.ips.clear();
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
    let info: tartan_felix::services::SliceInfo =
        tartan_felix::services::SliceInfo::from_slice(sl, "node-1").unwrap();
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
    let names: std::collections::BTreeSet<_> = d.iter().map(|s| s.metadata.name.clone()).collect();
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
fn hostname_only_under_the_service_its_subdomain_names() {
    let headless = json!({"clusterIP": "None", "selector": {"app": "web"}});
    let web = svc("web", headless.clone());
    let other = svc("other", headless);
    let mut p0 = pod("web-0", "10.0.0.1", "node-1", "web");
    p0.hostname = Some("web-0".into());
    p0.subdomain = Some("web".into());
    // A hostname without a subdomain is no endpoint hostname anywhere.
    let mut p1 = pod("web-1", "10.0.0.2", "node-1", "web");
    p1.hostname = Some("web-1".into());
    let pods = [p0, p1];
    let hostnames = |s: &Service| -> Vec<Option<String>> {
        desired(s, &pods)[0]
            .endpoints
            .iter()
            .map(|e| e.hostname.clone())
            .collect()
    };
    assert_eq!(hostnames(&web), vec![Some("web-0".to_string()), None]);
    assert_eq!(hostnames(&other), vec![None, None]);
    // The hostname goes when the subdomain no longer names the Service.
    let mut moved = pods.clone();
    moved[0].subdomain = Some("elsewhere".into());
    let stored = desired(&web, &pods);
    let p = plan(std::slice::from_ref(&web), &moved, &stored);
    assert_eq!(p.update.len(), 1, "the hostname's removal is written");
    assert_eq!(p.update[0].endpoints[0].hostname, None);
}

#[test]
fn pod_view_from_a_pod_object() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a", "namespace": "x", "labels": {"app": "web"},
                     "deletionTimestamp": "2025-01-01T00:00:00Z"},
        "spec": {"nodeName": "node-1", "hostname": "a-0", "subdomain": "",
            "containers": [{"name": "main", "image": "none",
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
    assert_eq!(v.hostname.as_deref(), Some("a-0"));
    assert_eq!(v.subdomain, None, "an empty subdomain is none");
}

#[test]
fn endpoints_carry_their_zone_and_the_hints_of_the_traffic_distribution() {
    let zoned = |name: &str, ip: &str, node: &str, zone: Option<&str>| {
        let mut p = pod(name, ip, node, "web");
        p.zone = zone.map(str::to_string);
        p
    };
    let mut unready = zoned("d", "10.0.0.4", "node-2", Some("b"));
    unready.ready = false;
    let pods = [
        zoned("a", "10.0.0.1", "node-1", Some("a")),
        zoned("b", "10.0.0.2", "node-2", Some("b")),
        zoned("c", "10.0.0.3", "node-3", None),
        unready,
    ];
    let hints_of = |distribution: Option<&str>| {
        let mut spec = json!({"selector": {"app": "web"}, "ports": [{"port": 80}]});
        if let Some(d) = distribution {
            spec["trafficDistribution"] = json!(d);
        }
        let out = desired(&svc("web", spec), &pods);
        assert_eq!(out.len(), 1);
        let zones: Vec<Option<&str>> = out[0].endpoints.iter().map(|e| e.zone.as_deref()).collect();
        assert_eq!(zones, [Some("a"), Some("b"), None, Some("b")]);
        out[0]
            .endpoints
            .iter()
            .map(|e| serde_json::to_value(&e.hints).unwrap())
            .collect::<Vec<Value>>()
    };
    // Without a distribution, or with one not known: no hints.
    assert_eq!(hints_of(None), [const { Value::Null }; 4]);
    assert_eq!(
        hints_of(Some("PreferSameRegion")),
        [const { Value::Null }; 4]
    );
    // Each ready endpoint hinted for its own zone; one without a zone, or
    // not ready, gets none.
    for d in ["PreferClose", "PreferSameZone"] {
        assert_eq!(
            hints_of(Some(d)),
            [
                json!({"forZones": [{"name": "a"}]}),
                json!({"forZones": [{"name": "b"}]}),
                Value::Null,
                Value::Null
            ],
            "{d}"
        );
    }
    assert_eq!(
        hints_of(Some("PreferSameNode")),
        [
            json!({"forZones": [{"name": "a"}], "forNodes": [{"name": "node-1"}]}),
            json!({"forZones": [{"name": "b"}], "forNodes": [{"name": "node-2"}]}),
            json!({"forNodes": [{"name": "node-3"}]}),
            Value::Null
        ]
    );
}
