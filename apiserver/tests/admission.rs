//! What the API server does to a write before it stores it, at the HTTP
//! level: the built-in kinds get their defaults and checks (refused 422
//! Invalid with a cause per problem, on create, update, patch and dry
//! run alike) while custom resources keep to their schema; a name is
//! generated from `generateName`; writes into a namespace that does not
//! exist are refused 404; a Namespace is created Active; PUT may leave
//! out the resourceVersion where the kind's strategy allows it; and
//! NetworkPolicies and EndpointSlices carry a generation.

mod common;

use serde_json::{Value, json};
use tartan_apiserver::ApiServer;

/// One JSON request: (status, JSON body).
async fn call(url: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let headers = [("User-Agent", "tester/1.0"), ("Content-Type", content_type)];
    let (code, out) = common::request(url, method, path, &headers, &body.to_string()).await;
    (code, common::body_json(&out))
}

const SERVICES: &str = "/api/v1/namespaces/default/services";

fn service(port: i64) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "web", "namespace": "default"},
           "spec": {"ports": [{"port": port, "targetPort": 8080}]}})
}

#[tokio::test]
async fn built_in_kinds_are_defaulted_and_checked_on_every_write() {
    let r = ApiServer::new().start().await.unwrap();
    // The words of Tartan's checks (`tartan_api::validate`).
    let port_0 = "spec.ports[0].port: 0 is not a port; allowed 1 to 65535";

    // Create, and a dry run of it: refused alike, nothing stored.
    for path in [SERVICES.to_string(), format!("{SERVICES}?dryRun=All")] {
        let (code, s) = call(&r.url, "POST", &path, &service(0)).await;
        assert_eq!(code, 422, "{path}: {s}");
        assert_eq!(s["reason"], "Invalid");
        assert_eq!(
            s["message"],
            format!("Service \"web\" is invalid: {port_0}")
        );
        assert_eq!(s["details"]["name"], "web");
        assert_eq!(s["details"]["kind"], "Service");
        assert_eq!(s["details"]["group"], "");
        assert_eq!(
            s["details"]["causes"],
            json!([{"reason": "FieldValueInvalid", "field": "spec.ports[0].port",
                    "message": "0 is not a port; allowed 1 to 65535"}])
        );
    }
    let (code, _) = call(&r.url, "GET", &format!("{SERVICES}/web"), &Value::Null).await;
    assert_eq!(code, 404, "nothing stored");

    // A good one is stored with the API server's defaults.
    let (code, created) = call(&r.url, "POST", SERVICES, &service(80)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["spec"]["type"], "ClusterIP");
    assert_eq!(created["spec"]["sessionAffinity"], "None");
    assert_eq!(created["spec"]["ports"][0]["protocol"], "TCP");
    assert_eq!(created["spec"]["ports"][0]["targetPort"], 8080);

    // Update and patch are checked too.
    let mut bad = service(0);
    bad["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"].clone();
    let (code, s) = call(&r.url, "PUT", &format!("{SERVICES}/web"), &bad).await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        format!("Service \"web\" is invalid: {port_0}")
    );
    let (code, s) = call(
        &r.url,
        "PATCH",
        &format!("{SERVICES}/web"),
        &json!({"spec": {"type": "Nonsense"}}),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(
        s["message"],
        "Service \"web\" is invalid: spec.type: \"Nonsense\" is not supported; allowed \"ClusterIP\", \"NodePort\", \"LoadBalancer\", \"ExternalName\""
    );
    assert_eq!(s["details"]["causes"][0]["field"], "spec.type");

    // A kind of a group is named with it; several problems in brackets.
    let (code, s) = call(
        &r.url,
        "POST",
        "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
        &json!({"metadata": {"name": "Bad_Name"},
                "spec": {"podSelector": {}, "policyTypes": ["Sideways"]}}),
    )
    .await;
    assert_eq!(code, 422, "{s}");
    let message = s["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "NetworkPolicy.networking.k8s.io \"Bad_Name\" is invalid: [metadata.name: "
        ),
        "{message}"
    );
    assert_eq!(s["details"]["group"], "networking.k8s.io");
    assert_eq!(s["details"]["kind"], "NetworkPolicy");
    assert!(s["details"]["causes"].as_array().unwrap().len() >= 2, "{s}");
}

#[tokio::test]
async fn custom_resources_keep_to_their_schema_only() {
    let r = ApiServer::new().start().await.unwrap();
    // Tartan's own checks would refuse this CIDR; a real server, which
    // checks a custom resource by its CRD's schema, stores it.
    let (code, created) = call(
        &r.url,
        "POST",
        "/apis/tartan.dev/v1/ippools",
        &json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": "p"},
                "spec": {"cidr": "10.0.0.0/99", "blockSize": 26}}),
    )
    .await;
    assert_eq!(code, 201, "{created}");
}

