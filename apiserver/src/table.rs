//! The `Table` form of lists, objects and watch events
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! kubectl asks for to print its default output: each kind's columns
//! ([`crate::columns`]), and each row with the object's metadata (or the
//! whole object with `includeObject=Object`). Pure.

use serde_json::{Value, json};

use crate::columns::{cells, columns};
use crate::resources::Served;

/// Whether an Accept header asks for tables first.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.replace(' ', "").contains("as=Table"))
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
