//! Tests of [`complete`] on a dual-stack cluster against a store: the
//! IPv6 ClusterIPs claimed in their own record, an upgrade's second
//! address claimed, a downgrade's and a delete's freed, and a repair
//! that finds nothing to do after them.

use serde_json::json;
use tartan_api::Kind;
use tartan_api::store::typed::from_dynamic;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey};

use super::complete_tests::{apply_on, obj, svc};
use super::*;

fn dual() -> Ranges {
    Ranges::dual_stack(
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    )
}

/// `tartan-lab ctl apply` on the dual-stack ranges.
async fn apply(store: &dyn Datastore, objects: Vec<DynamicObject>) -> Vec<DynamicObject> {
    apply_on(store, &dual(), objects).await.unwrap()
}

fn cluster_ips(o: &DynamicObject) -> Vec<String> {
    o.data["spec"]["clusterIPs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The IPv6 record's bitmap text.
async fn ipv6_record(store: &dyn Datastore) -> String {
    let o = store
        .get(&ObjectKey::new(
            Kind::RangeAllocation,
            None,
            "service-cluster-ips-ipv6",
        ))
        .await
        .unwrap();
    assert_eq!(o.data["spec"]["range"], "fd00:10:96::/112");
    o.data["spec"]["data"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn ipv6_cluster_ips_are_claimed_upgraded_downgraded_and_freed() {
    let store = tartan_api::store::connect("memory", None).await.unwrap();
    let a = apply(&*store, vec![svc("a", "ClusterIP", json!({}))]).await;
    assert_eq!(cluster_ips(&a[0]), vec!["10.96.0.2"]);
    // Upgraded: the IPv6 address is claimed (offset 1: bit 1).
    let up = json!({"ipFamilyPolicy": "RequireDualStack"});
    let a = apply(&*store, vec![svc("a", "ClusterIP", up.clone())]).await;
    assert_eq!(cluster_ips(&a[0]), vec!["10.96.0.2", "fd00:10:96::1"]);
    assert_eq!(ipv6_record(&*store).await, "02");
    // Another Service gets the next one.
    let b = apply(&*store, vec![svc("b", "NodePort", up.clone())]).await;
    assert_eq!(cluster_ips(&b[0]), vec!["10.96.0.3", "fd00:10:96::2"]);
    assert_eq!(ipv6_record(&*store).await, "06");
    // Downgraded: a's IPv6 address is free again.
    let down = json!({"ipFamilyPolicy": "SingleStack"});
    let a = apply(&*store, vec![svc("a", "ClusterIP", down)]).await;
    assert_eq!(cluster_ips(&a[0]), vec!["10.96.0.2"]);
    assert_eq!(ipv6_record(&*store).await, "04");
    // Deleted: b's too.
    let key = ObjectKey::new(Kind::Service, Some("default"), "b");
    let stored: k8s_openapi::api::core::v1::Service =
        from_dynamic(store.get(&key).await.unwrap()).unwrap();
    store.delete(&key, None).await.unwrap();
    release(&*store, &dual(), &Release::of(&dual(), &[stored]))
        .await
        .unwrap();
    assert_eq!(ipv6_record(&*store).await, "");
    assert_eq!(repair(&*store, &dual()).await.unwrap(), Repaired::default());
    // A file of other objects passes through untouched.
    let pool = obj(json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool",
        "metadata": {"name": "p"}, "spec": {"cidr": "fd00:1::/64"}}));
    let done = complete(&*store, &dual(), vec![pool.clone()])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::to_value(&done.objects).unwrap(),
        serde_json::to_value(vec![pool]).unwrap()
    );
}

#[tokio::test]
async fn a_single_stack_cluster_refuses_require_dual_stack_as_before() {
    let store = tartan_api::store::connect("memory", None).await.unwrap();
    let up = json!({"ipFamilyPolicy": "RequireDualStack"});
    let e = complete(
        &*store,
        &complete_tests::ranges(),
        vec![svc("a", "ClusterIP", up)],
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/a: spec.ipFamilyPolicy: RequireDualStack: this cluster is not configured for dual-stack services"
        ]
    );
}

