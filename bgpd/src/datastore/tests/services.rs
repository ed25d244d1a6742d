//! Services in the datastore mode: the Service ranges every node
//! announces, and the LoadBalancer and external addresses of Services with
//! externalTrafficPolicy Local announced only by nodes with an endpoint.
use super::*;
use crate::datastore::build::build;
use tartan_api::resources::BgpConfigurationSpec;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::resources::bgpconfiguration::ServiceCidr;

use crate::datastore::services::{LocalServices, ServiceIps, local_policy_ips, summarize};

fn cidrs(list: &[&str]) -> Vec<ServiceCidr> {
    list.iter()
        .map(|c| ServiceCidr {
            cidr: c.to_string(),
        })
        .collect()
}

/// Cluster IPs 10.96.0.0/12, external IPs 203.0.113.0/24 and fd00:e::/64,
/// LoadBalancer IPs 198.51.100.0/24 and fd00:1b::/112.
fn with_service_ranges(mut i: Inputs) -> Inputs {
    i.configs.insert(
        "default".into(),
        BgpConfigurationSpec {
            service_cluster_ips: cidrs(&["10.96.0.0/12"]),
            service_external_ips: cidrs(&["203.0.113.0/24", "fd00:e::/64"]),
            service_load_balancer_ips: cidrs(&["198.51.100.0/24", "fd00:1b::/112"]),
            ..Default::default()
        },
    );
    i
}

fn prefixes(c: &crate::config::Config) -> Vec<String> {
    c.announce.iter().map(|a| a.prefix.to_string()).collect()
}

/// A Service in `default` from its spec and LoadBalancer ingress IPs.
fn service(name: &str, spec: serde_json::Value, ingress: &[&str]) -> Service {
    let ingress: Vec<serde_json::Value> = ingress
        .iter()
        .map(|ip| serde_json::json!({"ip": ip}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"loadBalancer": {"ingress": ingress}},
    }))
    .unwrap()
}

/// A LoadBalancer Service with externalTrafficPolicy Local.
fn local_lb(name: &str, ingress: &[&str]) -> Service {
    service(
        name,
        serde_json::json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "ports": [{"port": 80}]}),
        ingress,
    )
}

/// An EndpointSlice of `svc` in `default`; each endpoint as (node,
/// conditions).
fn slice(name: &str, svc: &str, endpoints: &[(&str, serde_json::Value)]) -> EndpointSlice {
    let eps: Vec<serde_json::Value> = endpoints
        .iter()
        .enumerate()
        .map(|(k, (node, cond))| {
            serde_json::json!({"addresses": [format!("10.244.0.{}", k + 1)],
                "nodeName": node, "conditions": cond})
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default",
            "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4",
        "endpoints": eps,
    }))
    .unwrap()
}

fn ready() -> serde_json::Value {
    serde_json::json!({"ready": true, "serving": true, "terminating": false})
}

#[test]
fn every_node_announces_the_service_ranges_of_both_families() {
    let mut i = with_service_ranges(three());
    i.blocks = vec![block("10.244.0.0/26", "n1")];
    for node in ["n1", "n2", "n3"] {
        i.node = node.into();
        let c = build(&i).unwrap();
        let p = prefixes(&c);
        for r in [
            "10.96.0.0/12",
            "203.0.113.0/24",
            "198.51.100.0/24",
            "fd00:e::/64",
            "fd00:1b::/112",
        ] {
            assert!(p.contains(&r.to_string()), "{node}: {r} not in {p:?}");
        }
        // Local routes: never in this node's kernel, and nothing learned
        // inside a service range goes there either.
        let ex: Vec<String> = c.kernel_exclude.iter().map(|n| n.to_string()).collect();
        assert_eq!(
            ex,
            [
                "10.96.0.0/12",
                "198.51.100.0/24",
                "203.0.113.0/24",
                "fd00:e::/64",
                "fd00:1b::/112"
            ]
        );
    }
    i.node = "n1".into();
    assert!(prefixes(&build(&i).unwrap()).contains(&"10.244.0.0/26".to_string()));
    // A CIDR that does not parse (the API rejects it; a store may still
    // hold it) is left out, the rest stays; host bits are cleared.
    i.configs.get_mut("default").unwrap().service_cluster_ips =
        cidrs(&["10.96.0.1/12", "not-a-cidr"]);
    let p = prefixes(&build(&i).unwrap());
    assert!(p.contains(&"10.96.0.0/12".to_string()), "{p:?}");
    assert!(!p.iter().any(|x| x.contains("not")));
    // No ranges: nothing of the kind.
    let c = build(&three()).unwrap();
    assert!(c.announce.is_empty() && c.kernel_exclude.is_empty());
}

