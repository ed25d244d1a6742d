//! LoadBalancer address assignment: pools, selectors, requests, keeping
//! and giving back; and one pass against the in-memory store.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use serde_json::{Value, json};
use tartan_api::resources::{LoadBalancerIpPool, LoadBalancerIpPoolSpec};
use tartan_api::store::typed::TypedStore;

use super::assign::{CLASS, POOL_ANNOTATION, assign, ingress};

fn pool(name: &str, cidrs: &[&str], auto: bool, selector: &str) -> LoadBalancerIpPool {
    let mut spec = LoadBalancerIpPoolSpec::new(cidrs);
    spec.auto_assign = auto;
    spec.service_selector = selector.into();
    LoadBalancerIpPool::new(name, spec)
}

/// A Service `name` created at second `created`, its spec merged from
/// `spec`, holding `ips`.
fn svc(name: &str, created: u32, spec: Value, ips: &[&str], meta: Value) -> Service {
    let mut s = json!({
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "1",
            "creationTimestamp": format!("2026-01-01T00:00:{created:02}Z")},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
        "status": {"loadBalancer": {"ingress": ips.iter().map(|i| json!({"ip": i})).collect::<Vec<_>>()}}
    });
    for (k, v) in spec.as_object().unwrap() {
        s["spec"][k] = v.clone();
    }
    for (k, v) in meta.as_object().unwrap() {
        s["metadata"][k] = v.clone();
    }
    serde_json::from_value(s).unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn to_of(o: &super::Outcome, name: &str) -> Option<Vec<IpAddr>> {
    o.changes
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.to.clone())
}

#[test]
fn lowest_free_first_kept_when_held_and_requests_honoured() {
    let pools = [pool("a", &["198.51.100.0/30"], true, "all()")];
    let o = assign(
        &pools,
        &[
            svc("held", 1, json!({}), &["198.51.100.0"], json!({})),
            svc("new", 2, json!({}), &[], json!({})),
            svc(
                "asks",
                3,
                json!({"loadBalancerIP": "198.51.100.3"}),
                &[],
                json!({}),
            ),
            svc(
                "asks-taken",
                4,
                json!({"loadBalancerIP": "198.51.100.0"}),
                &[],
                json!({}),
            ),
            svc(
                "asks-outside",
                5,
                json!({"loadBalancerIP": "203.0.113.1"}),
                &[],
                json!({}),
            ),
        ],
    );
    assert_eq!(to_of(&o, "held"), None, "kept: no write");
    assert_eq!(to_of(&o, "new"), Some(vec![ip("198.51.100.1")]));
    assert_eq!(to_of(&o, "asks"), Some(vec![ip("198.51.100.3")]));
    assert_eq!(
        o.problems,
        [
            "default/asks-taken: spec.loadBalancerIP 198.51.100.0 is held by another Service",
            "default/asks-outside: spec.loadBalancerIP 203.0.113.1 is in no LoadBalancerIPPool it may use",
        ]
    );
    assert_eq!(o.usage["a"], (4, 3));
}

#[test]
fn an_address_outside_every_pool_is_replaced_and_the_older_service_keeps_a_shared_one() {
    let pools = [pool("a", &["198.51.100.8/29"], true, "all()")];
    let o = assign(
        &pools,
        &[
            svc("young", 9, json!({}), &["198.51.100.8"], json!({})),
            svc("old", 1, json!({}), &["198.51.100.8"], json!({})),
            svc("lab", 2, json!({}), &["192.0.2.5"], json!({})),
        ],
    );
    assert_eq!(to_of(&o, "old"), None);
    assert_eq!(to_of(&o, "lab"), Some(vec![ip("198.51.100.9")]));
    assert_eq!(to_of(&o, "young"), Some(vec![ip("198.51.100.10")]));
}

