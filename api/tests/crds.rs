//! The generated CRDs: structural as Kubernetes demands, in line with the
//! kind table, carrying the cross-field rules, and equal to the committed
//! files in deploy/crds/.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use tartan_api::Kind;
use tartan_api::resources::crd::{self, crds};

fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds")
}

/// Every way `schema` (at `path`) breaks Kubernetes' structural-schema
/// rules, as far as Tartan's schemas can: a `type` on every node (except
/// int-or-string and preserve-unknown-fields), no `$ref`/definitions, no
/// `additionalProperties` beside `properties`, no anyOf/oneOf/allOf/not
/// (but the int-or-string form), `items` a single schema, defaults and
/// enum values of the node's type.
fn structural_problems(path: &str, schema: &Value, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        out.push(format!("{path}: not a schema object"));
        return;
    };
    for banned in [
        "$ref",
        "$schema",
        "definitions",
        "$defs",
        "oneOf",
        "allOf",
        "not",
    ] {
        if s.contains_key(banned) {
            out.push(format!("{path}: has {banned}"));
        }
    }
    let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if let Some(any_of) = s.get("anyOf") {
        let allowed = serde_json::json!([{"type": "integer"}, {"type": "string"}]);
        if !(int_or_string && *any_of == allowed) {
            out.push(format!("{path}: anyOf outside the int-or-string form"));
        }
    }
    let ty = s.get("type");
    match ty {
        None if int_or_string || preserve => {}
        None => out.push(format!("{path}: no type")),
        Some(_) if int_or_string => out.push(format!("{path}: int-or-string with a type")),
        Some(Value::String(t))
            if ["object", "array", "string", "integer", "number", "boolean"]
                .contains(&t.as_str()) => {}
        Some(t) => out.push(format!("{path}: type {t} is not a single OpenAPI type")),
    }
    let ty = ty.and_then(Value::as_str).unwrap_or("");
    let fits = |v: &Value| match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => v.is_string() || v.is_i64() || v.is_u64(),
    };
    if let Some(d) = s.get("default")
        && !fits(d)
    {
        out.push(format!("{path}: default {d} is not of type {ty:?}"));
    }
    for v in s
        .get("enum")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !fits(v) {
            out.push(format!("{path}: enum value {v} is not of type {ty:?}"));
        }
    }
    if s.contains_key("properties") && s.contains_key("additionalProperties") {
        out.push(format!("{path}: additionalProperties beside properties"));
    }
    if (s.contains_key("properties") || s.contains_key("additionalProperties")) && ty != "object" {
        out.push(format!("{path}: properties on a non-object"));
    }
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        for r in req {
            let known = r
                .as_str()
                .is_some_and(|r| s.get("properties").is_some_and(|p| p.get(r).is_some()));
            if !known {
                out.push(format!("{path}: required {r} is not a property"));
            }
        }
    }
    for rule in s
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ok = rule
            .get("rule")
            .and_then(Value::as_str)
            .is_some_and(|r| !r.is_empty())
            && rule
                .get("message")
                .and_then(Value::as_str)
                .is_some_and(|m| !m.is_empty());
        if !ok {
            out.push(format!(
                "{path}: validation rule without rule text or message"
            ));
        }
    }
    match (ty, s.get("items")) {
        ("array", Some(items)) if items.is_object() => {
            structural_problems(&format!("{path}[]"), items, out)
        }
        ("array", _) => out.push(format!("{path}: array without a single items schema")),
        (_, Some(_)) => out.push(format!("{path}: items on a non-array")),
        _ => {}
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            structural_problems(&format!("{path}.{k}"), v, out);
        }
    }
    if let Some(ap) = s.get("additionalProperties") {
        match ap {
            Value::Object(_) => structural_problems(&format!("{path}{{*}}"), ap, out),
            other => out.push(format!("{path}: additionalProperties {other}")),
        }
    }
}

fn schema_of(
    c: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    let v = serde_json::to_value(c).unwrap();
    v["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn every_schema_is_structural() {
    let mut problems = Vec::new();
    for c in crds() {
        let name = c.metadata.name.clone().unwrap();
        structural_problems(&name, &schema_of(&c), &mut problems);
    }
    assert!(
        problems.is_empty(),
        "not structural:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_catches_what_kubernetes_rejects() {
    let bad = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"description": "no type"},
            "b": {"type": "object", "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}},
            "c": {"$ref": "#/definitions/C", "type": "object"},
            "d": {"anyOf": [{"type": "string"}, {"type": "null"}], "type": "string"},
            "e": {"type": ["string", "null"]},
            "f": {"type": "string", "default": 3},
            "g": {"type": "array"},
        }
    });
    let mut problems = Vec::new();
    structural_problems("t", &bad, &mut problems);
    for want in [
        "t.a: no type",
        "t.b: additionalProperties beside properties",
        "t.c: has $ref",
        "t.d: anyOf outside",
        "t.e: type",
        "t.f: default 3",
        "t.g: array without",
    ] {
        assert!(
            problems.iter().any(|p| p.starts_with(want)),
            "{want} not caught in {problems:?}"
        );
    }
}

