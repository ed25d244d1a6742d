//! The bounds of a JSON patch: operations that would nest the document
//! past serde_json's depth, copies past 3 MiB and more than 10,000
//! operations are refused; what stays within them applies.

use serde_json::{Value, json};

use super::limits::{MAX_COPY_BYTES, MAX_DEPTH, depth};
use super::*;

/// On a thread with a Tokio worker's 2 MiB stack, where a document
/// thousands of levels deep overflows whatever walks it recursively.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the test thread panicked")
}

/// `{"x":{"x":…{}}}`, `levels` deep.
fn nested(levels: usize) -> Value {
    (1..levels).fold(json!({}), |v, _| json!({ "x": v }))
}

fn invalid(r: Result<Value, PatchError>) -> String {
    match r {
        Err(PatchError::Invalid(m)) => m,
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[test]
fn moves_cannot_nest_the_document_deeper_and_deeper() {
    on_small_stack(|| {
        // Each triple puts /d one level deeper: 3,000 of them would make
        // 3,000 levels.
        let triple = [
            json!({"op":"add","path":"/w","value":{}}),
            json!({"op":"move","from":"/d","path":"/w/d"}),
            json!({"op":"move","from":"/w","path":"/d"}),
        ];
        let ops = Value::Array(triple.iter().cycle().take(9_000).cloned().collect());
        let m = invalid(json_patch(&json!({"d":{}}), &ops));
        assert_eq!(
            m,
            "the patched object would nest 128 levels deep; at most 127 are allowed"
        );
        // Each triple carries /d 101 levels deeper, under a 100-level
        // value the patch adds: 1,000 of them, 101,000 levels.
        let under = format!("/w{}/d", "/x".repeat(99));
        let triple = [
            json!({"op":"add","path":"/w","value":nested(100)}),
            json!({"op":"move","from":"/d","path":under}),
            json!({"op":"move","from":"/w","path":"/d"}),
        ];
        let ops = Value::Array(triple.iter().cycle().take(3_000).cloned().collect());
        let m = invalid(json_patch(&json!({"d":{}}), &ops));
        assert!(m.contains("at most 127 are allowed"), "{m}");
        // Copies deepen too.
        let ops = Value::Array(vec![json!({"op":"copy","from":"","path":"/d"}); 200]);
        let m = invalid(json_patch(&json!({"d":1}), &ops));
        assert!(m.contains("at most 127 are allowed"), "{m}");
    });
}

#[test]
fn the_depth_limit_is_serde_jsons() {
    let doc = json!({});
    let deepest = json_patch(
        &doc,
        &json!([{"op":"add","path":"/a","value":nested(MAX_DEPTH - 1)}]),
    )
    .unwrap();
    assert_eq!(depth(&deepest), MAX_DEPTH);
    // What the patch built, a request body could have carried.
    let text = deepest.to_string();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), deepest);
    assert!(serde_json::from_str::<Value>(&format!("[{text}]")).is_err());
    // One level more is refused, in each operation that places a value.
    let add = json!([{"op":"add","path":"/a","value":nested(MAX_DEPTH)}]);
    invalid(json_patch(&doc, &add));
    let replace = json!([{"op":"replace","path":"","value":[nested(MAX_DEPTH)]}]);
    invalid(json_patch(&doc, &replace));
    let copy = json!([{"op":"copy","from":"/a","path":"/a/x/y"}]);
    invalid(json_patch(&deepest, &copy));
    let m = invalid(json_patch(
        &json!({"b":nested(MAX_DEPTH - 1), "c":{}}),
        &json!([{"op":"move","from":"/b","path":"/c/b"}]),
    ));
    assert!(m.contains("128 levels deep"), "{m}");
    // Moving shallower is always allowed, whatever the depth.
    let too_deep = json!({"a":{"b":nested(200)}});
    let r = json_patch(&too_deep, &json!([{"op":"move","from":"/a/b","path":"/b"}])).unwrap();
    assert_eq!(depth(&r), 201);
}

#[test]
fn copies_add_at_most_three_mebibytes() {
    // Each copy of the list into itself doubles it: forty would make
    // 2^40 copies of its string.
    let ops = Value::Array(vec![json!({"op":"copy","from":"/a","path":"/a/-"}); 40]);
    let m = invalid(json_patch(&json!({"a":["k".repeat(1000)]}), &ops));
    assert!(
        m.starts_with("Unable to complete the copy, the accumulated size increase of copy is "),
        "{m}"
    );
    assert!(m.ends_with(", exceeding the limit 3145728"), "{m}");
    // Three copies of a million-character string are 3,000,006 bytes.
    let doc = json!({"s":"k".repeat(1_000_000)});
    let copy = |to: &str| json!({"op":"copy","from":"/s","path":to});
    let three = json!([copy("/a"), copy("/b"), copy("/c")]);
    assert_eq!(json_patch(&doc, &three).unwrap()["c"], doc["s"]);
    let four = json!([copy("/a"), copy("/b"), copy("/c"), copy("/d")]);
    let m = invalid(json_patch(&doc, &four));
    assert_eq!(
        m,
        format!(
            "Unable to complete the copy, the accumulated size increase of copy is 4000008, exceeding the limit {MAX_COPY_BYTES}"
        )
    );
}

#[test]
fn at_most_ten_thousand_operations() {
    let test = json!({"op":"test","path":"/a","value":1});
    let doc = json!({"a":1});
    let ops = Value::Array(vec![test.clone(); 10_000]);
    assert_eq!(json_patch(&doc, &ops), Ok(doc.clone()));
    let ops = Value::Array(vec![test; 10_001]);
    assert_eq!(
        json_patch(&doc, &ops),
        Err(PatchError::TooLarge(
            "The allowed maximum operations in a JSON patch is 10000, got 10001".into()
        ))
    );
}
