//! The one-pass reading and writing give what serde's derived ones give,
//! for every object shape: typed or not, half-typed, odd metadata, and
//! input that is no object at all.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn serde_read(bytes: &[u8]) -> serde_json::Result<DynamicObject> {
    serde_json::from_slice(bytes)
}

type Read = serde_json::Result<DynamicObject>;

/// Two readings of `v` give the same object, or both refuse; the objects.
fn same(v: &Value, what: &str, a: Read, b: Read) -> Option<(DynamicObject, DynamicObject)> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "{v}");
            Some((a, b))
        }
        (Err(_), Err(_)) => None,
        (a, b) => panic!("{v}: {what} {a:?}, the other {b:?}"),
    }
}

/// Both readings agree: the same object, or both refuse.
fn agree(v: &Value) {
    let bytes = serde_json::to_vec(v).unwrap();
    if let Some((a, b)) = same(v, "one-pass", from_slice(&bytes), serde_read(&bytes)) {
        let (x, y) = (to_value(a).unwrap(), serde_json::to_value(&b).unwrap());
        assert_eq!(x, y, "{v}");
    }
    same(
        v,
        "one-pass",
        from_value(v.clone()),
        serde_json::from_value::<DynamicObject>(v.clone()),
    );
}

#[test]
fn a_node_as_a_kubelet_writes_it() {
    let v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": "7",
                     "labels": {"kubernetes.io/hostname": "n1"},
                     "annotations": {"tartan.dev/bgp-ipv4-address": "10.0.0.1/24"},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"podCIDRs": ["10.244.0.0/24"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                   "conditions": [{"type": "Ready", "status": "True"}]}
    });
    agree(&v);
    let o = from_value(v).unwrap();
    assert_eq!(o.types.as_ref().unwrap().kind, "Node");
    assert_eq!(o.metadata.name.as_deref(), Some("n1"));
    assert!(o.data.get("metadata").is_none() && o.data.get("kind").is_none());
    assert_eq!(o.data["status"]["addresses"][0]["address"], "10.0.0.1");
}

#[test]
fn odd_shapes_read_as_serde_reads_them() {
    for v in [
        json!({"metadata": {"name": "a"}}),
        json!({"apiVersion": "v1", "metadata": {"name": "a"}}),
        json!({"kind": "Node", "metadata": {}}),
        json!({"apiVersion": 1, "kind": "Node", "metadata": {}}),
        json!({"apiVersion": "v1", "kind": null, "metadata": {}}),
        json!({"apiVersion": "v1", "kind": "Node"}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": null}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": "x"}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"labels": "x"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": 3}}),
        json!({"metadata": {"name": "a"}, "spec": null, "data": {"x": 1}}),
        json!([1, 2]),
        json!("text"),
        json!(null),
        json!({}),
    ] {
        agree(&v);
    }
    assert!(from_slice(b"{not json").is_err());
    assert!(from_slice(b"").is_err());
}

/// A JSON value of a few levels.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9./-]{0,12}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Metadata that reads, or a value in its place that may not.
fn metadata() -> impl Strategy<Value = Value> {
    let labels = prop::collection::btree_map("[a-z./]{1,10}", "[a-z0-9]{0,6}", 0..3);
    prop_oneof![
        3 => ("[a-z0-9-]{1,10}", proptest::option::of("[a-z]{1,6}"), labels, proptest::option::of("[0-9]{1,4}"))
            .prop_map(|(name, ns, labels, rv)| {
                let mut m = json!({"name": name, "labels": labels});
                if let Some(ns) = ns { m["namespace"] = json!(ns); }
                if let Some(rv) = rv { m["resourceVersion"] = json!(rv); }
                m
            }),
        1 => json_value(),
    ]
}

