//! Tests of Service allocation: ClusterIPs, NodePorts, health-check
//! NodePorts given, kept, refused and exhausted; LoadBalancer
//! addresses left to the pool controller.
use super::fields::ingress_ips;
use super::*;
use serde_json::{Value, json};

pub(super) fn svc(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))
    .unwrap()
}

fn ranges() -> Ranges {
    Ranges::new("10.96.0.0/16".parse().unwrap())
}

fn ip(s: &Service) -> &str {
    s.spec.as_ref().unwrap().cluster_ip.as_deref().unwrap()
}

pub(super) fn node_ports(s: &Service) -> Vec<i32> {
    s.spec
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.node_port)
        .collect()
}

fn web() -> Value {
    json!({"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]})
}

#[test]
fn cluster_ips_lowest_free_after_the_reserved_first() {
    let a = allocate(&ranges(), &[], &[svc("a", web()), svc("b", web())]).unwrap();
    assert_eq!(ip(&a[0]), "10.96.0.2");
    assert_eq!(ip(&a[1]), "10.96.0.3");
    assert_eq!(
        a[0].spec.as_ref().unwrap().cluster_ips,
        Some(vec!["10.96.0.2".to_string()])
    );
    // Stored ones are skipped; a ClusterIP Service gets no NodePort.
    let b = allocate(&ranges(), &a, &[svc("c", web())]).unwrap();
    assert_eq!(ip(&b[0]), "10.96.0.4");
    assert!(node_ports(&b[0]).is_empty());
}

#[test]
fn a_given_cluster_ip_is_kept_even_outside_the_range() {
    let mut s = web();
    s["clusterIP"] = json!("172.30.0.9");
    let a = allocate(&ranges(), &[], &[svc("a", s)]).unwrap();
    assert_eq!(ip(&a[0]), "172.30.0.9");
    let mut s = web();
    s["clusterIP"] = json!("10.96.0.2");
    let a = allocate(&ranges(), &[], &[svc("a", s), svc("b", web())]).unwrap();
    assert_eq!(ip(&a[0]), "10.96.0.2");
    assert_eq!(ip(&a[1]), "10.96.0.3", "the given one is not handed out");
}

#[test]
fn headless_and_external_name_get_no_cluster_ip() {
    let mut s = web();
    s["clusterIP"] = json!("None");
    let ext = json!({"type": "ExternalName", "externalName": "example.org"});
    let a = allocate(&ranges(), &[], &[svc("h", s), svc("e", ext)]).unwrap();
    assert_eq!(ip(&a[0]), "None");
    assert_eq!(a[1].spec.as_ref().unwrap().cluster_ip, None);
}

#[test]
fn cluster_ip_and_cluster_ips_are_each_filled_from_the_other() {
    let mut given_ips = web();
    given_ips["clusterIPs"] = json!(["10.96.0.9"]);
    let mut headless = web();
    headless["clusterIPs"] = json!(["None"]);
    let mut given_ip = web();
    given_ip["clusterIP"] = json!("10.96.0.8");
    let a = allocate(
        &ranges(),
        &[],
        &[svc("a", given_ips), svc("h", headless), svc("b", given_ip)],
    )
    .unwrap();
    for (s, want) in a.iter().zip(["10.96.0.9", "None", "10.96.0.8"]) {
        let sp = s.spec.as_ref().unwrap();
        assert_eq!(sp.cluster_ip.as_deref(), Some(want));
        assert_eq!(sp.cluster_ips, Some(vec![want.to_string()]));
    }
}

#[test]
fn a_taken_cluster_ip_is_refused() {
    let stored = allocate(&ranges(), &[], &[svc("a", web())]).unwrap();
    let mut s = web();
    s["clusterIP"] = json!("10.96.0.2");
    let e = allocate(&ranges(), &stored, &[svc("b", s)]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/b: spec.clusterIP: 10.96.0.2 is already allocated to Service default/a"
        ]
    );
}

#[test]
fn node_ports_for_node_port_and_load_balancer() {
    let np = json!({"type": "NodePort", "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80}, {"name": "dns", "port": 53, "protocol": "UDP"}]});
    let lb = json!({"type": "LoadBalancer", "ports": [{"port": 443}]});
    let a = allocate(&ranges(), &[], &[svc("n", np), svc("l", lb)]).unwrap();
    assert_eq!(node_ports(&a[0]), vec![30000, 30001]);
    assert_eq!(node_ports(&a[1]), vec![30002]);
    assert!(
        ingress_ips(&a[1]).is_empty(),
        "the pool controller's to give"
    );
}

#[test]
fn a_taken_or_out_of_range_node_port_is_refused_and_nothing_is_given() {
    let np = |n: i32| json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": n}]});
    let stored = allocate(&ranges(), &[], &[svc("a", np(30080))]).unwrap();
    let e = allocate(&ranges(), &stored, &[svc("ok", web()), svc("b", np(30080))]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/b: spec.ports[0].nodePort: 30080 is already allocated to Service default/a"
        ]
    );
    let e = allocate(&ranges(), &[], &[svc("c", np(8080))]).unwrap_err();
    assert!(
        e[0].contains("8080 is not in the NodePort range 30000-32767"),
        "{e:?}"
    );
    // Two incoming Services asking for one port.
    let e = allocate(&ranges(), &[], &[svc("x", np(30001)), svc("y", np(30001))]).unwrap_err();
    assert!(
        e[0].contains("already allocated to Service default/x"),
        "{e:?}"
    );
    // A ClusterIP Service may not name one.
    let mut s = web();
    s["ports"][0]["nodePort"] = json!(30005);
    let e = allocate(&ranges(), &[], &[svc("z", s)]).unwrap_err();
    assert!(e[0].contains("only for NodePort and LoadBalancer"), "{e:?}");
}

#[test]
fn a_local_load_balancer_gets_a_health_check_node_port() {
    let lb = |extra: Value| {
        let mut s = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80}]});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    let hc = |s: &Service| s.spec.as_ref().and_then(|sp| sp.health_check_node_port);
    let a = allocate(&ranges(), &[], &[svc("a", lb(json!({})))]).unwrap();
    // After the Service's own nodePort, from the same range.
    assert_eq!(hc(&a[0]), Some(30001));
    assert_eq!(node_ports(&a[0]), vec![30000]);
    // Kept when applied again; the next Service gets other ports.
    let again = allocate(&ranges(), &a, &[svc("a", lb(json!({})))]).unwrap();
    assert_eq!(hc(&again[0]), Some(30001));
    let b = allocate(&ranges(), &a, &[svc("b", lb(json!({})))]).unwrap();
    assert_eq!((node_ports(&b[0]), hc(&b[0])), (vec![30002], Some(30003)));
    // Cluster policy: none.
    let c = allocate(
        &ranges(),
        &[],
        &[svc("c", lb(json!({"externalTrafficPolicy": "Cluster"})))],
    )
    .unwrap();
    assert_eq!(hc(&c[0]), None);
    // A given one is kept, checked against the range and the holders.
    let d = allocate(
        &ranges(),
        &a,
        &[svc("d", lb(json!({"healthCheckNodePort": 31000})))],
    )
    .unwrap();
    assert_eq!(hc(&d[0]), Some(31000));
    let e = allocate(
        &ranges(),
        &a,
        &[svc("e", lb(json!({"healthCheckNodePort": 30001})))],
    )
    .unwrap_err();
    assert!(
        e[0].contains("already allocated to Service default/a"),
        "{e:?}"
    );
    let e = allocate(
        &ranges(),
        &[],
        &[svc("f", lb(json!({"healthCheckNodePort": 80})))],
    )
    .unwrap_err();
    assert!(e[0].contains("not in the NodePort range"), "{e:?}");
    let e = allocate(
        &ranges(),
        &[],
        &[svc(
            "g",
            lb(json!({"externalTrafficPolicy": "Cluster", "healthCheckNodePort": 31001})),
        )],
    )
    .unwrap_err();
    assert!(
        e[0].contains("only for LoadBalancer Services with externalTrafficPolicy: Local"),
        "{e:?}"
    );
}