/// Each record's bitmap text, by name (`""` when absent or empty).
async fn record_texts(store: &dyn Datastore) -> Vec<String> {
    let mut out = vec![];
    for name in records::NAMES {
        let key = ObjectKey::new(Kind::RangeAllocation, None, name);
        out.push(match store.get(&key).await {
            Ok(o) => o.data["spec"]["data"].as_str().unwrap_or("").to_string(),
            Err(_) => String::new(),
        });
    }
    out
}

#[tokio::test]
async fn a_conflict_on_the_ipv6_record_undoes_the_ipv4_claims() {
    let store = tartan_api::store::connect("memory", None).await.unwrap();
    let both = json!({"ipFamilyPolicy": "RequireDualStack"});
    apply(&*store, vec![svc("a", "NodePort", both)]).await;
    let stored = records::read(&*store, &dual()).await.unwrap();
    assert!(stored.iter().all(|s| s.bits.is_some()), "{stored:?}");
    // Another writer claims in the IPv6 record after this one read it.
    let v6 = json!({"ipFamilies": ["IPv6"]});
    let b = apply(&*store, vec![svc("b", "ClusterIP", v6)]).await;
    assert_eq!(cluster_ips(&b[0]), vec!["fd00:10:96::2"]);
    let before = record_texts(&*store).await;
    assert_eq!(before[2], "06");
    // This writer claims 10.96.0.10 and fd00:10:96::a: the IPv4 record
    // is written first, then the IPv6 one conflicts.
    let mut new: Vec<_> = stored.iter().map(|s| s.bits.clone().unwrap()).collect();
    new[0].put(10, true);
    new[2].put(10, true);
    let refs: Vec<_> = new.iter().collect();
    let done = records::write_claims(&*store, &dual(), &stored, &refs)
        .await
        .unwrap();
    assert!(!done, "the IPv6 record's write should have conflicted");
    // The IPv4 claim is undone; the other writer's IPv6 claim stays.
    assert_eq!(record_texts(&*store).await, before);
    assert_eq!(repair(&*store, &dual()).await.unwrap(), Repaired::default());
}

#[tokio::test]
async fn a_leaked_ipv6_claim_is_repaired() {
    let store = tartan_api::store::connect("memory", None).await.unwrap();
    apply(&*store, vec![svc("a", "ClusterIP", json!({}))]).await;
    // Claimed, and then the writer died before writing the Service.
    let v6 = json!({"ipFamilies": ["IPv6"]});
    let lost = complete(&*store, &dual(), vec![svc("lost", "ClusterIP", v6)])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cluster_ips(&lost.objects[0]), vec!["fd00:10:96::1"]);
    assert_eq!(ipv6_record(&*store).await, "02");
    assert_eq!(
        repair(&*store, &dual()).await.unwrap(),
        Repaired {
            freed: 1,
            claimed: 0
        }
    );
    assert_eq!(ipv6_record(&*store).await, "");
    // The address is handed out again.
    let v6 = json!({"ipFamilies": ["IPv6"]});
    let c = apply(&*store, vec![svc("c", "ClusterIP", v6)]).await;
    assert_eq!(cluster_ips(&c[0]), vec!["fd00:10:96::1"]);
}

#[tokio::test]
async fn a_changed_primary_family_is_refused_and_claims_nothing() {
    let store = tartan_api::store::connect("memory", None).await.unwrap();
    apply(&*store, vec![svc("a", "ClusterIP", json!({}))]).await;
    let before = record_texts(&*store).await;
    let swapped = json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv6", "IPv4"]});
    let e = complete(&*store, &dual(), vec![svc("a", "ClusterIP", swapped)])
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/a: spec.ipFamilies[0]: IPv6: may not change once set",
            "Service default/a: spec.clusterIPs[0]: 10.96.0.2: expected an IPv6 value as indicated by `ipFamilies[0]`",
        ]
    );
    assert_eq!(record_texts(&*store).await, before);
    assert_eq!(repair(&*store, &dual()).await.unwrap(), Repaired::default());
}
