//! Properties of the patch formats over arbitrary JSON: no panic, and a
//! result no deeper (and, but for copies, no larger) than its inputs
//! allow. Keys and paths come from a small vocabulary so that patches
//! meet what their targets hold.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::limits::{MAX_COPY_BYTES, MAX_DEPTH, depth};
use super::*;
use crate::apply::apply;
use crate::fields::Writer;

const KEYS: &[&str] = &[
    "a",
    "b",
    "0",
    "1",
    "-",
    "x",
    "name",
    "metadata",
    "spec",
    "containers",
    "finalizers",
    "managedFields",
    "$patch",
    "$retainKeys",
    "$deleteFromPrimitiveList/finalizers",
    "$setElementOrder/containers",
];

fn key() -> impl Strategy<Value = String> {
    proptest::sample::select(KEYS).prop_map(String::from)
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
        prop_oneof![
            Just("replace"),
            Just("delete"),
            Just("merge"),
            Just("a"),
            Just("x")
        ]
        .prop_map(Value::from),
        key().prop_map(Value::from),
    ]
}

/// Any JSON at most 6 levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn pointer() -> impl Strategy<Value = String> {
    proptest::collection::vec(key(), 0..4).prop_map(|ks| {
        ks.iter()
            .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
            .collect()
    })
}

fn operation() -> impl Strategy<Value = Value> {
    let op = proptest::sample::select(vec![
        "add", "remove", "replace", "move", "copy", "test", "frob",
    ]);
    (op, pointer(), pointer(), json_value(), any::<bool>()).prop_map(
        |(op, path, from, value, whole)| {
            let mut o = json!({"op": op, "path": path, "from": from, "value": value});
            if !whole {
                // Sometimes a field is missing.
                o.as_object_mut()
                    .unwrap()
                    .remove(["from", "value", "path"][path.len() % 3]);
            }
            o
        },
    )
}

/// Operations that nest and copy: what a hostile patch repeats.
fn deepening() -> impl Strategy<Value = Value> {
    proptest::sample::select(vec![
        json!({"op":"add","path":"/w","value":{}}),
        json!({"op":"add","path":"/w","value":{"x":{"x":{"x":{}}}}}),
        json!({"op":"move","from":"/d","path":"/w/d"}),
        json!({"op":"move","from":"/d","path":"/w/x/x/d"}),
        json!({"op":"move","from":"/w","path":"/d"}),
        json!({"op":"copy","from":"","path":"/d"}),
        json!({"op":"copy","from":"/d","path":"/w/d"}),
        json!({"op":"copy","from":"","path":"/c"}),
        json!({"op":"remove","path":"/c"}),
    ])
}

fn size(v: &Value) -> usize {
    v.to_string().len()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merge_patch_is_bounded_by_its_inputs(t in json_value(), p in json_value()) {
        let r = merge_patch(&t, &p);
        prop_assert!(depth(&r) <= depth(&t).max(depth(&p)));
        prop_assert!(size(&r) <= size(&t) + size(&p));
    }

    #[test]
    fn json_patch_never_panics_and_stays_bounded(
        doc in json_value(),
        ops in proptest::collection::vec(operation(), 0..12),
    ) {
        let ops = Value::Array(ops);
        if let Ok(r) = json_patch(&doc, &ops) {
            prop_assert!(depth(&r) <= depth(&doc).max(MAX_DEPTH));
            prop_assert!(size(&r) <= size(&doc) + size(&ops) + MAX_COPY_BYTES);
        }
    }

    #[test]
    fn strategic_merge_is_bounded_by_its_inputs(
        kind in proptest::sample::select(vec!["Pod", "ConfigMap", "Service", "Node"]),
        t in json_value(),
        p in json_value(),
    ) {
        if let Ok(r) = strategic_merge(kind, &t, &p) {
            prop_assert!(depth(&r) <= depth(&t).max(depth(&p)));
        }
    }

    /// Apply adds managedFields: the applied fields' paths, nested in
    /// `metadata.managedFields[i].fieldsV1`, five levels below the root.
    #[test]
    fn apply_is_bounded_by_its_inputs(
        live in proptest::option::of(json_value()),
        config in json_value(),
        force in any::<bool>(),
    ) {
        let w = Writer { manager: "m", api_version: "v1", subresource: None, time: "t" };
        if let Ok(r) = apply(live.as_ref(), &config, &w, force) {
            let inputs = live.as_ref().map_or(0, depth).max(depth(&config));
            prop_assert!(depth(&r) <= inputs + 5, "{} from {}", depth(&r), inputs);
        }
    }
}

proptest! {
    // Few cases: most of them copy the 3 MiB the budget allows.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hostile_json_patches_stay_bounded(
        ops in proptest::collection::vec(deepening(), 0..600),
    ) {
        let doc = json!({"d":{}});
        let ops = Value::Array(ops);
        match json_patch(&doc, &ops) {
            Ok(r) => {
                prop_assert!(depth(&r) <= MAX_DEPTH);
                prop_assert!(size(&r) <= size(&doc) + size(&ops) + MAX_COPY_BYTES);
            }
            Err(PatchError::Invalid(_)) => {}
            Err(e) => prop_assert!(false, "{:?}", e),
        }
    }
}
