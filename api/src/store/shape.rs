//! Objects between JSON and their dynamic shape ([`DynamicObject`]),
//! without going through serde's `flatten`.
//!
//! `DynamicObject` derives its serde with two flattened fields (the type
//! and the rest of the object); serde reads such a struct by first
//! buffering the whole object into an intermediate tree and then copying
//! out of it, and writes it through a map serializer. Every watch event
//! and every listed object of every agent goes through here, so that
//! doubled work is paid per Node heartbeat on every node. These functions
//! give the same objects with one pass: the JSON read into a map, the
//! metadata taken out of it (moved, not copied), the rest left as `data`.
//! What they cannot give exactly the same way (an `apiVersion` without a
//! `kind`, a type that is not text) goes through serde as before.

use ::kube::core::{ObjectMeta, TypeMeta};
use serde_json::{Map, Value};

use super::DynamicObject;

/// The object `bytes` hold, as `serde_json::from_slice::<DynamicObject>`
/// reads it.
pub fn from_slice(bytes: &[u8]) -> serde_json::Result<DynamicObject> {
    match serde_json::from_slice::<Value>(bytes)? {
        Value::Object(map) => from_map(map),
        _ => serde_json::from_slice(bytes),
    }
}

/// The object `v` holds, as `serde_json::from_value::<DynamicObject>`
/// reads it.
pub fn from_value(v: Value) -> serde_json::Result<DynamicObject> {
    match v {
        Value::Object(map) => from_map(map),
        other => serde_json::from_value(other),
    }
}

fn from_map(mut map: Map<String, Value>) -> serde_json::Result<DynamicObject> {
    let types = match (map.get("apiVersion"), map.get("kind")) {
        (None, None) => None,
        (Some(Value::String(_)), Some(Value::String(_))) => {
            let text = |v: Option<Value>| match v {
                Some(Value::String(s)) => s,
                _ => String::new(),
            };
            Some(TypeMeta {
                api_version: text(map.remove("apiVersion")),
                kind: text(map.remove("kind")),
            })
        }
        // serde's own reading decides these.
        _ => return serde_json::from_value(Value::Object(map)),
    };
    let metadata: ObjectMeta = match map.remove("metadata") {
        Some(m) => serde_json::from_value(m)?,
        None => ObjectMeta::default(),
    };
    Ok(DynamicObject {
        types,
        metadata,
        data: Value::Object(map),
    })
}

/// `o` as JSON, as `serde_json::to_value(o)` writes it (a key of `data`
/// that names a field of its own wins, as there).
pub fn to_value(o: DynamicObject) -> serde_json::Result<Value> {
    let mut map = match o.data {
        Value::Object(m) => m,
        Value::Null => Map::new(),
        // Not an object: serde's writing decides.
        data => {
            return serde_json::to_value(DynamicObject {
                types: o.types,
                metadata: o.metadata,
                data,
            });
        }
    };
    let metadata = serde_json::to_value(&o.metadata)?;
    map.entry("metadata").or_insert(metadata);
    if let Some(t) = o.types {
        map.entry("apiVersion")
            .or_insert(Value::String(t.api_version));
        map.entry("kind").or_insert(Value::String(t.kind));
    }
    Ok(Value::Object(map))
}

#[cfg(test)]
#[path = "shape_tests.rs"]
mod tests;