#[test]
fn a_node_override_sets_its_own_ranges() {
    let mut i = with_service_ranges(three());
    i.configs.insert(
        "node.n2".into(),
        BgpConfigurationSpec {
            service_cluster_ips: cidrs(&["10.100.0.0/16"]),
            ..Default::default()
        },
    );
    i.node = "n2".into();
    let p = prefixes(&build(&i).unwrap());
    assert!(p.contains(&"10.100.0.0/16".to_string()), "{p:?}");
    assert!(!p.contains(&"10.96.0.0/12".to_string()), "{p:?}");
    assert!(p.contains(&"203.0.113.0/24".to_string()), "{p:?}");
}

#[test]
fn which_services_have_local_policy_and_which_addresses_count() {
    let ips = |e: &[&str], lb: &[&str]| ServiceIps {
        cluster: vec![],
        external: e.iter().map(|a| a.parse().unwrap()).collect(),
        load_balancer: lb.iter().map(|a| a.parse().unwrap()).collect(),
    };
    // LoadBalancer, Local: ingress IPs and external IPs, sorted, no repeats.
    let mut s = local_lb("web", &["198.51.100.7", "fd00:1b::7", "198.51.100.7"]);
    s.spec.as_mut().unwrap().external_ips = Some(vec!["203.0.113.9".into(), "bogus".into()]);
    assert_eq!(
        local_policy_ips(&s),
        Some(ips(&["203.0.113.9"], &["198.51.100.7", "fd00:1b::7"]))
    );
    // Cluster policy: the range announcement suffices.
    s.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
    assert_eq!(local_policy_ips(&s), None);
    // NodePort with external IPs: those; an ingress IP does not count
    // without type LoadBalancer.
    let np = service(
        "np",
        serde_json::json!({"type": "NodePort", "externalTrafficPolicy": "Local",
            "externalIPs": ["203.0.113.5"]}),
        &["198.51.100.5"],
    );
    assert_eq!(local_policy_ips(&np), Some(ips(&["203.0.113.5"], &[])));
    // ClusterIP: Local policy counts only with external IPs.
    let cip = |ext: serde_json::Value| {
        service(
            "c",
            serde_json::json!({"type": "ClusterIP", "externalTrafficPolicy": "Local",
                "externalIPs": ext}),
            &[],
        )
    };
    assert_eq!(
        local_policy_ips(&cip(serde_json::json!(["203.0.113.6"]))),
        Some(ips(&["203.0.113.6"], &[]))
    );
    assert_eq!(local_policy_ips(&cip(serde_json::json!([]))), None);
    // ExternalName: never.
    let en = service(
        "en",
        serde_json::json!({"type": "ExternalName", "externalName": "example.com",
            "externalTrafficPolicy": "Local", "externalIPs": ["203.0.113.8"]}),
        &[],
    );
    assert_eq!(local_policy_ips(&en), None);
    // Headless: the proxy leaves it alone; not announced.
    let headless = service(
        "h",
        serde_json::json!({"type": "ClusterIP", "clusterIP": "None",
            "externalTrafficPolicy": "Local", "externalIPs": ["203.0.113.8"]}),
        &[],
    );
    assert_eq!(local_policy_ips(&headless), None);
    // An ingress with ipMode Proxy belongs to the load balancer.
    let mut px = local_lb("px", &["198.51.100.8"]);
    px.status
        .as_mut()
        .unwrap()
        .load_balancer
        .as_mut()
        .unwrap()
        .ingress
        .as_mut()
        .unwrap()[0]
        .ip_mode = Some("Proxy".into());
    assert_eq!(local_policy_ips(&px), None);
    // No spec, no addresses: nothing.
    assert_eq!(local_policy_ips(&Service::default()), None);
    assert_eq!(local_policy_ips(&local_lb("pending", &[])), None);
}

#[test]
fn endpoint_conditions_are_read_as_the_proxy_reads_them() {
    use serde_json::json;
    // (ready anywhere, ready here, serving-terminating here) for one
    // endpoint on `node`, seen from n1.
    let one = |node: &str, cond: serde_json::Value| {
        summarize(&slice("web-a", "web", &[(node, cond)]), "n1")
            .map(|s| (s.ready_anywhere, s.ready_here, s.terminating_here))
    };
    assert_eq!(one("n1", ready()), Some((true, true, false)));
    // Unset `ready` means ready.
    assert_eq!(one("n1", json!({})), Some((true, true, false)));
    // Terminating and still serving.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": true, "terminating": true})
        ),
        Some((false, false, true))
    );
    // Unset `serving` follows `ready`: not serving.
    assert_eq!(
        one("n1", json!({"ready": false, "terminating": true})),
        None
    );
    // Not ready and not terminating (starting, failing its probe): nothing.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": false, "terminating": false})
        ),
        None
    );
    // Terminating and no longer serving: nothing.
    assert_eq!(
        one(
            "n1",
            json!({"ready": false, "serving": false, "terminating": true})
        ),
        None
    );
    // On another node: only "ready somewhere".
    assert_eq!(one("n2", ready()), Some((true, false, false)));
    assert_eq!(
        one(
            "n2",
            json!({"ready": false, "serving": true, "terminating": true})
        ),
        None
    );
    assert_eq!(
        summarize(&slice("web-a", "web", &[("n1", ready())]), "n1").map(|s| s.service),
        Some("default/web".into())
    );
    // No service label, or FQDN addresses: not an endpoint of a Service.
    let mut s = slice("x", "web", &[("n1", ready())]);
    s.metadata.labels = None;
    assert_eq!(summarize(&s, "n1"), None);
    let mut s = slice("x", "web", &[("n1", ready())]);
    s.address_type = "FQDN".into();
    assert_eq!(summarize(&s, "n1"), None);
}

