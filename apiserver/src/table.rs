//! The `Table` form of lists, objects and watch events
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! kubectl asks for to print its default output: the columns the API
//! server gives each kind here (NAME and AGE; CustomResourceDefinitions
//! NAME and CREATED AT; ConfigMaps DATA; Namespaces STATUS), and each row
//! with the object's metadata (or the whole object with
//! `includeObject=Object`). Pure.

use serde_json::{Value, json};

use crate::clock::{human_duration, parse_rfc3339};
use crate::resources::Served;

/// Whether an Accept header asks for tables first.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.replace(' ', "").contains("as=Table"))
}

fn column(name: &str, kind: &str, format: &str, description: &str) -> Value {
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": 0})
}

fn columns(served: &Served) -> Vec<Value> {
    let name = column(
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace.",
    );
    let age = column(
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    match (served.kind, served.name.as_str()) {
        (None, _) => vec![
            name,
            column(
                "Created At",
                "date",
                "",
                "CreationTimestamp is a timestamp representing the server time when this object was created.",
            ),
        ],
        (Some(_), "ConfigMap") if served.group.is_empty() => vec![
            name,
            column(
                "Data",
                "string",
                "",
                "Data contains the configuration data.",
            ),
            age,
        ],
        (Some(_), "Namespace") if served.group.is_empty() => vec![
            name,
            column("Status", "string", "", "The status of the namespace"),
            age,
        ],
        _ => vec![name, age],
    }
}

fn cells(served: &Served, obj: &Value, now: i64) -> Vec<Value> {
    let name = obj.pointer("/metadata/name").cloned().unwrap_or_default();
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str);
    let age = created
        .and_then(parse_rfc3339)
        .map_or_else(|| "<unknown>".to_string(), |t| human_duration(now - t));
    match (served.kind, served.name.as_str()) {
        (None, _) => vec![name, created.unwrap_or_default().into()],
        (Some(_), "ConfigMap") if served.group.is_empty() => {
            let count = |k: &str| obj.get(k).and_then(Value::as_object).map_or(0, |m| m.len());
            vec![
                name,
                (count("data") + count("binaryData")).into(),
                age.into(),
            ]
        }
        (Some(_), "Namespace") if served.group.is_empty() => {
            let phase = obj
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("Active");
            vec![name, phase.into(), age.into()]
        }
        _ => vec![name, age.into()],
    }
}

fn row(served: &Served, obj: &Value, now: i64, whole: bool) -> Value {
    let object = if whole {
        obj.clone()
    } else {
        json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })
    };
    json!({"cells": cells(served, obj, now), "object": object})
}

/// A Table of `items` read at `resource_version`; `whole`: rows carry
/// whole objects (`includeObject=Object`).
pub fn table(
    served: &Served,
    items: &[Value],
    resource_version: &str,
    now: i64,
    whole: bool,
) -> Value {
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns(served),
        "rows": items.iter().map(|o| row(served, o, now, whole)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::rfc3339;
    use crate::resources::by_type;

    #[test]
    fn kubectl_asks_for_tables_first() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
        assert!(!wants_table(
            "application/json, application/json;as=Table;v=v1;g=meta.k8s.io"
        ));
    }

    #[test]
    fn rows_carry_names_ages_and_kind_columns() {
        let now = 1_795_706_418;
        let pool = by_type("tartan.dev/v1", "IPPool").unwrap();
        let o = json!({"metadata":{"name":"p","creationTimestamp": rfc3339(now - 300)}});
        let t = table(&pool, std::slice::from_ref(&o), "7", now, false);
        assert_eq!(t["rows"][0]["cells"], json!(["p", "5m"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["columnDefinitions"][1]["name"], "Age");
        let cm = by_type("v1", "ConfigMap").unwrap();
        let c = json!({"metadata":{"name":"c"},"data":{"a":"1","b":"2"}});
        let t = table(&cm, &[c], "7", now, true);
        assert_eq!(t["rows"][0]["cells"], json!(["c", 2, "<unknown>"]));
        assert_eq!(t["rows"][0]["object"]["data"]["a"], "1");
    }
}
