//! PATCH at the HTTP level: each media type changes the object, bumps
//! its resourceVersion (and its generation when the spec changes),
//! records the writer in managedFields and reaches watchers; a no-op
//! writes nothing; a stale resourceVersion in a patch is a 409; a
//! strategic merge patch of a custom resource and an unknown media type
//! are 415; a broken patch is refused without a write.

mod common;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, WatchEvent, WatchParams};
use kube::core::DynamicObject;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_apiserver::ApiServer;

/// One request: (status, JSON body).
async fn call(url: &str, method: &str, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let headers = [
        ("User-Agent", "patcher/1.0"),
        ("Content-Type", content_type),
    ];
    let (code, out) = common::request(url, method, path, &headers, body).await;
    (code, common::body_json(&out))
}

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

const POOL: &str = "/apis/tartan.dev/v1/ippools/p";

#[tokio::test]
async fn patches_change_version_owner_and_watchers() {
    let r = ApiServer::new().start().await.unwrap();
    let pool = json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},
                      "spec":{"cidr":"10.0.0.0/16","blockSize":26}});
    let (code, created) = call(
        &r.url,
        "POST",
        "/apis/tartan.dev/v1/ippools",
        "application/json",
        &pool.to_string(),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(created["metadata"]["creationTimestamp"].is_string());
    assert_eq!(
        created["metadata"]["managedFields"][0]["manager"],
        "patcher"
    );

    let api: Api<DynamicObject> = Api::all_with(r.client(), &Kind::IpPool.api_resource());
    let mut events = api
        .watch(&WatchParams::default(), &rv(&created).to_string())
        .await
        .unwrap()
        .boxed();

    // Merge patch: the spec changes, so does the generation.
    let (code, merged) = call(
        &r.url,
        "PATCH",
        &format!("{POOL}?fieldManager=merger"),
        "application/merge-patch+json",
        r#"{"spec":{"blockSize":27}}"#,
    )
    .await;
    assert_eq!(code, 200, "{merged}");
    assert_eq!(merged["spec"]["blockSize"], 27);
    assert!(rv(&merged) > rv(&created));
    assert_eq!(merged["metadata"]["generation"], 2);
    let managers: Vec<&str> = merged["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert_eq!(managers, ["patcher", "merger"]);
    assert_eq!(
        merged["metadata"]["managedFields"][1]["fieldsV1"],
        json!({"f:spec":{"f:blockSize":{}}})
    );

    // Watchers are told.
    let ev = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .expect("a watch event within 10 s")
        .unwrap()
        .unwrap();
    let WatchEvent::Modified(o) = ev else {
        panic!("expected MODIFIED, got {ev:?}");
    };
    assert_eq!(o.data["spec"]["blockSize"], 27);

    // JSON patch on labels: a new version, the same generation.
    let (code, labelled) = call(&r.url, "PATCH", POOL, "application/json-patch+json",
        r#"[{"op":"add","path":"/metadata/labels","value":{"a":"b"}},{"op":"test","path":"/spec/blockSize","value":27}]"#).await;
    assert_eq!(code, 200, "{labelled}");
    assert_eq!(labelled["metadata"]["labels"]["a"], "b");
    assert_eq!(labelled["metadata"]["generation"], 2);
    assert!(rv(&labelled) > rv(&merged));

    // A no-op writes nothing.
    let (code, same) = call(
        &r.url,
        "PATCH",
        POOL,
        "application/merge-patch+json",
        r#"{"spec":{"blockSize":27}}"#,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(rv(&same), rv(&labelled));

    // A failing JSON patch test, a stale resourceVersion, the wrong types.
    let (code, st) = call(&r.url, "PATCH", POOL, "application/json-patch+json",
        r#"[{"op":"replace","path":"/spec/blockSize","value":30},{"op":"test","path":"/spec/cidr","value":"x"}]"#).await;
    assert_eq!(code, 422, "{st}");
    let (code, st) = call(
        &r.url,
        "PATCH",
        POOL,
        "application/merge-patch+json",
        r#"{"metadata":{"resourceVersion":"1"},"spec":{"blockSize":30}}"#,
    )
    .await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (409, Some("Conflict")),
        "{st}"
    );
    let (code, st) = call(
        &r.url,
        "PATCH",
        POOL,
        "application/strategic-merge-patch+json",
        r#"{"spec":{"blockSize":30}}"#,
    )
    .await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{st}"
    );
    let (code, st) = call(&r.url, "PATCH", POOL, "text/plain", "x").await;
    assert_eq!(code, 415, "{st}");
    let (code, st) = call(
        &r.url,
        "PATCH",
        POOL,
        "application/merge-patch+json",
        "{not json",
    )
    .await;
    assert_eq!(
        (code, st["reason"].as_str()),
        (400, Some("BadRequest")),
        "{st}"
    );
    let (code, _) = call(&r.url, "GET", POOL, "application/json", "").await;
    assert_eq!(code, 200);
    let (_, now) = call(&r.url, "GET", POOL, "application/json", "").await;
    assert_eq!(now["spec"]["blockSize"], 27, "nothing half-applied");
    assert_eq!(rv(&now), rv(&labelled));

    // Patching what is not there: NotFound in the API server's words.
    let (code, st) = call(
        &r.url,
        "PATCH",
        "/apis/tartan.dev/v1/ippools/nope",
        "application/merge-patch+json",
        "{}",
    )
    .await;
    assert_eq!(code, 404);
    assert_eq!(st["message"], "ippools.tartan.dev \"nope\" not found");
}

#[tokio::test]
async fn strategic_merge_patches_built_in_kinds_and_apply_creates() {
    let r = ApiServer::new().start().await.unwrap();
    let cm = "/api/v1/namespaces/default/configmaps/c";
    let apply =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"}}"#;
    let (code, st) = call(&r.url, "PATCH", cm, "application/apply-patch+yaml", apply).await;
    assert_eq!(code, 422, "apply needs a field manager: {st}");
    let (code, created) = call(
        &r.url,
        "PATCH",
        &format!("{cm}?fieldManager=me"),
        "application/apply-patch+yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: \"1\"\n",
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert!(
        created["metadata"].get("generation").is_none(),
        "ConfigMaps have none"
    );
    let (code, patched) = call(
        &r.url,
        "PATCH",
        cm,
        "application/strategic-merge-patch+json",
        r#"{"data":{"a":null,"b":"2"},"metadata":{"finalizers":["x"]}}"#,
    )
    .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["data"], json!({"b":"2"}));
    assert_eq!(patched["metadata"]["finalizers"], json!(["x"]));
    // The applier's field went to the patcher's delete: a re-apply of it
    // conflicts with nobody (nobody owns it) and brings it back.
    let (code, again) = call(
        &r.url,
        "PATCH",
        &format!("{cm}?fieldManager=me"),
        "application/apply-patch+yaml",
        apply,
    )
    .await;
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["data"], json!({"a":"1","b":"2"}));
    // Another applier's different value conflicts with "me".
    let (code, st) = call(
        &r.url,
        "PATCH",
        &format!("{cm}?fieldManager=you"),
        "application/apply-patch+yaml",
        &apply.replace("\"1\"", "\"9\""),
    )
    .await;
    assert_eq!(code, 409, "{st}");
    assert_eq!(
        st["message"],
        "Apply failed with 1 conflict: conflict with \"me\": .data.a"
    );
    assert_eq!(st["details"]["causes"][0]["type"], "FieldManagerConflict");
}
