//! Discovery as kubectl reads it: `/version`, `/api`, `/apis`, each
//! group version's resource list (names, singular, kind, scope, verbs,
//! short names, categories), and the OpenAPI v3 documents kubectl asks
//! for before it writes: that PATCH takes `fieldValidation` for every
//! kind (so it validates on the server, which [`crate::strict`] does),
//! and the schemas of Tartan's kinds from their CRDs (`kubectl explain`);
//! the built-in kinds' schemas are not served. Aggregated discovery is
//! not served: asked for it, the plain documents answer, and kubectl falls
//! back to them.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::{Served, all, crd_of};

/// The verbs the stand-in serves on every resource (no
/// deletecollection).
const VERBS: [&str; 7] = [
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The answer to a GET of a discovery path, if `path` is one.
pub fn document(path: &str, host: &str) -> Option<Value> {
    let path = path.trim_end_matches('/');
    let served = all();
    let mut groups: BTreeMap<String, Vec<&Served>> = BTreeMap::new();
    for s in &served {
        groups.entry(s.api_version()).or_default().push(s);
    }
    match path {
        "/version" => Some(json!({
            "major": "1", "minor": "32", "gitVersion": "v1.32.0-tartan-stand-in",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "", "compiler": "", "platform": "linux/amd64"
        })),
        "/api" => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]
        })),
        "/apis" => {
            let mut names: Vec<&str> = served
                .iter()
                .filter(|s| !s.group.is_empty())
                .map(|s| s.group.as_str())
                .collect();
            names.dedup();
            names.sort();
            names.dedup();
            let list: Vec<Value> = names
                .iter()
                .map(|g| {
                    let gv = json!({"groupVersion": format!("{g}/v1"), "version": "v1"});
                    json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
                })
                .collect();
            Some(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}))
        }
        "/openapi/v3" => {
            let paths: serde_json::Map<String, Value> = groups
                .keys()
                .map(|gv| {
                    let p = openapi_path(gv);
                    (
                        p.clone(),
                        json!({"serverRelativeURL": format!("/openapi/v3/{p}")}),
                    )
                })
                .collect();
            Some(json!({"paths": paths}))
        }
        _ => {
            if let Some(p) = path.strip_prefix("/openapi/v3/") {
                let (gv, list) = groups.iter().find(|(gv, _)| openapi_path(gv) == p)?;
                return Some(openapi(gv, list));
            }
            let gv = path
                .strip_prefix("/api/")
                .or_else(|| path.strip_prefix("/apis/"))?;
            let list = groups.get(gv)?;
            Some(resource_list(gv, list))
        }
    }
}

/// `api/v1`, `apis/tartan.dev/v1`.
fn openapi_path(gv: &str) -> String {
    if gv.contains('/') {
        format!("apis/{gv}")
    } else {
        format!("api/{gv}")
    }
}

fn resource_list(gv: &str, list: &[&Served]) -> Value {
    let mut resources = Vec::new();
    for s in list {
        let mut r = json!({
            "name": s.plural, "singularName": s.singular, "namespaced": s.namespaced,
            "kind": s.name, "verbs": VERBS,
        });
        if !s.short_names.is_empty() {
            r["shortNames"] = json!(s.short_names);
        }
        if !s.categories.is_empty() {
            r["categories"] = json!(s.categories);
        }
        resources.push(r);
        if s.has_status {
            resources.push(json!({
                "name": format!("{}/status", s.plural), "singularName": "",
                "namespaced": s.namespaced, "kind": s.name, "verbs": ["get", "update"],
            }));
        }
    }
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources})
}

/// A group version's OpenAPI v3 document: one PATCH operation per kind
/// with its group-version-kind and the `fieldValidation` parameter.
fn openapi(gv: &str, list: &[&Served]) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for s in list {
        // Tartan's kinds: their CRD's schema, for `kubectl explain`.
        if let Some(mut schema) = s
            .kind
            .and_then(crd_of)
            .and_then(|c| c.pointer("/spec/versions/0/schema/openAPIV3Schema"))
            .cloned()
        {
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": s.group, "version": s.version, "kind": s.name}]);
            let group: Vec<&str> = s.group.split('.').rev().collect();
            schemas.insert(
                format!("{}.{}.{}", group.join("."), s.version, s.name),
                schema,
            );
        }
        let prefix = openapi_path(gv);
        let scope = if s.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let op = json!({"patch": {
            "x-kubernetes-group-version-kind": {"group": s.group, "version": s.version, "kind": s.name},
            "parameters": [
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
            ],
            "responses": {}
        }});
        paths.insert(format!("/{prefix}/{scope}{}/{{name}}", s.plural), op);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (Tartan's API server stand-in)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tartan_kinds_are_discovered_with_their_crd_names() {
        let doc = document("/apis/tartan.dev/v1", "h").unwrap();
        let pools = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "ippools")
            .unwrap();
        assert_eq!(pools["kind"], "IPPool");
        assert_eq!(pools["singularName"], "ippool");
        assert_eq!(pools["namespaced"], false);
        assert_eq!(pools["shortNames"], json!(["pool"]));
        let groups = document("/apis", "h").unwrap();
        let names: Vec<&str> = groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["name"].as_str())
            .collect();
        assert!(names.contains(&"apiextensions.k8s.io") && names.contains(&"tartan.dev"));
        let core = document("/api/v1", "h").unwrap();
        assert!(
            core["resources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["name"] == "configmaps" && r["shortNames"] == json!(["cm"]))
        );
        assert!(document("/apis/nope/v1", "h").is_none());
        assert!(document("/apis/tartan.dev/v1/ippools", "h").is_none());
    }

    #[test]
    fn openapi_tells_kubectl_that_patch_validates_fields() {
        let root = document("/openapi/v3", "h").unwrap();
        let url = root["paths"]["apis/tartan.dev/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        let doc = document(url, "h").unwrap();
        let op = &doc["paths"]["/apis/tartan.dev/v1/ippools/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "IPPool");
        assert_eq!(op["parameters"][0]["name"], "fieldValidation");
        let core = document("/openapi/v3/api/v1", "h").unwrap();
        assert!(core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"].is_object());
    }
}
