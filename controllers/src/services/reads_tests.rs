//! What a Service write reads, through a store that records every call
//! (`tartan_api::store::recording`): completing and writing Services reads
//! them by name and the three allocation records, never a listing of every
//! Service, however many are stored.

use serde_json::json;
use tartan_api::Kind;
use tartan_api::store::recording::Recording;

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
