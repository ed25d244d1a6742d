//! Tests of [`complete`] against a store: files completed and refused
//! whole, concurrent writers, taken values refused with the holder
//! named, releases on delete and on type change, a leaked claim repaired.

use std::sync::Arc;

use serde_json::{Value, json};
use tartan_api::store::{Datastore, DynamicObject, ObjectKey};

use super::*;
use tartan_api::store::recording::Recording;

pub(super) fn ranges() -> Ranges {
    Ranges::new("10.96.0.0/16".parse().unwrap())
}

pub(super) fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

/// The Service `default/name` of `type_`, with `spec` fields added.
pub(super) fn svc(name: &str, type_: &str, extra: Value) -> DynamicObject {
    let mut spec = json!({"type": type_, "ports": [{"port": 80}]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    obj(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
}

/// What `tartan-lab ctl apply` does: complete, write, then release.
pub(super) async fn apply(
    store: &dyn Datastore,
    objects: Vec<DynamicObject>,
) -> Result<Vec<DynamicObject>, Vec<String>> {
    apply_on(store, &ranges(), objects).await
}

/// [`apply`] with `ranges`.
pub(super) async fn apply_on(
    store: &dyn Datastore,
    ranges: &Ranges,
    objects: Vec<DynamicObject>,
) -> Result<Vec<DynamicObject>, Vec<String>> {
    let done = complete(store, ranges, objects).await.unwrap()?;
    let mut out = vec![];
    for mut o in done.objects {
        let key = ObjectKey::of(&o).unwrap();
        let w = match store.get(&key).await {
            Ok(old) => {
                o.metadata.resource_version = old.metadata.resource_version;
                store.update(o).await
            }
            Err(_) => store.create(o).await,
        };
        out.push(w.unwrap());
    }
    release(store, ranges, &done.release).await.unwrap();
    Ok(out)
}

fn ip(o: &DynamicObject) -> String {
    o.data["spec"]["clusterIP"].as_str().unwrap().to_string()
}

fn ports(o: &DynamicObject) -> Vec<i64> {
    o.data["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["nodePort"].as_i64())
        .collect()
}

async fn memory() -> Arc<dyn Datastore> {
    tartan_api::store::connect("memory", None).await.unwrap()
}

#[tokio::test]
async fn files_complete_against_the_store_and_refuse_whole() {
    let store = memory().await;
    let pool = obj(json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool",
        "metadata": {"name": "p"}, "spec": {"cidr": "10.1.0.0/16"}}));
    let np = |n: u16| json!({"ports": [{"port": 80, "nodePort": n}]});
    let out = complete(
        &*store,
        &ranges(),
        vec![pool.clone(), svc("a", "NodePort", np(30080))],
    )
    .await
    .unwrap()
    .unwrap()
    .objects;
    assert_eq!(
        serde_json::to_value(&out[0]).unwrap(),
        serde_json::to_value(&pool).unwrap(),
        "other kinds pass untouched"
    );
    assert_eq!(out[1].data["spec"]["clusterIP"], "10.96.0.2");
    store.create(out[1].clone()).await.unwrap();
    let refused = complete(
        &*store,
        &ranges(),
        vec![
            svc("b", "NodePort", json!({})),
            svc("c", "NodePort", np(30080)),
        ],
    )
    .await
    .unwrap()
    .unwrap_err();
    assert_eq!(
        refused,
        vec![
            "Service default/c: spec.ports[0].nodePort: 30080 is already allocated to Service default/a"
        ]
    );
    // Nothing of the refused file was claimed: b gets what it would have.
    let b = apply(&*store, vec![svc("b", "NodePort", json!({}))])
        .await
        .unwrap();
    assert_eq!((ip(&b[0]), ports(&b[0])), ("10.96.0.3".into(), vec![30000]));
}

#[tokio::test]
async fn concurrent_writers_never_get_the_same_address() {
    // Every call yields, so the writers interleave between their reads
    // and their compare-and-swap writes.
    let store = Arc::new(Recording::new(true));
    let writers = (0..6).map(|w| {
        let store = store.clone();
        async move {
            let mut got = vec![];
            for i in 0..5 {
                let s = svc(&format!("w{w}-{i}"), "NodePort", json!({}));
                got.extend(apply(&*store, vec![s]).await.unwrap());
            }
            got
        }
    });
    let all: Vec<DynamicObject> = futures::future::join_all(writers)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(all.len(), 30);
    let ips: std::collections::BTreeSet<String> = all.iter().map(ip).collect();
    let nps: std::collections::BTreeSet<i64> = all.iter().flat_map(ports).collect();
    assert_eq!(ips.len(), 30, "a ClusterIP handed out twice: {ips:?}");
    assert_eq!(nps.len(), 30, "a NodePort handed out twice: {nps:?}");
    assert!(store.conflicts() > 0, "the writers never raced");
    // The records hold exactly what the Services hold.
    assert_eq!(
        repair(&*store, &ranges()).await.unwrap(),
        Repaired::default()
    );
}

#[tokio::test]
async fn a_taken_or_out_of_range_value_is_refused() {
    let store = memory().await;
    apply(
        &*store,
        vec![svc("a", "LoadBalancer", json!({"clusterIP": "10.96.0.9"}))],
    )
    .await
    .unwrap();
    let e = apply(
        &*store,
        vec![svc("b", "ClusterIP", json!({"clusterIP": "10.96.0.9"}))],
    )
    .await
    .unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/b: spec.clusterIP: 10.96.0.9 is already allocated to Service default/a"
        ]
    );
    let e = apply(
        &*store,
        vec![svc(
            "c",
            "NodePort",
            json!({"ports": [{"port": 80, "nodePort": 30000}]}),
        )],
    )
    .await
    .unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/c: spec.ports[0].nodePort: 30000 is already allocated to Service default/a"
        ]
    );
    let e = apply(
        &*store,
        vec![svc(
            "d",
            "NodePort",
            json!({"ports": [{"port": 80, "nodePort": 80}]}),
        )],
    )
    .await
    .unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/d: spec.ports[0].nodePort: 80 is not in the NodePort range 30000-32767"
        ]
    );
    // Applied again, a keeps all it holds.
    let again = apply(&*store, vec![svc("a", "LoadBalancer", json!({}))])
        .await
        .unwrap();
    assert_eq!(
        (ip(&again[0]), ports(&again[0])),
        ("10.96.0.9".into(), vec![30000])
    );
}

