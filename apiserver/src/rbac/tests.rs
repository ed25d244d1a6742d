//! The evaluator against hand-written policies and deploy/'s own.

use std::collections::HashMap;

use super::eval::coverage;
use super::*;
use crate::request::{Attributes, attributes, parse_query};

const POLICY: &str = r#"
# a comment-only document first
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: agent, namespace: sys}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: agent}
rules:
  - apiGroups: [""]
    resources: [nodes, services]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [services/status]
    verbs: [update]
  - apiGroups: [example.dev]
    resources: ["*/scale"]
    verbs: [update]
  - nonResourceURLs: ["/healthz", "/metrics/*"]
    verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: agent}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: agent}
subjects: [{kind: ServiceAccount, name: agent, namespace: sys}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease, namespace: sys}
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [mine]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lease, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects: [{kind: ServiceAccount, name: agent, namespace: sys}]
---
# Every service account of namespace "sys" may read configmaps there,
# through a ClusterRole bound in the namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: read-config}
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-config, namespace: sys}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: read-config}
subjects: [{kind: Group, name: "system:serviceaccounts:sys"}]
"#;

fn policy() -> Policy {
    Policy::from_manifests(&[("test.yaml", POLICY)]).unwrap()
}

fn req(method: &str, path_query: &str) -> Attributes {
    let (path, q) = path_query.split_once('?').unwrap_or((path_query, ""));
    attributes(method, path, &parse_query(Some(q)))
}

const AGENT: &str = "system:serviceaccount:sys:agent";

#[test]
fn the_manifests_are_read() {
    let p = policy();
    assert_eq!(
        p.service_accounts,
        [("sys".to_string(), "agent".to_string())]
    );
    assert_eq!(p.roles.len(), 3);
    assert_eq!(p.bindings.len(), 3);
    assert_eq!(p.grants(AGENT).len(), 7);
    assert!(p.grants("system:serviceaccount:other:agent").is_empty());
}

#[test]
fn requests_are_allowed_as_the_api_server_allows_them() {
    let p = policy();
    let cases = [
        ("GET", "/api/v1/nodes", true),
        ("GET", "/api/v1/nodes?watch=true", true),
        ("GET", "/api/v1/nodes/n1", true),
        ("PUT", "/api/v1/nodes/n1", false),
        ("DELETE", "/api/v1/nodes", false),
        // A namespaced resource granted cluster-wide, listed anywhere.
        ("GET", "/api/v1/namespaces/x/services", true),
        // The subresource is its own resource.
        ("PUT", "/api/v1/namespaces/x/services/s/status", true),
        ("PUT", "/api/v1/namespaces/x/services/s", false),
        ("GET", "/api/v1/namespaces/x/services/s/status", false),
        // */scale matches any resource's scale subresource, nothing else.
        (
            "PUT",
            "/apis/example.dev/v1/namespaces/x/things/t/scale",
            true,
        ),
        ("PUT", "/apis/example.dev/v1/namespaces/x/things/t", false),
        // The core group is not another group.
        ("GET", "/apis/example.dev/v1/nodes", false),
        // resourceNames: only the named object, and never create or list.
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases/mine",
            true,
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases/mine",
            true,
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases/theirs",
            false,
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases",
            false,
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases?fieldSelector=metadata.name%3Dmine",
            false,
        ),
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/sys/leases",
            true,
        ),
        // A RoleBinding grants in its namespace only.
        (
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/other/leases",
            false,
        ),
        ("POST", "/apis/coordination.k8s.io/v1/leases", false),
        // A ClusterRole bound to a group, in one namespace; `*` verbs.
        ("DELETE", "/api/v1/namespaces/sys/configmaps", true),
        ("PATCH", "/api/v1/namespaces/sys/configmaps/c", true),
        ("GET", "/api/v1/namespaces/other/configmaps/c", false),
        ("GET", "/api/v1/configmaps", false),
        // Non-resource URLs: exact or by prefix.
        ("GET", "/healthz", true),
        ("GET", "/metrics/cadvisor", true),
        ("GET", "/version", false),
        ("POST", "/healthz", false),
    ];
    for (m, path, want) in cases {
        assert_eq!(p.allows(AGENT, &req(m, path)), want, "{m} {path}");
    }
    // Another service account of the namespace gets the group's grant only.
    let other = "system:serviceaccount:sys:other";
    assert!(p.allows(other, &req("GET", "/api/v1/namespaces/sys/configmaps")));
    assert!(!p.allows(other, &req("GET", "/api/v1/nodes")));
    assert!(!p.allows("alice", &req("GET", "/api/v1/nodes")));
    assert!(p.allows(ADMIN, &req("DELETE", "/api/v1/nodes")));
}

#[test]
fn a_binding_to_a_missing_role_is_refused() {
    let text = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nowhere}
subjects: [{kind: User, name: u}]
"#;
    let e = Policy::from_manifests(&[("x.yaml", text)]).unwrap_err();
    assert!(e.to_string().contains("nowhere"), "{e}");
    let bad = "kind: Role\nmetadata: {name: r}\nrules: 7\n";
    assert!(Policy::from_manifests(&[("y.yaml", bad)]).is_err());
    assert!(Policy::from_manifests(&[("z.yaml", "a: [")]).is_err());
}

#[test]
fn coverage_counts_the_requests_each_part_of_a_grant_allows() {
    let p = policy();
    let reqs = [
        req("GET", "/api/v1/nodes"),
        req("GET", "/api/v1/nodes?watch=true"),
        req("GET", "/api/v1/namespaces/a/services"),
    ];
    let cov: HashMap<String, usize> = coverage(&p.grants(AGENT), reqs.iter())
        .into_iter()
        .map(|(g, n)| (g.to_string(), n))
        .collect();
    assert_eq!(cov["list nodes (core) cluster-wide [ClusterRole agent]"], 1);
    assert_eq!(
        cov["watch nodes (core) cluster-wide [ClusterRole agent]"],
        1
    );
    assert_eq!(cov["get nodes (core) cluster-wide [ClusterRole agent]"], 0);
    assert_eq!(
        cov["list services (core) cluster-wide [ClusterRole agent]"],
        1
    );
    assert_eq!(
        cov["get leases (coordination.k8s.io) in sys named mine [Role sys/lease]"],
        0
    );
    // 3 verbs x 2 resources, 1, 1, 2 URLs, 1 + 2 lease verbs, 1.
    assert_eq!(cov.len(), 6 + 1 + 1 + 2 + 3 + 1);
}

/// deploy/'s manifests read as a policy, and each daemon's account holds
/// what its file says it does (the end-to-end test in tartan-tests checks
/// the daemons' real requests against it).
#[test]
fn deploy_manifests_are_a_policy() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let p = Policy::from_dir(&dir).unwrap();
    for (ns, sa) in [
        ("tartan-system", "tartan-node"),
        ("tartan-system", "tartan-controllers"),
        ("kube-system", "tartan-dns"),
    ] {
        assert!(
            p.service_accounts
                .contains(&(ns.to_string(), sa.to_string())),
            "{ns}/{sa}"
        );
        assert!(!p.grants(&service_account_user(ns, sa)).is_empty(), "{sa}");
    }
    let dns = service_account_user("kube-system", "tartan-dns");
    assert!(p.allows(&dns, &req("GET", "/api/v1/services?watch=true")));
    assert!(!p.allows(&dns, &req("PUT", "/api/v1/namespaces/a/services/s")));
}
