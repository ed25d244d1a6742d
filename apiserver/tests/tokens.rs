//! Tokens as the API server has them: a lifetime (401 with its Status
//! body once past), revocation, the TokenRequest API judged by deploy/'s
//! RBAC as `create` on `serviceaccounts/token`, and tokens bound to a Pod
//! that die with it.

mod common;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey};
use tartan_apiserver::{ApiServer, Policy, Running, service_account_user};

/// `method path` with an optional bearer token and JSON body: (status,
/// body as JSON).
async fn call(
    r: &Running,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let auth = common::bearer(token);
    let mut headers = vec![("Content-Type", "application/json")];
    headers.extend(auth.as_ref().map(|(k, v)| (*k, v.as_str())));
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (code, out) = common::request(&r.url, method, path, &headers, &body).await;
    (code, common::body_json(&out))
}

fn deploy() -> Policy {
    Policy::from_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")).unwrap()
}

const TOKEN_PATH: &str = "/api/v1/namespaces/tartan-system/serviceaccounts/tartan-cni/token";

fn token_request(seconds: i64, pod: Option<(&str, &str)>) -> Value {
    let mut spec = json!({"expirationSeconds": seconds});
    if let Some((name, uid)) = pod {
        spec["boundObjectRef"] =
            json!({"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid});
    }
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec})
}

async fn pod(r: &Running, name: &str) -> String {
    let o: DynamicObject = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "tartan-system"}}))
    .unwrap();
    let o = r.server.store.create(o).await.unwrap();
    o.metadata.uid.unwrap()
}

/// A read the tartan-cni account may make (its Node by name): 404 for a
/// valid token (no such Node), 401 for an invalid one.
async fn read_as(r: &Running, token: &str) -> (u16, Value) {
    call(r, "GET", "/api/v1/nodes/node-1", Some(token), None).await
}