#[test]
fn a_terminating_endpoint_keeps_the_route_only_while_nothing_is_ready() {
    use serde_json::json;
    let draining = json!({"ready": false, "serving": true, "terminating": true});
    let mut ls = LocalServices::new("n1");
    assert!(!ls.service("default/web", Some(&local_lb("web", &["198.51.100.7"]))));
    // A ready endpoint here.
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "web", &[("n1", ready())]))
    ));
    // It starts terminating, nothing else is ready: the proxy still
    // forwards to it; the route stays.
    let d = slice("web-a", "web", &[("n1", draining.clone())]);
    assert!(!ls.slice("default/web-a", Some(&d)));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.7/32"]);
    // A ready endpoint comes up on n2 (another slice): the proxy here
    // prefers ready ones, which are elsewhere; the route goes.
    let b = slice("web-b", "web", &[("n2", ready())]);
    assert!(ls.slice("default/web-b", Some(&b)));
    assert!(announced_with(&ls, "n1").is_empty());
    // n2's endpoint goes: back to the draining one here.
    assert!(ls.slice("default/web-b", None));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.7/32"]);
    // The same within one slice: a ready endpoint on n2 beside it.
    let both = slice("web-a", "web", &[("n1", draining), ("n2", ready())]);
    assert!(ls.slice("default/web-a", Some(&both)));
    assert!(announced_with(&ls, "n1").is_empty());
    // Seen from n2, which has the ready one: announced there.
    let mut n2 = LocalServices::new("n2");
    n2.service("default/web", Some(&local_lb("web", &["198.51.100.7"])));
    assert!(n2.slice("default/web-a", Some(&both)));
    assert_eq!(announced_with(&n2, "n2"), ["198.51.100.7/32"]);
}

/// The host routes `node` announces with the Services as `ls` has them.
fn announced_with(ls: &LocalServices, node: &str) -> Vec<String> {
    let mut i = with_service_ranges(three());
    i.node = node.into();
    i.services = ls.announced_all();
    prefixes(&build(&i).unwrap())
        .into_iter()
        .filter(|p| p.ends_with("/32") || p.ends_with("/128"))
        .collect()
}