#[test]
fn one_service_may_use_a_node_port_for_tcp_and_udp() {
    let s = json!({"type": "NodePort", "ports": [
        {"name": "t", "port": 53, "nodePort": 30053},
        {"name": "u", "port": 53, "protocol": "UDP", "nodePort": 30053}]});
    assert!(allocate(&ranges(), &[], &[svc("dns", s)]).is_ok());
}

#[test]
fn applied_again_keeps_what_it_holds() {
    let np = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
    let first = allocate(&ranges(), &[], &[svc("a", np.clone())]).unwrap();
    let other = allocate(&ranges(), &first, &[svc("b", np.clone())]).unwrap();
    let stored = [first[0].clone(), other[0].clone()];
    let again = allocate(&ranges(), &stored, &[svc("a", np)]).unwrap();
    assert_eq!(ip(&again[0]), ip(&first[0]));
    assert_eq!(node_ports(&again[0]), node_ports(&first[0]));
    // A changed ClusterIP is refused.
    let mut s = web();
    s["clusterIP"] = json!("10.96.0.99");
    let e = allocate(&ranges(), &stored, &[svc("a", s)]).unwrap_err();
    assert!(e[0].contains("may not change"), "{e:?}");
    // Turned into a ClusterIP Service: its NodePort is not carried.
    let back = allocate(&ranges(), &stored, &[svc("a", web())]).unwrap();
    assert!(node_ports(&back[0]).is_empty());
}

/// The status as the LoadBalancerIPPool controller writes it.
fn with_ingress(mut s: Service, ip: &str) -> Service {
    s.status =
        Some(serde_json::from_value(json!({"loadBalancer": {"ingress": [{"ip": ip}]}})).unwrap());
    s
}