/// Polls `f` until it holds, failing after `limit` (a bound, not a
/// measurement).
async fn eventually<F, Fut>(what: &str, limit: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let t = Instant::now();
    while !f().await {
        assert!(t.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_token_request_gives_a_token_that_expires() {
    let r = ApiServer::new()
        .with_policy(deploy(), true)
        .with_token_lifetime(Duration::from_secs(2))
        .start()
        .await
        .unwrap();
    let node = service_account_user("tartan-system", "tartan-node");
    let felix = r.server.tokens.issue_with(&node, "felix", None, None, true);
    let before = SystemTime::now();
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(3600, None)),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["kind"], "TokenRequest");
    assert_eq!(body["spec"]["expirationSeconds"], 3600);
    let token = body["status"]["token"].as_str().unwrap().to_string();
    // Cut to the server's lifetime, in whole seconds.
    let expires: k8s_openapi::jiff::Timestamp = body["status"]["expirationTimestamp"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let expires = SystemTime::from(expires);
    let left = expires.duration_since(before).unwrap_or_default();
    assert!(
        left <= Duration::from_secs(2) && left >= Duration::from_secs(1),
        "{left:?}"
    );
    let recorded = r.requests();
    assert_eq!(
        recorded[0].attributes.to_string(),
        "create serviceaccounts/token (core) in tartan-system named tartan-cni"
    );
    assert_eq!(recorded[0].allowed, Some(true));

    let (code, body) = read_as(&r, &token).await;
    assert_eq!(code, 404, "a valid tartan-cni token reads its Node: {body}");
    let cni = service_account_user("tartan-system", "tartan-cni");
    assert_eq!(r.requests()[1].user.as_deref(), Some(cni.as_str()));
    eventually("the token expires", Duration::from_secs(10), || async {
        read_as(&r, &token).await.0 == 401
    })
    .await;
    let (code, body) = read_as(&r, &token).await;
    assert_eq!(code, 401);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    assert!(
        SystemTime::now() >= expires,
        "not before its expirationTimestamp"
    );
    // felix's own token (no lifetime given) still works.
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(600, None)),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn token_requests_are_judged_and_checked() {
    let r = ApiServer::new()
        .with_policy(deploy(), true)
        .start()
        .await
        .unwrap();
    let node = service_account_user("tartan-system", "tartan-node");
    let dns = service_account_user("kube-system", "tartan-dns");
    let felix = r.server.tokens.issue(&node, "felix");
    let dns = r.server.tokens.issue(&dns, "dns");
    let admin = r
        .server
        .tokens
        .issue(tartan_apiserver::rbac::ADMIN, "admin");
    // Only tartan-cni's tokens, only for tartan-node.
    let own = "/api/v1/namespaces/tartan-system/serviceaccounts/tartan-node/token";
    let (code, body) = call(
        &r,
        "POST",
        own,
        Some(&felix),
        Some(token_request(3600, None)),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("cannot create resource \"serviceaccounts/token\""),
        "{body}"
    );
    let (code, _) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&dns),
        Some(token_request(3600, None)),
    )
    .await;
    assert_eq!(code, 403);
    // The API server's checks.
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(599, None)),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("may not specify a duration less than 10 minutes")
    );
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(3600, Some(("gone", "")))),
    )
    .await;
    assert_eq!(code, 404, "{body}");
    assert_eq!(body["message"], "pods \"gone\" not found");
    let nobody = "/api/v1/namespaces/tartan-system/serviceaccounts/nobody/token";
    let (code, body) = call(
        &r,
        "POST",
        nobody,
        Some(&admin),
        Some(token_request(3600, None)),
    )
    .await;
    assert_eq!(code, 404, "{body}");
    let (code, _) = call(&r, "GET", TOKEN_PATH, Some(&admin), None).await;
    assert_eq!(code, 405);
    let (code, _) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(json!("not a TokenRequest")),
    )
    .await;
    assert_eq!(code, 400);
    // Without a lifetime cut, the lifetime asked for (default an hour).
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(json!({"spec": {}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["expirationSeconds"], 3600);
    assert_eq!(
        body["spec"]["audiences"],
        json!([tartan_apiserver::tokenrequest::API_AUDIENCE])
    );
    // A token for another audience is not one the API server takes.
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(json!({"spec": {"audiences": ["vault"]}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, _) = read_as(&r, body["status"]["token"].as_str().unwrap()).await;
    assert_eq!(code, 401);
}

#[tokio::test]
async fn a_bound_token_dies_with_its_pod_and_a_revoked_token_at_once() {
    let r = ApiServer::new()
        .with_policy(deploy(), true)
        .start()
        .await
        .unwrap();
    let node = service_account_user("tartan-system", "tartan-node");
    let felix = r.server.tokens.issue(&node, "felix");
    let uid = pod(&r, "tartan-node-x").await;
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(3600, Some(("tartan-node-x", "wrong")))),
    )
    .await;
    assert_eq!(code, 409, "{body}");
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(3600, Some(("tartan-node-x", &uid)))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["spec"]["boundObjectRef"]["uid"], uid.as_str());
    let bound = body["status"]["token"].as_str().unwrap().to_string();
    assert_eq!(read_as(&r, &bound).await.0, 404);
    let key = ObjectKey::new(Kind::Pod, Some("tartan-system"), "tartan-node-x");
    r.server.store.delete(&key, None).await.unwrap();
    assert_eq!(read_as(&r, &bound).await.0, 401, "its Pod is gone");
    // A new Pod of the same name is another Pod.
    pod(&r, "tartan-node-x").await;
    assert_eq!(read_as(&r, &bound).await.0, 401, "its Pod was replaced");

    assert!(r.server.tokens.revoke(&felix));
    let (code, body) = call(
        &r,
        "POST",
        TOKEN_PATH,
        Some(&felix),
        Some(token_request(3600, None)),
    )
    .await;
    assert_eq!(code, 401, "{body}");
    let last = r.requests().pop().unwrap();
    assert_eq!(last.user, None);
}