fn object() -> impl Strategy<Value = Value> {
    let text_or_any =
        || prop_oneof![3 => "[a-zA-Z0-9/.]{1,10}".prop_map(Value::String), 1 => json_value()];
    (
        proptest::option::of(text_or_any()),
        proptest::option::of(text_or_any()),
        proptest::option::of(metadata()),
        prop::collection::btree_map("[a-zA-Z]{1,8}", json_value(), 0..4),
    )
        .prop_map(|(api, kind, meta, rest)| {
            let mut m: serde_json::Map<String, Value> = rest.into_iter().collect();
            if let Some(a) = api {
                m.insert("apiVersion".into(), a);
            }
            if let Some(k) = kind {
                m.insert("kind".into(), k);
            }
            if let Some(md) = meta {
                m.insert("metadata".into(), md);
            }
            Value::Object(m)
        })
}

/// `v` with every top-level field but the metadata and the type reduced
/// to its shape, as [`metadata_from_slice`] reads it.
fn outline(v: &Value) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let shape = |x: &Value| match x {
        Value::Object(_) => json!({}),
        Value::Array(_) => json!([]),
        other => other.clone(),
    };
    Value::Object(
        m.iter()
            .map(|(k, x)| match k.as_str() {
                "metadata" | "apiVersion" | "kind" => (k.clone(), x.clone()),
                _ => (k.clone(), shape(x)),
            })
            .collect(),
    )
}

/// The metadata-only reading of `v` is the full reading of its outline.
fn outlines(v: &Value) {
    let bytes = serde_json::to_vec(v).unwrap();
    same(
        v,
        "metadata-only",
        metadata_from_slice(&bytes),
        from_value(outline(v)),
    );
}

#[test]
fn a_heartbeat_reads_as_its_metadata_and_the_shape_of_the_rest() {
    let v = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": "7",
                     "labels": {"rack": "a"}, "annotations": {"x": "y"}},
        "spec": {"podCIDR": "10.0.0.0/24", "taints": [{"key": "k"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        "odd": 3, "text": "t", "none": null, "list": [1, 2]
    });
    let o = metadata_from_slice(&serde_json::to_vec(&v).unwrap()).unwrap();
    let full = from_value(v.clone()).unwrap();
    assert_eq!((o.types, o.metadata), (full.types, full.metadata));
    assert_eq!(
        o.data,
        json!({"spec": {}, "status": {}, "odd": 3, "text": "t", "none": null, "list": []})
    );
    // Not JSON, or not an object: as the full reading.
    assert!(metadata_from_slice(b"{\"spec\": {").is_err());
    // Text the full reading refuses deep in the status is refused too.
    for bad in [
        &b"{\"status\": {\"a\": [\"\\ud800\"]}}"[..],
        &b"{\"status\": {\"\xff\": 1}}"[..],
        &b"{\"status\": [\"\xc3\"]}"[..],
    ] {
        assert!(from_slice(bad).is_err(), "{bad:?}");
        assert!(metadata_from_slice(bad).is_err(), "{bad:?}");
    }
    assert!(metadata_from_slice(b"[1]").is_err() && from_slice(b"[1]").is_err());
    outlines(&v);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_object_reads_metadata_only_as_its_outline(v in object()) {
        outlines(&v);
    }

    #[test]
    fn every_object_reads_and_writes_as_with_serde(v in object()) {
        agree(&v);
    }

    #[test]
    fn any_value_reads_as_with_serde(v in json_value()) {
        agree(&v);
    }
}

#[test]
fn an_unreadable_object_names_the_field_at_fault() {
    let bad = br#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"r","labels":{"tier":7}}}"#;
    let e = from_slice(bad).unwrap_err();
    let why = why_unreadable(bad, &e);
    assert!(why.starts_with("metadata.labels"), "{why}");
    assert!(why.contains("[tier]") && why.contains("7"), "{why}");
    // Not JSON at all: the first error as it was.
    let e = from_slice(b"{not json").unwrap_err();
    assert_eq!(why_unreadable(b"{not json", &e), e.to_string());
}
