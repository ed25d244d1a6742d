//! What a request asks for, in the words of the API server's authorizer
//! (its "request info"): the RBAC verb (get, list, watch, create, update,
//! patch, delete, deletecollection), API group, version, resource,
//! subresource, namespace and name, or a non-resource path. Pure: the
//! server and the RBAC evaluator both read it.

use std::collections::HashMap;
use std::fmt;

/// A resource request's target.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceRef {
    /// API group; empty for the core group.
    pub group: String,
    pub version: String,
    /// Plural, e.g. `services`.
    pub resource: String,
    /// e.g. `status` for `services/status`.
    pub subresource: Option<String>,
    /// The namespace (for `namespaces/NAME`, NAME, as the API server sets it).
    pub namespace: Option<String>,
    /// The object's name: from the path, or for a list or watch from a
    /// `metadata.name=` field selector.
    pub name: Option<String>,
    /// Whether the path named an object (a list narrowed by field selector
    /// did not).
    pub object_path: bool,
}

impl ResourceRef {
    /// `services` or `services/status`, as RBAC rules name it.
    pub fn combined(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{s}", self.resource),
            None => self.resource.clone(),
        }
    }
}

/// One request as the authorizer sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attributes {
    pub verb: String,
    /// `None`: a non-resource request (discovery, `/version`, …).
    pub resource: Option<ResourceRef>,
    pub path: String,
}

impl fmt::Display for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.resource {
            None => write!(f, "{} {}", self.verb, self.path),
            Some(r) => {
                let group = if r.group.is_empty() { "core" } else { &r.group };
                write!(f, "{} {} ({group})", self.verb, r.combined())?;
                if let Some(ns) = &r.namespace {
                    write!(f, " in {ns}")?;
                }
                if let Some(n) = &r.name {
                    write!(f, " named {n}")?;
                }
                Ok(())
            }
        }
    }
}

/// Subresources of a namespace (`/api/v1/namespaces/NAME/status`), which
/// are not resources inside that namespace.
const NAMESPACE_SUBRESOURCES: [&str; 2] = ["status", "finalize"];

/// The attributes of `method path?query`, as the API server derives them.
pub fn attributes(method: &str, path: &str, query: &HashMap<String, String>) -> Attributes {
    let non_resource = || Attributes {
        verb: method.to_ascii_lowercase(),
        resource: None,
        path: path.to_string(),
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, mut rest) = match parts.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return non_resource(),
    };
    let mut verb = match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => return non_resource(),
    };
    // The deprecated `/watch/` form.
    if rest[0] == "watch" {
        verb = "watch";
        rest = &rest[1..];
        if rest.is_empty() {
            return non_resource();
        }
    }
    let mut namespace = None;
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    let resource = rest[0].to_string();
    let mut name = rest.get(1).map(|s| s.to_string());
    let object_path = name.is_some();
    let subresource = rest.get(2).map(|s| s.to_string());
    if name.is_none() && verb == "get" {
        let watching = query
            .get("watch")
            .is_some_and(|w| matches!(w.as_str(), "true" | "1" | "True"));
        verb = if watching { "watch" } else { "list" };
    }
    if name.is_none() && matches!(verb, "list" | "watch") {
        name = query.get("fieldSelector").and_then(|s| exact_name(s));
    }
    if name.is_none() && verb == "delete" {
        verb = "deletecollection";
    }
    Attributes {
        verb: verb.to_string(),
        resource: Some(ResourceRef {
            group: group.to_string(),
            version: version.to_string(),
            resource,
            subresource,
            namespace,
            name,
            object_path,
        }),
        path: path.to_string(),
    }
}

/// The name a field selector requires exactly (`metadata.name=x`).
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let v = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// The query string's parameters, percent-decoded.
pub fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Percent-decoding of one query component (`+` is a space).
pub fn decode(v: &str) -> String {
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                if let Ok(x) = u8::from_str_radix(hex, 16) {
                    out.push(x);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The service account a request for `serviceaccounts/token` names (the
/// TokenRequest API, `tokenrequest`).
pub fn token_request_target(attrs: &Attributes) -> Option<&ResourceRef> {
    attrs.resource.as_ref().filter(|r| {
        r.group.is_empty()
            && r.resource == "serviceaccounts"
            && r.subresource.as_deref() == Some("token")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, path_query: &str) -> Attributes {
        let (path, q) = path_query.split_once('?').unwrap_or((path_query, ""));
        attributes(method, path, &parse_query(Some(q)))
    }

    fn short(a: &Attributes) -> String {
        a.to_string()
    }

    #[test]
    fn verbs_as_rbac_names_them() {
        let cases = [
            ("GET", "/api/v1/nodes", "list nodes (core)"),
            (
                "GET",
                "/api/v1/nodes?watch=true&resourceVersion=5",
                "watch nodes (core)",
            ),
            ("GET", "/api/v1/nodes?watch=1", "watch nodes (core)"),
            ("GET", "/api/v1/nodes/n1", "get nodes (core) named n1"),
            ("PUT", "/api/v1/nodes/n1", "update nodes (core) named n1"),
            ("PATCH", "/api/v1/nodes/n1", "patch nodes (core) named n1"),
            ("DELETE", "/api/v1/nodes/n1", "delete nodes (core) named n1"),
            ("DELETE", "/api/v1/nodes", "deletecollection nodes (core)"),
            (
                "POST",
                "/apis/tartan.dev/v1/ippools",
                "create ippools (tartan.dev)",
            ),
            (
                "PUT",
                "/api/v1/namespaces/default/services/s/status",
                "update services/status (core) in default named s",
            ),
            (
                "GET",
                "/apis/coordination.k8s.io/v1/namespaces/tartan-system/leases/l",
                "get leases (coordination.k8s.io) in tartan-system named l",
            ),
            (
                "GET",
                "/api/v1/watch/namespaces/default/pods",
                "watch pods (core) in default",
            ),
            (
                "GET",
                "/api/v1/namespaces/tartan-system/secrets?fieldSelector=metadata.name%3Dpw",
                "list secrets (core) in tartan-system named pw",
            ),
            // A namespace is its own namespace.
            (
                "GET",
                "/api/v1/namespaces/kube-system",
                "get namespaces (core) in kube-system named kube-system",
            ),
            (
                "PUT",
                "/api/v1/namespaces/x/finalize",
                "update namespaces/finalize (core) in x named x",
            ),
            ("GET", "/api/v1/namespaces", "list namespaces (core)"),
            ("GET", "/version", "get /version"),
            ("GET", "/apis/tartan.dev/v1", "get /apis/tartan.dev/v1"),
        ];
        for (m, p, want) in cases {
            assert_eq!(short(&attrs(m, p)), want, "{m} {p}");
        }
    }

    #[test]
    fn a_list_by_field_selector_is_not_an_object_path() {
        let a = attrs(
            "GET",
            "/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name=a",
        );
        let r = a.resource.unwrap();
        assert_eq!(r.name.as_deref(), Some("a"));
        assert!(!r.object_path);
        let a = attrs("GET", "/api/v1/namespaces/ns/secrets/a");
        assert!(a.resource.unwrap().object_path);
    }

    #[test]
    fn decoding_never_panics() {
        for s in ["%", "%4", "%zz", "a%2", "%41", "+", "%E2%82%AC"] {
            let _ = decode(s);
        }
        assert_eq!(decode("a%3Db+c"), "a=b c");
        assert_eq!(decode("%E2%82%AC"), "€");
        assert_eq!(decode("50%"), "50%");
    }
}
