//! Built-in objects get their defaults and checks, custom resources pass
//! as they are, Namespaces get their strategy's fields, and refusals are
//! worded as the API server words them.

use axum::body::to_bytes;
use serde_json::json;

use super::*;
use crate::resources::by_type;

fn served(api_version: &str, kind: &str) -> Served {
    by_type(api_version, kind).unwrap()
}

async fn body(r: Response) -> (u16, Value) {
    let code = r.status().as_u16();
    let bytes = to_bytes(r.into_body(), usize::MAX).await.unwrap();
    (code, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn a_service_gets_its_defaults() {
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"port": 80}]}});
    admit(&served("v1", "Service"), &mut svc, Write::Create).unwrap();
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["sessionAffinity"], "None");
    assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
}

#[tokio::test]
async fn a_bad_service_is_refused_with_a_cause_per_problem() {
    let mut svc = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"port": 0}, {"port": 70000}]}});
    let r = admit(&served("v1", "Service"), &mut svc, Write::Create).unwrap_err();
    let (code, s) = body(r).await;
    assert_eq!(code, 422, "{s}");
    assert_eq!(s["reason"], "Invalid");
    let message = s["message"].as_str().unwrap();
    assert!(
        message.starts_with("Service \"web\" is invalid: [spec.ports[0].name: Required value: "),
        "{message}"
    );
    assert_eq!(s["details"]["name"], "web");
    assert_eq!(s["details"]["kind"], "Service");
    assert_eq!(s["details"]["group"], "");
    let causes = s["details"]["causes"].as_array().unwrap();
    assert!(causes.len() >= 2, "{causes:?}");
    assert_eq!(causes[0]["field"], "spec.ports[0].name");
    assert_eq!(causes[0]["reason"], "FieldValueRequired");
    assert_eq!(causes[1]["field"], "spec.ports[0].port");
    assert_eq!(causes[1]["reason"], "FieldValueInvalid");
    assert!(
        !causes[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("spec.ports")
    );
}

#[tokio::test]
async fn one_problem_is_not_bracketed_and_a_group_qualifies_the_kind() {
    let r = invalid(
        &served("networking.k8s.io/v1", "NetworkPolicy"),
        "p",
        &[("spec.podSelector".into(), "Required value".into())],
    );
    let (_, s) = body(r).await;
    assert_eq!(
        s["message"],
        "NetworkPolicy.networking.k8s.io \"p\" is invalid: spec.podSelector: Required value"
    );
    assert_eq!(s["details"]["kind"], "NetworkPolicy");
    assert_eq!(s["details"]["group"], "networking.k8s.io");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
}

#[test]
fn custom_resources_pass_unchecked() {
    let mut pool = json!({"apiVersion": "tartan.dev/v1", "kind": "IPPool",
        "metadata": {"name": "p"}, "spec": {"cidr": "not a cidr"}});
    let before = pool.clone();
    admit(&served("tartan.dev/v1", "IPPool"), &mut pool, Write::Create).unwrap();
    assert_eq!(pool, before);
}

#[test]
fn a_namespace_is_created_active_and_keeps_its_status_on_update() {
    let ns = served("v1", "Namespace");
    let mut created = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}});
    admit(&ns, &mut created, Write::Create).unwrap();
    assert_eq!(created["status"], json!({"phase": "Active"}));
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        created["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "web"
    );
    let mut update = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "web"}, "status": {"phase": "Terminating"}});
    admit(&ns, &mut update, Write::Update(&created)).unwrap();
    assert_eq!(update["status"], json!({"phase": "Active"}));
    assert_eq!(update["spec"]["finalizers"], json!(["kubernetes"]));
}

#[test]
fn generated_names_have_five_random_characters() {
    let a = generated_name("web-");
    let b = generated_name("web-");
    assert_ne!(a, b);
    let suffix = a.strip_prefix("web-").unwrap();
    assert_eq!(suffix.len(), 5);
    assert!(
        suffix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    );
}

#[test]
fn unconditional_updates_by_kind() {
    for (v, k) in [
        ("v1", "ConfigMap"),
        ("v1", "Service"),
        ("v1", "Pod"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
    ] {
        assert!(unconditional_update(&served(v, k)), "{k}");
    }
    for (v, k) in [
        ("coordination.k8s.io/v1", "Lease"),
        ("tartan.dev/v1", "IPPool"),
    ] {
        assert!(!unconditional_update(&served(v, k)), "{k}");
    }
}
