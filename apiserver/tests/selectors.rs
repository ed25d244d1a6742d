//! `labelSelector` on a list, in the API server's syntax (equality, set
//! and existence requirements), and a malformed one refused 400.

mod common;

use serde_json::{Value, json};
use tartan_apiserver::ApiServer;

const MAPS: &str = "/api/v1/namespaces/default/configmaps";

async fn call(url: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let headers = [
        ("User-Agent", "tester/1.0"),
        ("Content-Type", "application/json"),
    ];
    let (code, out) = common::request(url, method, path, &headers, &body.to_string()).await;
    (code, common::body_json(&out))
}

#[tokio::test]
async fn lists_pick_by_every_kind_of_label_requirement() {
    let r = ApiServer::new().start().await.unwrap();
    for (name, labels) in [
        ("web", json!({"app": "web", "tier": "front"})),
        ("db", json!({"app": "db"})),
        ("plain", json!({})),
    ] {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels}});
        let (code, body) = call(&r.url, "POST", MAPS, &cm).await;
        assert_eq!(code, 201, "{body}");
    }
    for (selector, want) in [
        ("app%3Dweb", vec!["web"]),
        ("app!%3Dweb", vec!["db", "plain"]),
        ("!app", vec!["plain"]),
        ("app", vec!["db", "web"]),
        ("app%20in%20(web,db),!tier", vec!["db"]),
        ("app%20notin%20(web)", vec!["db", "plain"]),
    ] {
        let (code, list) = call(
            &r.url,
            "GET",
            &format!("{MAPS}?labelSelector={selector}"),
            &Value::Null,
        )
        .await;
        assert_eq!(code, 200, "{selector}: {list}");
        let names: Vec<&str> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, want, "{selector}");
    }
    let (code, s) = call(
        &r.url,
        "GET",
        &format!("{MAPS}?labelSelector=app%20in%20web"),
        &Value::Null,
    )
    .await;
    assert_eq!(code, 400, "{s}");
    assert_eq!(s["reason"], "BadRequest");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("unable to parse requirement"),
        "{s}"
    );
}