#[test]
fn crds_match_the_kind_table() {
    let all = crds();
    assert_eq!(all.len(), Kind::tartan().count());
    for (c, kind) in all.iter().zip(Kind::tartan()) {
        let i = kind.info();
        let s = &c.spec;
        assert_eq!(s.names.kind, i.name);
        assert_eq!(s.names.plural, i.plural);
        assert_eq!(s.group, i.group);
        assert_eq!(
            s.scope,
            if i.namespaced {
                "Namespaced"
            } else {
                "Cluster"
            },
            "{kind}"
        );
        assert_eq!(
            c.metadata.name.as_deref(),
            Some(&*format!("{}.{}", i.plural, i.group))
        );
        assert_eq!(s.versions.len(), 1);
        assert_eq!(s.versions[0].name, i.version);
        assert!(s.versions[0].served && s.versions[0].storage);
    }
}

/// The rules a schema cannot say are carried as CEL.
#[test]
fn cross_field_rules_are_in_the_schemas() {
    let rules = |kind: Kind, at: &[&str]| -> Vec<String> {
        let c = crds()
            .into_iter()
            .find(|c| c.spec.names.kind == kind.info().name)
            .unwrap();
        let mut v = schema_of(&c)["properties"]["spec"].clone();
        for step in at {
            v = v[step].clone();
        }
        v["x-kubernetes-validations"]
            .as_array()
            .unwrap_or(&vec![])
            .iter()
            .map(|r| r["rule"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let pool = rules(Kind::IpPool, &[]);
    assert!(
        pool.iter()
            .any(|r| r.contains("ipipMode") && r.contains("vxlanMode")),
        "{pool:?}"
    );
    let peer = rules(Kind::BgpPeer, &[]);
    assert!(
        peer.contains(&"has(self.peerIP) != has(self.peerSelector)".to_string()),
        "{peer:?}"
    );
    assert!(
        peer.iter().any(|r| r.contains("self.nodeSelector")),
        "{peer:?}"
    );
    let filter_rule = rules(Kind::BgpFilter, &["properties", "exportV4", "items"]);
    assert!(
        filter_rule.iter().any(|r| r.contains("matchOperator")),
        "{filter_rule:?}"
    );
}

#[test]
fn int_or_string_fields_accept_both() {
    let c = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "GlobalNetworkPolicy")
        .unwrap();
    let rule = &schema_of(&c)["properties"]["spec"]["properties"]["ingress"]["items"]["properties"];
    for field in [
        &rule["protocol"],
        &rule["notProtocol"],
        &rule["destination"]["properties"]["ports"]["items"],
    ] {
        assert_eq!(field["x-kubernetes-int-or-string"], true, "{field}");
        assert!(field.get("type").is_none(), "{field}");
    }
}

#[test]
fn descriptions_carry_the_defaults() {
    let c = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "IPPool")
        .unwrap();
    let props = &schema_of(&c)["properties"]["spec"]["properties"];
    let bs = props["blockSize"]["description"].as_str().unwrap();
    assert!(
        bs.contains("default 26") && bs.contains("default 122"),
        "{bs}"
    );
    assert_eq!(props["nodeSelector"]["default"], "all()");
    assert_eq!(props["ipipMode"]["default"], "Never");
}

#[test]
fn committed_crds_are_up_to_date() {
    let dir = crd_dir();
    let regen = "run `cargo run -p tartan-api --bin tartan-crdgen` from the workspace root to regenerate deploy/crds/";
    let mut wanted = std::collections::BTreeSet::new();
    for c in crds() {
        let name = crd::file_name(&c);
        assert!(name.ends_with(".tartan.dev.yaml"), "{name}");
        let text = crd::to_yaml(&c).unwrap();
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} is missing; {regen}", path.display()));
        assert!(
            committed == text,
            "{} differs from what the types generate; {regen}",
            path.display()
        );
        // The YAML reads back as the same CRD.
        let back: Value = serde_saphyr::from_str(&committed).unwrap();
        assert_eq!(back, serde_json::to_value(&c).unwrap(), "{name}");
        wanted.insert(name);
    }
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            wanted.contains(&name),
            "{name} in {} is not generated by any type; remove it or {regen}",
            dir.display()
        );
    }
}

/// `tartan-crdgen` writes the files and `--check` sees what is missing,
/// changed or extra.
#[test]
fn crdgen_writes_and_checks() {
    let dir = std::env::temp_dir().join(format!("tartan-crdgen-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bin = env!("CARGO_BIN_EXE_tartan-crdgen");
    let run = |args: &[&str]| {
        let out = Command::new(bin).args(args).arg(&dir).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run(&["--check"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("ippools.tartan.dev.yaml is missing"), "{out}");

    assert_eq!(run(&[]).0, Some(0));
    for c in crds() {
        let written = std::fs::read_to_string(dir.join(crd::file_name(&c))).unwrap();
        assert_eq!(written, crd::to_yaml(&c).unwrap());
    }
    assert_eq!(run(&["--check"]).0, Some(0));

    std::fs::write(dir.join("bgppeers.tartan.dev.yaml"), "changed\n").unwrap();
    std::fs::write(dir.join("old.tartan.dev.yaml"), "gone kind\n").unwrap();
    let (code, out) = run(&["--check"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("bgppeers.tartan.dev.yaml differs"), "{out}");
    assert!(
        out.contains("old.tartan.dev.yaml is not generated any more"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
