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

/// Why `bytes` do not read as an object, naming the field at fault where
/// there is one (`metadata.labels[tier]: invalid type: …`). Only for the
/// error path of [`from_slice`]: it reads the value a second time.
pub fn why_unreadable(bytes: &[u8], first: &serde_json::Error) -> String {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, DynamicObject>(&mut de) {
        Err(e)
            if e.path().iter().next().is_some()
                && !e
                    .path()
                    .iter()
                    .any(|s| matches!(s, serde_path_to_error::Segment::Unknown)) =>
        {
            let (field, why) = crate::validate::strict::parse_problem(&e, "");
            format!("{field}: {why}")
        }
        _ => first.to_string(),
    }
}

/// As [`from_slice`], for a consumer that reads only the metadata (and
/// the type) of an object and of the rest only what shape each top-level
/// field has: every other field that is an object or a list is read over
/// but kept empty (`{}`, `[]`), a scalar is kept. A kubelet's heartbeat
/// rewrites a Node's whole status; felix and bgpd read its metadata, and
/// building the status tree was most of their cost per heartbeat. Input
/// that is not a JSON object reads as with [`from_slice`].
pub fn metadata_from_slice(bytes: &[u8]) -> serde_json::Result<DynamicObject> {
    match serde_json::from_slice::<Outline>(bytes) {
        Ok(Outline(map)) => from_map(map),
        Err(_) => from_slice(bytes),
    }
}

/// A JSON object with its metadata and type whole and every other field
/// as a [`Skeleton`].
struct Outline(Map<String, Value>);

impl<'de> serde::Deserialize<'de> for Outline {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Outline;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Outline, A::Error> {
                let mut out = Map::new();
                while let Some(k) = m.next_key::<String>()? {
                    let v = match k.as_str() {
                        "metadata" | "apiVersion" | "kind" => m.next_value::<Value>()?,
                        _ => m.next_value::<Skeleton<true>>()?.0,
                    };
                    out.insert(k, v);
                }
                Ok(Outline(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON value read through, kept as its shape when `KEEP`: an object or
/// a list empty, a scalar as it is. Without `KEEP` (what is inside an
/// object or a list) nothing is kept, but text is still checked as the
/// full reading checks it (valid UTF-8, no lone surrogate escape; serde's
/// `IgnoredAny` skips it unchecked): what is not readable whole is not
/// readable as an outline either.
struct Skeleton<const KEEP: bool>(Value);

impl<'de, const KEEP: bool> serde::Deserialize<'de> for Skeleton<KEEP> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{MapAccess, SeqAccess};
        struct V<const KEEP: bool>;
        fn kept<const KEEP: bool>(v: impl FnOnce() -> Value) -> Skeleton<KEEP> {
            Skeleton(if KEEP { v() } else { Value::Null })
        }
        impl<'de, const KEEP: bool> serde::de::Visitor<'de> for V<KEEP> {
            type Value = Skeleton<KEEP>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
                Ok(kept(|| Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
                Ok(kept(|| Value::from(n)))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
                Ok(kept(|| Value::from(n)))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
                Ok(kept(|| Value::from(n)))
            }
            fn visit_str<E>(self, t: &str) -> Result<Self::Value, E> {
                Ok(kept(|| Value::String(t.to_string())))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(kept(|| Value::Null))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(kept(|| Value::Null))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<Skeleton<false>>()?.is_some() {}
                Ok(kept(|| Value::Array(Vec::new())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m
                    .next_entry::<Skeleton<false>, Skeleton<false>>()?
                    .is_some()
                {}
                Ok(kept(|| Value::Object(Map::new())))
            }
        }
        d.deserialize_any(V::<KEEP>)
    }
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
