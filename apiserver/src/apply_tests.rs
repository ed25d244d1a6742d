//! Server-side apply: ownership, removal of fields an applier drops,
//! conflicts in the API server's words, and forcing.

use serde_json::{Value, json};

use super::*;
use crate::fields::{Writer, entries, track_update};

fn w(manager: &str) -> Writer<'_> {
    Writer {
        manager,
        api_version: "tartan.dev/v1",
        subresource: None,
        time: "2026-11-26T15:00:00Z",
    }
}

fn pool(cidr: &str) -> Value {
    json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},
           "spec":{"cidr":cidr,"natOutgoing":true}})
}

#[test]
fn apply_creates_then_owns_and_drops_what_it_leaves_out() {
    let created = apply(None, &pool("10.0.0.0/16"), &w("kubectl"), false).unwrap();
    assert_eq!(created["spec"]["cidr"], "10.0.0.0/16");
    let e = entries(&created);
    assert_eq!(e.len(), 1);
    assert_eq!(
        (e[0].manager.as_str(), e[0].operation.as_str()),
        ("kubectl", "Apply")
    );
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec":{"f:cidr":{},"f:natOutgoing":{}}})
    );
    // The same manager drops natOutgoing: it goes.
    let smaller = json!({"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"},
                         "spec":{"cidr":"10.0.0.0/16"}});
    let after = apply(Some(&created), &smaller, &w("kubectl"), false).unwrap();
    assert_eq!(after["spec"], json!({"cidr":"10.0.0.0/16"}));
}

#[test]
fn another_manager_conflicts_unless_it_agrees_or_forces() {
    let live = apply(None, &pool("10.0.0.0/16"), &w("kubectl"), false).unwrap();
    // The same values: no conflict, both own them.
    let shared = apply(Some(&live), &pool("10.0.0.0/16"), &w("other"), false).unwrap();
    assert_eq!(entries(&shared).len(), 2);
    // A different value: refused as the API server refuses it.
    let err = apply(Some(&live), &pool("10.1.0.0/16"), &w("other"), false).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl\": .spec.cidr"
    );
    assert_eq!(err.causes()[0]["field"], ".spec.cidr");
    // Forced: the field changes hands.
    let forced = apply(Some(&live), &pool("10.1.0.0/16"), &w("other"), true).unwrap();
    assert_eq!(forced["spec"]["cidr"], "10.1.0.0/16");
    // Only the field in conflict: natOutgoing (the same value) stays shared.
    let e = entries(&forced);
    let kubectl = e.iter().find(|e| e.manager == "kubectl").unwrap();
    let owns = |f: &str| {
        kubectl
            .fields
            .contains(&vec!["spec".to_string(), f.to_string()])
    };
    assert!(!owns("cidr") && owns("natOutgoing"), "{kubectl:?}");
    let other = e.iter().find(|e| e.manager == "other").unwrap();
    assert_eq!(other.fields.len(), 2);
}

#[test]
fn updaters_own_what_they_change_and_are_named_with_their_version() {
    let live = apply(None, &pool("10.0.0.0/16"), &w("kubectl"), false).unwrap();
    let mut edited = live.clone();
    edited["spec"]["cidr"] = "10.2.0.0/16".into();
    edited["spec"]["natOutgoing"] = Value::Null;
    edited["spec"]
        .as_object_mut()
        .unwrap()
        .remove("natOutgoing");
    track_update(Some(&live), &mut edited, &w("kubectl-edit"));
    let e = entries(&edited);
    let kubectl = e.iter().find(|e| e.manager == "kubectl");
    assert!(kubectl.is_none(), "kubectl owns nothing any more: {e:?}");
    let err = apply(Some(&edited), &pool("10.0.0.0/16"), &w("kubectl"), false).unwrap_err();
    assert_eq!(
        err.message(),
        "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using tartan.dev/v1: .spec.cidr"
    );
    let two = apply(
        Some(&edited),
        &json!({"metadata":{"name":"p","labels":{"a":"b"}},"spec":{"cidr":"x"}}),
        &w("third"),
        false,
    );
    assert!(two.is_err());
}

#[test]
fn several_conflicts_are_listed_by_manager() {
    let c = Conflicts(vec![
        ("\"b\"".into(), vec!["spec".into(), "x".into()]),
        ("\"a\"".into(), vec!["spec".into(), "y".into()]),
        ("\"b\"".into(), vec!["spec".into(), "z".into()]),
    ]);
    assert_eq!(
        c.message(),
        "Apply failed with 3 conflicts: conflicts with \"a\":\n- .spec.y\nconflicts with \"b\":\n- .spec.x\n- .spec.z"
    );
}