#[test]
fn selectors_annotations_auto_assign_and_families_choose_the_pool() {
    let pools = [
        pool("internet", &["203.0.113.0/31"], false, "all()"),
        pool(
            "team-a",
            &["198.51.100.0/31", "fd00:1b::/127"],
            true,
            "team == 'a'",
        ),
        pool("z-rest", &["192.0.2.0/31"], true, "all()"),
    ];
    let o = assign(
        &pools,
        &[
            svc("plain", 1, json!({}), &[], json!({})),
            svc(
                "a",
                2,
                json!({"ipFamilies": ["IPv4", "IPv6"]}),
                &[],
                json!({"labels": {"team": "a"}}),
            ),
            svc(
                "public",
                3,
                json!({}),
                &[],
                json!({"annotations": {POOL_ANNOTATION: "internet"}}),
            ),
            svc(
                "nowhere",
                4,
                json!({}),
                &[],
                json!({"annotations": {POOL_ANNOTATION: "nope"}}),
            ),
        ],
    );
    assert_eq!(to_of(&o, "plain"), Some(vec![ip("192.0.2.0")]));
    assert_eq!(
        to_of(&o, "a"),
        Some(vec![ip("198.51.100.0"), ip("fd00:1b::")])
    );
    assert_eq!(to_of(&o, "public"), Some(vec![ip("203.0.113.0")]));
    assert_eq!(to_of(&o, "nowhere"), None);
    assert_eq!(
        o.problems,
        ["default/nowhere: no LoadBalancerIPPool may give it an address"]
    );
}

#[test]
fn a_type_change_gives_back_and_other_classes_are_left_alone() {
    let pools = [pool("a", &["198.51.100.0/30"], true, "all()")];
    let o = assign(
        &pools,
        &[
            svc(
                "was-lb",
                1,
                json!({"type": "ClusterIP"}),
                &["198.51.100.0"],
                json!({}),
            ),
            svc(
                "other",
                2,
                json!({"loadBalancerClass": "example.com/lb"}),
                &["198.51.100.1"],
                json!({}),
            ),
            svc(
                "ours",
                3,
                json!({"loadBalancerClass": CLASS}),
                &[],
                json!({}),
            ),
            svc("full", 4, json!({}), &[], json!({})),
            svc("fuller", 5, json!({}), &[], json!({})),
        ],
    );
    assert_eq!(to_of(&o, "was-lb"), Some(vec![]));
    assert_eq!(to_of(&o, "other"), None);
    // 198.51.100.1 is another implementation's: never given; .0 only
    // once given back (the next pass).
    assert_eq!(to_of(&o, "ours"), Some(vec![ip("198.51.100.2")]));
    assert_eq!(to_of(&o, "full"), Some(vec![ip("198.51.100.3")]));
    assert_eq!(to_of(&o, "fuller"), None);
    let o = assign(
        &pools,
        &[
            svc(
                "x",
                1,
                json!({}),
                &["198.51.100.0", "198.51.100.1"],
                json!({}),
            ),
            svc(
                "y",
                2,
                json!({}),
                &["198.51.100.2", "198.51.100.3"],
                json!({}),
            ),
            svc("z", 3, json!({}), &[], json!({})),
        ],
    );
    assert_eq!(
        o.problems,
        ["default/z: its LoadBalancerIPPools have no free IPv4 address"]
    );
}

#[tokio::test]
async fn a_pass_writes_the_status_and_without_pools_writes_nothing() {
    let s = tartan_api::store::connect("memory", None).await.unwrap();
    let mut one = svc("web", 1, json!({"clusterIP": "10.96.0.10"}), &[], json!({}));
    one.metadata.resource_version = None;
    one.metadata.creation_timestamp = None;
    one.status = None;
    s.create_typed(&one).await.unwrap();
    assert_eq!(super::pass(&*s).await.unwrap(), Default::default());
    s.create_typed(&pool("a", &["198.51.100.0/30"], true, "all()"))
        .await
        .unwrap();
    let r = super::pass(&*s).await.unwrap();
    assert_eq!(r.assigned, 1);
    let got: Service = s.get_typed(Some("default"), "web").await.unwrap();
    assert_eq!(ingress(&got), [ip("198.51.100.0")]);
    assert_eq!(super::pass(&*s).await.unwrap().assigned, 0);
    s.delete_typed::<LoadBalancerIpPool>(None, "a", None)
        .await
        .unwrap();
    s.create_typed(&pool("b", &["198.51.100.4/30"], true, "all()"))
        .await
        .unwrap();
    let r = super::pass(&*s).await.unwrap();
    assert_eq!((r.assigned, r.released), (1, 1));
    let got: Service = s.get_typed(Some("default"), "web").await.unwrap();
    assert_eq!(ingress(&got), [ip("198.51.100.4")]);
}
