//! The stand-in's answers to who asks: 401 without a token once tokens
//! are in use, 403 in the API server's words for what deploy/'s RBAC does
//! not allow (with `enforce`), and every request recorded with the
//! policy's verdict either way.

mod common;

use std::path::Path;

use tartan_apiserver::{ApiServer, Policy, service_account_user};

/// `GET path` with an optional bearer token: (status, body).
async fn get(url: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = common::bearer(token);
    let headers: Vec<(&str, &str)> = auth
        .as_ref()
        .map(|(k, v)| (*k, v.as_str()))
        .into_iter()
        .collect();
    common::request(url, "GET", path, &headers, "").await
}

fn deploy() -> Policy {
    Policy::from_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")).unwrap()
}

#[tokio::test]
async fn enforced_rbac_refuses_what_deploy_does_not_grant() {
    let r = ApiServer::new()
        .with_policy(deploy(), true)
        .start()
        .await
        .unwrap();
    let dns = service_account_user("kube-system", "tartan-dns");
    let token = r.server.tokens.issue(&dns, "dns");

    let (code, body) = get(&r.url, "/api/v1/services", None).await;
    assert_eq!(code, 401, "{body}");
    let (code, body) = get(&r.url, "/api/v1/services", Some(&token)).await;
    assert_eq!(code, 200, "tartan-dns lists Services: {body}");
    let (code, body) = get(&r.url, "/apis/tartan.dev/v1/ippools", Some(&token)).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("\"reason\":\"Forbidden\"") && body.contains(&dns),
        "{body}"
    );
    let verdicts: Vec<_> = r.requests().iter().map(|q| q.allowed).collect();
    // The anonymous request is judged too (nothing grants it anything).
    assert_eq!(verdicts, [Some(false), Some(true), Some(false)]);
}

#[tokio::test]
async fn without_enforce_a_refused_request_is_served_and_recorded_as_denied() {
    let r = ApiServer::new()
        .with_policy(deploy(), false)
        .start()
        .await
        .unwrap();
    let dns = service_account_user("kube-system", "tartan-dns");
    let token = r.server.tokens.issue(&dns, "dns");
    let (code, body) = get(&r.url, "/apis/tartan.dev/v1/ippools", Some(&token)).await;
    assert_eq!(code, 200, "{body}");
    let recorded = r.requests();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].allowed, Some(false));
    assert_eq!(recorded[0].user.as_deref(), Some(dns.as_str()));
}