#[test]
fn a_local_service_is_announced_while_this_node_has_an_endpoint() {
    let mut ls = LocalServices::new("n1");
    let mut svc = local_lb("web", &["198.51.100.7", "fd00:1b::7", "192.0.2.7"]);
    svc.spec.as_mut().unwrap().external_ips = Some(vec!["203.0.113.9".into(), "192.0.2.9".into()]);
    // The Service alone: no endpoint here, nothing to announce, nothing
    // changes.
    assert!(!ls.service("default/web", Some(&svc)));
    assert!(announced_with(&ls, "n1").is_empty());
    // An endpoint on another node: still nothing here.
    let there = slice("web-a", "web", &[("n2", ready())]);
    assert!(!ls.slice("default/web-a", Some(&there)));
    assert!(announced_with(&ls, "n1").is_empty());
    // The endpoint moves here: the addresses inside their ranges, as
    // host routes (192.0.2.x are outside every range: not announced, an
    // external IP in the LoadBalancer range neither).
    let here = slice("web-a", "web", &[("n1", ready())]);
    assert!(ls.slice("default/web-a", Some(&here)));
    assert_eq!(
        announced_with(&ls, "n1"),
        ["198.51.100.7/32", "203.0.113.9/32", "fd00:1b::7/128"]
    );
    // Unchanged again: no change reported.
    assert!(!ls.slice("default/web-a", Some(&here)));
    // A second slice with an endpoint here, then the first goes: still
    // announced; the last one goes: withdrawn.
    let here_b = slice("web-b", "web", &[("n1", ready()), ("n2", ready())]);
    assert!(!ls.slice("default/web-b", Some(&here_b)));
    assert!(!ls.slice("default/web-a", None));
    assert_eq!(announced_with(&ls, "n1").len(), 3);
    assert!(ls.slice("default/web-b", None));
    assert!(announced_with(&ls, "n1").is_empty());
    // Back, and the endpoint starts terminating: still served here, kept.
    assert!(ls.slice("default/web-a", Some(&here)));
    let draining = slice(
        "web-a",
        "web",
        &[(
            "n1",
            serde_json::json!({"ready": false, "serving": true, "terminating": true}),
        )],
    );
    assert!(!ls.slice("default/web-a", Some(&draining)));
    assert_eq!(announced_with(&ls, "n1").len(), 3);
    // It stops serving: withdrawn.
    let gone = slice(
        "web-a",
        "web",
        &[(
            "n1",
            serde_json::json!({"ready": false, "serving": false, "terminating": true}),
        )],
    );
    assert!(ls.slice("default/web-a", Some(&gone)));
    assert!(announced_with(&ls, "n1").is_empty());
    // The Service's addresses change while it has an endpoint here.
    assert!(ls.slice("default/web-a", Some(&here)));
    let moved = local_lb("web", &["198.51.100.8"]);
    assert!(ls.service("default/web", Some(&moved)));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.8/32"]);
    // Cluster policy: withdrawn (the range covers it).
    let mut cluster = moved.clone();
    cluster.spec.as_mut().unwrap().external_traffic_policy = Some("Cluster".into());
    assert!(ls.service("default/web", Some(&cluster)));
    assert!(announced_with(&ls, "n1").is_empty());
    // Local again, then the Service is deleted: withdrawn.
    assert!(ls.service("default/web", Some(&moved)));
    assert!(ls.service("default/web", None));
    assert!(announced_with(&ls, "n1").is_empty());
    // A node that only ever sees other nodes' endpoints announces nothing.
    let mut other = LocalServices::new("n3");
    other.service("default/web", Some(&moved));
    other.slice("default/web-a", Some(&here));
    assert!(announced_with(&other, "n3").is_empty());
}

/// As Calico: a Local Service's ClusterIPs inside `serviceClusterIPs`
/// are host routes from the nodes with an endpoint too.
#[test]
fn a_local_services_cluster_ip_is_announced_by_its_endpoints_nodes() {
    let mut ls = LocalServices::new("n1");
    let mut svc = local_lb("web", &["198.51.100.7"]);
    svc.spec.as_mut().unwrap().cluster_ip = Some("10.96.0.20".into());
    svc.spec.as_mut().unwrap().cluster_ips = Some(vec!["10.96.0.20".into()]);
    assert_eq!(
        local_policy_ips(&svc).unwrap().cluster,
        ["10.96.0.20".parse::<std::net::IpAddr>().unwrap()]
    );
    ls.service("default/web", Some(&svc));
    assert!(announced_with(&ls, "n1").is_empty());
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "web", &[("n1", ready())]))
    ));
    assert_eq!(
        announced_with(&ls, "n1"),
        ["10.96.0.20/32", "198.51.100.7/32"]
    );
    // A ClusterIP outside serviceClusterIPs is not announced.
    svc.spec.as_mut().unwrap().cluster_ips = Some(vec!["172.30.0.20".into()]);
    ls.service("default/web", Some(&svc));
    assert_eq!(announced_with(&ls, "n1"), ["198.51.100.7/32"]);
}

#[test]
fn events_that_change_nothing_here_report_no_change() {
    let mut ls = LocalServices::new("n1");
    // A Cluster-policy Service with endpoints here and elsewhere churning.
    let cluster = service(
        "api",
        serde_json::json!({"type": "LoadBalancer", "externalTrafficPolicy": "Cluster"}),
        &["198.51.100.1"],
    );
    assert!(!ls.service("default/api", Some(&cluster)));
    for n in 0..50 {
        let node = if n % 2 == 0 { "n1" } else { "n2" };
        let s = slice("api-a", "api", &[(node, ready())]);
        assert!(!ls.slice("default/api-a", Some(&s)));
    }
    // A Local Service whose endpoints churn on other nodes only.
    let web = local_lb("web", &["198.51.100.7"]);
    assert!(!ls.service("default/web", Some(&web)));
    for n in 0..50 {
        let s = slice(
            "web-a",
            "web",
            &[
                ("n2", ready()),
                (if n % 2 == 0 { "n3" } else { "n2" }, ready()),
            ],
        );
        assert!(!ls.slice("default/web-a", Some(&s)));
    }
    // A slice whose label moves it from one Service to another while
    // its endpoint stays here: web loses it (withdrawn), api gains it
    // (Cluster policy: nothing).
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "web", &[("n1", ready())]))
    ));
    assert!(ls.slice(
        "default/web-a",
        Some(&slice("web-a", "api", &[("n1", ready())]))
    ));
    assert!(ls.announced_all().is_empty());
}