#[tokio::test]
async fn delete_and_type_change_release() {
    let store = memory().await;
    let np = json!({"clusterIP": "10.96.0.7", "ports": [{"port": 80, "nodePort": 30080}]});
    apply(&*store, vec![svc("a", "NodePort", np)])
        .await
        .unwrap();
    // NodePort -> ClusterIP gives the port back, keeps the address.
    let back = apply(&*store, vec![svc("a", "ClusterIP", json!({}))])
        .await
        .unwrap();
    assert_eq!(
        (ip(&back[0]), ports(&back[0])),
        ("10.96.0.7".into(), vec![])
    );
    let b = json!({"ports": [{"port": 80, "nodePort": 30080}]});
    apply(&*store, vec![svc("b", "NodePort", b)]).await.unwrap();
    // Deleted: its address is free again.
    let a = store
        .get(&ObjectKey::new(
            tartan_api::Kind::Service,
            Some("default"),
            "a",
        ))
        .await
        .unwrap();
    let a: k8s_openapi::api::core::v1::Service = tartan_api::store::typed::from_dynamic(a).unwrap();
    store
        .delete(
            &ObjectKey::new(tartan_api::Kind::Service, Some("default"), "a"),
            None,
        )
        .await
        .unwrap();
    release(&*store, &ranges(), &Release::of(&ranges(), &[a]))
        .await
        .unwrap();
    let c = apply(
        &*store,
        vec![svc("c", "ClusterIP", json!({"clusterIP": "10.96.0.7"}))],
    )
    .await
    .unwrap();
    assert_eq!(ip(&c[0]), "10.96.0.7");
    assert_eq!(
        repair(&*store, &ranges()).await.unwrap(),
        Repaired::default()
    );
}

#[tokio::test]
async fn a_claim_left_by_a_crash_is_repaired() {
    let store = memory().await;
    apply(&*store, vec![svc("a", "ClusterIP", json!({}))])
        .await
        .unwrap();
    // Claimed, and then the writer died before writing the Service.
    let lost = complete(&*store, &ranges(), vec![svc("lost", "NodePort", json!({}))])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ip(&lost.objects[0]), "10.96.0.3");
    // Asked for by another, the claim is found held by no Service and freed.
    let spec = json!({"clusterIP": "10.96.0.3", "ports": [{"port": 80, "nodePort": 30000}]});
    let b = apply(&*store, vec![svc("b", "NodePort", spec)])
        .await
        .unwrap();
    assert_eq!((ip(&b[0]), ports(&b[0])), ("10.96.0.3".into(), vec![30000]));
    // A repair on its own frees a leak too.
    complete(
        &*store,
        &ranges(),
        vec![svc("lost2", "ClusterIP", json!({}))],
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        repair(&*store, &ranges()).await.unwrap(),
        Repaired {
            freed: 1,
            claimed: 0
        }
    );
}

#[tokio::test]
async fn a_change_to_external_name_frees_the_cluster_ip_the_file_still_names() {
    let store = memory().await;
    let a = apply(&*store, vec![svc("a", "ClusterIP", json!({}))])
        .await
        .unwrap();
    let x = ip(&a[0]);
    // The same file, now an alias, with the address it was given still in
    // it: a leftover (unchanged), dropped as the API server does.
    let alias = |extra: Value| {
        let mut e = json!({"externalName": "db.example.com", "clusterIP": x});
        e.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        svc("a", "ExternalName", e)
    };
    let out = apply(&*store, vec![alias(json!({}))]).await.unwrap();
    assert!(out[0].data["spec"].get("clusterIP").is_none(), "{out:?}");
    assert!(out[0].data["spec"].get("clusterIPs").is_none(), "{out:?}");
    // Freed: another Service may ask for it.
    let b = apply(
        &*store,
        vec![svc("b", "ClusterIP", json!({"clusterIP": x}))],
    )
    .await
    .unwrap();
    assert_eq!(ip(&b[0]), x);
}

#[tokio::test]
async fn a_change_to_cluster_ip_frees_the_node_ports_the_file_still_names() {
    let store = memory().await;
    let a = apply(&*store, vec![svc("a", "NodePort", json!({}))])
        .await
        .unwrap();
    let n = ports(&a[0])[0];
    let back = svc(
        "a",
        "ClusterIP",
        json!({"ports": [{"port": 80, "nodePort": n}]}),
    );
    let out = apply(&*store, vec![back]).await.unwrap();
    assert!(ports(&out[0]).is_empty(), "{out:?}");
    let b = apply(
        &*store,
        vec![svc(
            "b",
            "NodePort",
            json!({"ports": [{"port": 80, "nodePort": n}]}),
        )],
    )
    .await
    .unwrap();
    assert_eq!(ports(&b[0]), [n]);
}
