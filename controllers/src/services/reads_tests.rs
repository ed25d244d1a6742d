//! What a Service write reads, through a store that records every call
//! (`tartan_api::store::recording`): completing and writing Services reads
//! them by name and the three allocation records, never a listing of every
//! Service, however many are stored.

use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_api::Kind;
use tartan_api::store::recording::Recording;
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, ObjectKey};

use super::complete_tests::{apply, obj, svc};
use super::*;

#[tokio::test]
async fn a_service_write_lists_no_services() {
    let store = Recording::new(false);
    for i in 0..200 {
        let t = if i % 2 == 0 { "ClusterIP" } else { "NodePort" };
        apply(&store, vec![svc(&format!("s{i}"), t, json!({}))])
            .await
            .unwrap();
    }
    store.take();
    // Two new Services, one written again as another type, with a slice.
    let slice = obj(
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "n1-a", "namespace": "default",
            "labels": {"kubernetes.io/service-name": "n1"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.1.0.1"]}]}),
    );
    let written = apply(
        &store,
        vec![
            svc("n1", "ClusterIP", json!({})),
            slice,
            svc("n2", "NodePort", json!({"selector": {"app": "x"}})),
            svc("s1", "ClusterIP", json!({})),
        ],
    )
    .await
    .unwrap();
    assert_eq!(written[0].data["spec"]["clusterIP"], "10.96.0.202");
    let keys: Vec<(String, String)> = ["n1", "n2", "s1"]
        .iter()
        .map(|n| ("default".to_string(), n.to_string()))
        .collect();
    sync_slices_of(&store, &keys).await.unwrap();
    let calls = store.take();
    for c in &calls {
        assert!(
            c.call != "list" || !matches!(c.kind, Kind::Service | Kind::EndpointSlice),
            "listed every {}: {calls:#?}",
            c.kind
        );
        assert!(
            c.names.len() <= 1,
            "read {} objects at once: {c:?}",
            c.names.len()
        );
    }
    let service_gets = calls
        .iter()
        .filter(|c| c.call == "get" && c.kind == Kind::Service)
        .count();
    // Its stored self before the claim, then once more before the write
    // (this test's apply) and once for the slices.
    assert_eq!(service_gets, 3 * 3, "{calls:#?}");
    // n2 selects: its namespace's Pods (none here) are read, and its slice written.
    assert!(
        calls
            .iter()
            .any(|c| c.call == "create" && c.kind == Kind::EndpointSlice),
        "{calls:#?}"
    );
}

#[tokio::test]
async fn slices_take_their_zones_from_the_nodes_each_read_once() {
    let store = Recording::new(false);
    for (node, zone) in [("n1", Some("a")), ("n2", Some("b")), ("n3", None)] {
        let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}});
        if let Some(z) = zone {
            n["metadata"]["labels"] = json!({"topology.kubernetes.io/zone": z});
        }
        store.create(obj(n)).await.unwrap();
    }
    // Two pods on n1, one each on n2, n3 and a node with no Node object.
    for (i, node) in ["n1", "n1", "n2", "n3", "gone"].iter().enumerate() {
        store
            .create(obj(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default",
                             "labels": {"app": "web"}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
                "status": {"podIP": format!("10.244.0.{}", i + 1),
                           "conditions": [{"type": "Ready", "status": "True"}]}})))
            .await
            .unwrap();
    }
    apply(
        &store,
        vec![svc(
            "web",
            "ClusterIP",
            json!({"selector": {"app": "web"}, "trafficDistribution": "PreferClose"}),
        )],
    )
    .await
    .unwrap();
    store.take();
    let keys = vec![("default".to_string(), "web".to_string())];
    sync_slices_of(&store, &keys).await.unwrap();
    let calls = store.take();
    let node_reads: Vec<&str> = calls
        .iter()
        .filter(|c| c.kind == Kind::Node)
        .map(|c| {
            assert_eq!(c.call, "get", "{calls:#?}");
            c.names[0].as_str()
        })
        .collect();
    assert_eq!(node_reads.len(), 4, "{calls:#?}");
    let want = [
        (Some("a".to_string()), json!({"forZones": [{"name": "a"}]})),
        (Some("a".to_string()), json!({"forZones": [{"name": "a"}]})),
        (Some("b".to_string()), json!({"forZones": [{"name": "b"}]})),
        (None, serde_json::Value::Null),
        (None, serde_json::Value::Null),
    ];
    let slices = slices_of(&store).await;
    assert_eq!(slices.len(), 1);
    assert_eq!(zones_and_hints(&slices[0]), want);
    // The full sync lists the Nodes once and writes the same.
    let key = ObjectKey::new(
        Kind::EndpointSlice,
        Some("default"),
        slices[0].metadata.name.as_deref().unwrap(),
    );
    store.delete(&key, None).await.unwrap();
    store.take();
    sync_slices(&store).await.unwrap();
    let node_reads: Vec<&'static str> = store
        .take()
        .iter()
        .filter(|c| c.kind == Kind::Node)
        .map(|c| c.call)
        .collect();
    assert_eq!(node_reads, ["list"]);
    let slices = slices_of(&store).await;
    assert_eq!(slices.len(), 1);
    assert_eq!(zones_and_hints(&slices[0]), want);
}

async fn slices_of(store: &Recording) -> Vec<EndpointSlice> {
    store.list_typed::<EndpointSlice>(None).await.unwrap().0
}

fn zones_and_hints(s: &EndpointSlice) -> Vec<(Option<String>, serde_json::Value)> {
    s.endpoints
        .iter()
        .map(|e| (e.zone.clone(), serde_json::to_value(&e.hints).unwrap()))
        .collect()
}
