//! Field sets and their `fieldsV1` encoding.

use serde_json::json;

use super::*;

#[test]
fn leaves_skip_what_the_server_owns() {
    let obj = json!({"apiVersion":"v1","kind":"ConfigMap",
        "metadata":{"name":"c","resourceVersion":"3","labels":{"a":"1"},"annotations":{}},
        "data":{"k":"v"},"list":[1,2],"status":{"x":1}});
    let got: Vec<String> = leaves(&obj).iter().map(|p| display(p)).collect();
    assert_eq!(
        got,
        [
            ".data.k",
            ".list",
            ".metadata.annotations",
            ".metadata.labels.a"
        ]
    );
    let enc = to_fields_v1(&leaves(&obj));
    assert_eq!(
        enc,
        json!({"f:data":{"f:k":{}},"f:list":{},"f:metadata":{"f:annotations":{},"f:labels":{"f:a":{}}}})
    );
    assert_eq!(from_fields_v1(&enc), leaves(&obj));
    // A real server's list keys end the path at the list.
    let real = json!({"f:spec":{"f:ports":{"k:{\"port\":80}":{".":{},"f:port":{}}}}});
    assert_eq!(
        from_fields_v1(&real)
            .into_iter()
            .map(|p| display(&p))
            .collect::<Vec<_>>(),
        [".spec.ports"]
    );
}

#[test]
fn removing_a_field_prunes_emptied_maps() {
    let mut v = json!({"spec":{"a":{"b":1}},"x":1});
    remove(&mut v, &["spec".into(), "a".into(), "b".into()]);
    assert_eq!(v, json!({"x":1}));
}

#[test]
fn clients_may_set_managed_fields_themselves() {
    let w = Writer {
        manager: "m",
        api_version: "v1",
        subresource: None,
        time: "t",
    };
    let mut created = json!({"metadata":{"name":"c"},"data":{"k":"v"}});
    track_update(None, &mut created, &w);
    assert_eq!(entries(&created).len(), 1);
    let mut cleared = created.clone();
    cleared["metadata"]["managedFields"] = json!([]);
    track_update(Some(&created), &mut cleared, &w);
    assert!(cleared["metadata"].get("managedFields").is_none());
}
