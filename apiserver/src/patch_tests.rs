//! The patch formats against their RFCs' own examples, and the strategic
//! merge patches kubectl sends for the built-in kinds.

use serde_json::json;

use super::*;

#[test]
fn merge_patch_follows_rfc_7386_appendix_a() {
    let cases = [
        (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
        (json!({"a":"b"}), json!({"a":null}), json!({})),
        (
            json!({"a":"b","b":"c"}),
            json!({"a":null}),
            json!({"b":"c"}),
        ),
        (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
        (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
        (
            json!({"a":{"b":"c"}}),
            json!({"a":{"b":"d","c":null}}),
            json!({"a":{"b":"d"}}),
        ),
        (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
        (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
        (json!({"a":"b"}), json!(["c"]), json!(["c"])),
        (json!({"a":"foo"}), json!(null), json!(null)),
        (json!({"a":"foo"}), json!("bar"), json!("bar")),
        (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
        (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
        (
            json!({}),
            json!({"a":{"bb":{"ccc":null}}}),
            json!({"a":{"bb":{}}}),
        ),
    ];
    for (target, patch, want) in cases {
        assert_eq!(merge_patch(&target, &patch), want, "{target} + {patch}");
    }
}

#[test]
fn json_patch_follows_rfc_6902_appendix_a() {
    let ok = [
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz","value":"qux"}]),
            json!({"baz":"qux","foo":"bar"}),
        ),
        (
            json!({"foo":["bar","baz"]}),
            json!([{"op":"add","path":"/foo/1","value":"qux"}]),
            json!({"foo":["bar","qux","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"remove","path":"/baz"}]),
            json!({"foo":"bar"}),
        ),
        (
            json!({"foo":["bar","qux","baz"]}),
            json!([{"op":"remove","path":"/foo/1"}]),
            json!({"foo":["bar","baz"]}),
        ),
        (
            json!({"baz":"qux","foo":"bar"}),
            json!([{"op":"replace","path":"/baz","value":"boo"}]),
            json!({"baz":"boo","foo":"bar"}),
        ),
        (
            json!({"foo":{"bar":"baz","waldo":"fred"},"qux":{"corge":"grault"}}),
            json!([{"op":"move","from":"/foo/waldo","path":"/qux/thud"}]),
            json!({"foo":{"bar":"baz"},"qux":{"corge":"grault","thud":"fred"}}),
        ),
        (
            json!({"foo":["all","grass","cows","eat"]}),
            json!([{"op":"move","from":"/foo/1","path":"/foo/3"}]),
            json!({"foo":["all","cows","eat","grass"]}),
        ),
        (
            json!({"baz":"qux","foo":["a",2,"c"]}),
            json!([{"op":"test","path":"/baz","value":"qux"},{"op":"test","path":"/foo/1","value":2}]),
            json!({"baz":"qux","foo":["a",2,"c"]}),
        ),
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/child","value":{"grandchild":{}}}]),
            json!({"foo":"bar","child":{"grandchild":{}}}),
        ),
        (
            json!({"foo":["bar"]}),
            json!([{"op":"add","path":"/foo/-","value":["abc","def"]}]),
            json!({"foo":["bar",["abc","def"]]}),
        ),
        (
            json!({"/":9,"~1":10}),
            json!([{"op":"test","path":"/~01","value":10}]),
            json!({"/":9,"~1":10}),
        ),
        (
            json!({"a":1}),
            json!([{"op":"copy","from":"/a","path":"/b"}]),
            json!({"a":1,"b":1}),
        ),
    ];
    for (doc, ops, want) in ok {
        assert_eq!(json_patch(&doc, &ops), Ok(want), "{doc} + {ops}");
    }
    let failing = [
        (
            json!({"baz":"qux"}),
            json!([{"op":"test","path":"/baz","value":"bar"}]),
        ),
        (
            json!({"foo":"bar"}),
            json!([{"op":"add","path":"/baz/bat","value":"qux"}]),
        ),
        (
            json!({"foo":["bar"]}),
            json!([{"op":"add","path":"/foo/2","value":1}]),
        ),
        (
            json!({"foo":["bar"]}),
            json!([{"op":"remove","path":"/foo/01"}]),
        ),
        (
            json!({"foo":1}),
            json!([{"op":"replace","path":"/nope","value":1}]),
        ),
        (json!({"foo":1}), json!([{"op":"frob","path":"/foo"}])),
        (
            json!({"foo":1}),
            json!([{"op":"add","path":"foo","value":1}]),
        ),
        (
            json!({"foo":{}}),
            json!([{"op":"move","from":"/foo","path":"/foo/x"}]),
        ),
        (json!({"foo":1}), json!({"op":"add"})),
    ];
    for (doc, ops) in failing {
        assert!(json_patch(&doc, &ops).is_err(), "{doc} + {ops} must fail");
    }
    // A failing operation leaves nothing half-applied: the caller keeps
    // its document.
    let doc = json!({"a":1});
    let r = json_patch(
        &doc,
        &json!([{"op":"add","path":"/b","value":2},{"op":"test","path":"/a","value":3}]),
    );
    assert!(r.is_err());
    assert_eq!(doc, json!({"a":1}));
}

#[test]
fn strategic_merge_merges_keyed_lists_and_obeys_directives() {
    let pod = json!({"metadata":{"finalizers":["a"]},"spec":{"containers":[
        {"name":"web","image":"nginx:1","env":[{"name":"A","value":"1"}]},
        {"name":"side","image":"busybox"}]}});
    let patch = json!({"metadata":{"finalizers":["b","a"]},"spec":{
        "$setElementOrder/containers":[{"name":"web"},{"name":"side"}],
        "containers":[{"name":"web","image":"nginx:2","env":[{"name":"B","value":"2"}]},
                      {"name":"side","$patch":"delete"},
                      {"name":"new","image":"x"}]}});
    let got = strategic_merge("Pod", &pod, &patch).unwrap();
    assert_eq!(
        got,
        json!({"metadata":{"finalizers":["a","b"]},"spec":{"containers":[
            {"name":"web","image":"nginx:2","env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},
            {"name":"new","image":"x"}]}})
    );
    // A list without a merge key is replaced; maps merge; null deletes.
    let cm = json!({"data":{"a":"1","b":"2"},"metadata":{"labels":{"x":"y"}}});
    let got = strategic_merge(
        "ConfigMap",
        &cm,
        &json!({"data":{"a":null,"c":"3"},"metadata":{"labels":{"$patch":"replace","z":"w"}}}),
    )
    .unwrap();
    assert_eq!(
        got,
        json!({"data":{"b":"2","c":"3"},"metadata":{"labels":{"z":"w"}}})
    );
    let got = strategic_merge(
        "ConfigMap",
        &json!({"metadata":{"finalizers":["a","b"]},"spec":{"x":1,"y":2}}),
        &json!({"metadata":{"$deleteFromPrimitiveList/finalizers":["a"]},"spec":{"$retainKeys":["y"],"y":3}}),
    )
    .unwrap();
    assert_eq!(got, json!({"metadata":{"finalizers":["b"]},"spec":{"y":3}}));
    // A keyed element without its key is refused, an unknown directive too.
    assert!(strategic_merge("Pod", &pod, &json!({"spec":{"containers":[{"image":"x"}]}})).is_err());
    assert!(strategic_merge("Pod", &pod, &json!({"spec":{"$patch":"frob"}})).is_err());
}