#[test]
fn load_balancer_addresses_are_left_to_the_pool_controller() {
    let lb = |ip: Option<&str>| {
        let mut v = json!({"type": "LoadBalancer", "ports": [{"port": 80}]});
        if let Some(ip) = ip {
            v["loadBalancerIP"] = json!(ip);
        }
        v
    };
    // No address given, and none refused: a pool decides.
    let a = allocate(
        &ranges(),
        &[],
        &[svc("a", lb(None)), svc("b", lb(Some("10.1.1.1")))],
    )
    .unwrap();
    assert!(ingress_ips(&a[0]).is_empty() && ingress_ips(&a[1]).is_empty());
    // Two Services may ask for one address: the controller gives it to one.
    assert!(allocate(&ranges(), &a, &[svc("c", lb(Some("10.1.1.1")))]).is_ok());
    // What the controller wrote stays when the Service is applied again.
    let stored = [with_ingress(a[0].clone(), "198.18.0.1")];
    let again = allocate(&ranges(), &stored, &[svc("a", lb(None))]).unwrap();
    assert_eq!(ingress_ips(&again[0]), vec!["198.18.0.1"]);
    assert_eq!(node_ports(&again[0]), node_ports(&a[0]));
}

#[test]
fn bad_services_are_reported_whole() {
    let s = json!({"type": "Fancy", "ports": [
        {"port": 0}, {"name": "b", "port": 80, "protocol": "ICMP", "targetPort": 70000}]});
    let e = allocate(&ranges(), &[], &[svc("bad", s)]).unwrap_err();
    assert_eq!(e.len(), 5, "{e:#?}");
    assert!(
        e.iter().all(|m| m.starts_with("Service default/bad: ")),
        "{e:?}"
    );
    let e = allocate(&ranges(), &[], &[svc("x", web()), svc("x", web())]).unwrap_err();
    assert!(e[0].contains("twice"), "{e:?}");
}

#[test]
fn services_get_the_ip_family_fields_of_a_single_stack_cluster() {
    let mut headless = json!({"clusterIP": "None"});
    let ext = json!({"type": "ExternalName", "externalName": "example.org"});
    let a = allocate(
        &ranges(),
        &[],
        &[svc("a", web()), svc("h", headless.clone()), svc("e", ext)],
    )
    .unwrap();
    let families = |s: &Service| {
        let sp = s.spec.as_ref().unwrap();
        (sp.ip_family_policy.clone(), sp.ip_families.clone())
    };
    let v = |x: &[&str]| Some(x.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(families(&a[0]), (Some("SingleStack".into()), v(&["IPv4"])));
    assert_eq!(
        families(&a[1]),
        (Some("RequireDualStack".into()), v(&["IPv4", "IPv6"]))
    );
    assert_eq!(families(&a[2]), (None, None), "ExternalName has neither");
    // Dual-stack asked of a Service with an address is refused, and
    // nothing is allocated.
    headless["ipFamilyPolicy"] = json!("RequireDualStack");
    let mut dual = web();
    dual["ipFamilyPolicy"] = json!("RequireDualStack");
    let e = allocate(&ranges(), &[], &[svc("d", dual), svc("h", headless)]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/d: spec.ipFamilyPolicy: RequireDualStack: this cluster is not configured for dual-stack services"
        ]
    );
}

#[test]
fn cluster_ip_and_the_first_of_cluster_ips_must_agree() {
    let mismatched = || {
        let mut s = web();
        s["clusterIP"] = json!("10.96.0.2");
        s["clusterIPs"] = json!(["10.96.0.7"]);
        s
    };
    let want = vec![
        "Service default/a: spec.clusterIPs: Invalid value: []string{\"10.96.0.7\"}: first value must match `clusterIP`",
    ];
    // Created: refused, not rewritten.
    assert_eq!(
        allocate(&ranges(), &[], &[svc("a", mismatched())]).unwrap_err(),
        want
    );
    // Updated with `clusterIP` as stored: the primary may not change
    // through `clusterIPs[0]`.
    let stored = allocate(&ranges(), &[], &[svc("a", web())]).unwrap();
    assert_eq!(ip(&stored[0]), "10.96.0.2");
    assert_eq!(
        allocate(&ranges(), &stored, &[svc("a", mismatched())]).unwrap_err(),
        want
    );
    // Nor through `clusterIPs` alone.
    let mut moved = web();
    moved["clusterIPs"] = json!(["10.96.0.7"]);
    let e = allocate(&ranges(), &stored, &[svc("a", moved)]).unwrap_err();
    assert!(e[0].contains("may not change"), "{e:?}");
}

#[test]
fn an_ip_family_is_ipv4_or_ipv6_even_for_a_headless_service_without_a_selector() {
    let headless = json!({"clusterIP": "None", "ipFamilies": ["IPv5"]});
    assert_eq!(
        allocate(&ranges(), &[], &[svc("h", headless)]).unwrap_err(),
        vec![
            "Service default/h: spec.ipFamilies[0]: Unsupported value: \"IPv5\": supported values: \"IPv4\", \"IPv6\""
        ]
    );
    let mut policy = web();
    policy["ipFamilyPolicy"] = json!("DualStack");
    assert_eq!(
        allocate(&ranges(), &[], &[svc("p", policy)]).unwrap_err(),
        vec![
            "Service default/p: spec.ipFamilyPolicy: Unsupported value: \"DualStack\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""
        ]
    );
}