#[tokio::test]
async fn names_are_generated_or_required() {
    let r = ApiServer::new().start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let (code, created) = call(
            &r.url,
            "POST",
            path,
            &json!({"metadata": {"generateName": "settings-"}, "data": {"a": "b"}}),
        )
        .await;
        assert_eq!(code, 201, "{created}");
        let name = created["metadata"]["name"].as_str().unwrap().to_string();
        let suffix = name.strip_prefix("settings-").unwrap();
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_eq!(created["metadata"]["generateName"], "settings-");
        names.insert(name);
    }
    assert_eq!(names.len(), 3);

    // Neither name nor generateName: the API server's 422, for custom
    // resources too.
    for (path, kind, group) in [
        (path, "ConfigMap", ""),
        (
            "/apis/tartan.dev/v1/ippools",
            "IPPool.tartan.dev",
            "tartan.dev",
        ),
    ] {
        let (code, s) = call(&r.url, "POST", path, &json!({"metadata": {}})).await;
        assert_eq!(code, 422, "{s}");
        assert_eq!(
            s["message"],
            format!(
                "{kind} \"\" is invalid: metadata.name: Required value: name or generateName is required"
            )
        );
        assert_eq!(s["details"]["group"], group);
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    }
}

#[tokio::test]
async fn writes_need_their_namespace_and_namespaces_are_active() {
    let r = ApiServer::new().start().await.unwrap();
    let cm = json!({"metadata": {"name": "c"}, "data": {}});
    let in_web = "/api/v1/namespaces/web/configmaps";
    for path in [in_web.to_string(), format!("{in_web}?dryRun=All")] {
        let (code, s) = call(&r.url, "POST", &path, &cm).await;
        assert_eq!(code, 404, "{s}");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "namespaces \"web\" not found");
        assert_eq!(s["details"], json!({"name": "web", "kind": "namespaces"}));
    }
    // Custom resources alike, and a server-side apply that would create.
    let (code, s) = call(
        &r.url,
        "POST",
        "/apis/tartan.dev/v1/namespaces/web/networkpolicies",
        &json!({"metadata": {"name": "p"}, "spec": {"selector": "all()"}}),
    )
    .await;
    assert_eq!(code, 404, "{s}");
    let headers = [("Content-Type", "application/apply-patch+yaml")];
    let (code, _) = common::request(
        &r.url,
        "PATCH",
        &format!("{in_web}/c?fieldManager=m"),
        &headers,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
    )
    .await;
    assert_eq!(code, 404);

    // The system namespaces are there from the start.
    let (code, s) = call(
        &r.url,
        "POST",
        "/api/v1/namespaces/kube-system/configmaps",
        &cm,
    )
    .await;
    assert_eq!(code, 201, "{s}");

    let (code, ns) = call(
        &r.url,
        "POST",
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "web"}}),
    )
    .await;
    assert_eq!(code, 201, "{ns}");
    assert_eq!(ns["status"], json!({"phase": "Active"}));
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "web"
    );
    let (code, s) = call(&r.url, "POST", in_web, &cm).await;
    assert_eq!(code, 201, "{s}");
}

#[tokio::test]
async fn the_binarys_server_stores_the_system_namespaces() {
    let r = ApiServer::new()
        .with_system_namespaces()
        .start()
        .await
        .unwrap();
    let (code, list) = call(&r.url, "GET", "/api/v1/namespaces", &Value::Null).await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    assert!(
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"]["phase"] == "Active")
    );
}

#[tokio::test]
async fn put_without_a_resource_version_where_the_strategy_allows_it() {
    let r = ApiServer::new().start().await.unwrap();
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, _) = call(
        &r.url,
        "POST",
        path,
        &json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, put) = call(
        &r.url,
        "PUT",
        &format!("{path}/c"),
        &json!({"metadata": {"name": "c"}, "data": {"a": "2"}}),
    )
    .await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put["data"]["a"], "2");

    // A Lease, and custom resources, must say which version they replace.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
    let pools = "/apis/tartan.dev/v1/ippools";
    for (collection, object, message) in [
        (
            leases,
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": "l"}, "spec": {}}),
            "leases.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        ),
        (
            pools,
            json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": "l"},
                   "spec": {"cidr": "10.0.0.0/16", "blockSize": 26}}),
            "ippools.tartan.dev \"l\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
        ),
    ] {
        let (code, s) = call(&r.url, "POST", collection, &object).await;
        assert_eq!(code, 201, "{s}");
        let (code, s) = call(&r.url, "PUT", &format!("{collection}/l"), &object).await;
        assert_eq!(code, 422, "{s}");
        assert_eq!(s["message"], message);
    }
}

#[tokio::test]
async fn network_policies_and_endpoint_slices_carry_a_generation() {
    let r = ApiServer::new().start().await.unwrap();
    let np = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    let slices = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices";
    for (collection, object, change) in [
        (
            np,
            json!({"metadata": {"name": "o"}, "spec": {"podSelector": {}}}),
            json!({"spec": {"podSelector": {"matchLabels": {"app": "web"}}}}),
        ),
        (
            slices,
            json!({"metadata": {"name": "o"}, "addressType": "IPv4", "endpoints": []}),
            json!({"endpoints": [{"addresses": ["10.0.0.1"]}]}),
        ),
    ] {
        let (code, created) = call(&r.url, "POST", collection, &object).await;
        assert_eq!(code, 201, "{created}");
        assert_eq!(created["metadata"]["generation"], 1, "{collection}");
        let path = format!("{collection}/o");
        let (code, labelled) = call(
            &r.url,
            "PATCH",
            &path,
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .await;
        assert_eq!(code, 200, "{labelled}");
        assert_eq!(labelled["metadata"]["generation"], 1, "metadata only");
        let (code, changed) = call(&r.url, "PATCH", &path, &change).await;
        assert_eq!(code, 200, "{changed}");
        assert_eq!(changed["metadata"]["generation"], 2, "{collection}");
    }
}
