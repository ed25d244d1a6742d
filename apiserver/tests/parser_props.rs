//! Properties of what the stand-in parses from a request line: label and
//! field selectors, percent-encoded query components and the RBAC
//! attributes of a path. Any printable text gets an answer, never a
//! panic, and what parses behaves consistently.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use serde_json::json;
use tartan_api::label_selector::LabelSelector;
use tartan_apiserver::fieldsel::FieldSelector;
use tartan_apiserver::request::{attributes, decode, parse_query};

/// Text made mostly of the pieces these grammars are built from.
fn grammar_text(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => proptest::sample::select(pieces).prop_map(String::from),
        1 => "[ -~]{1,3}",
    ];
    proptest::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

const LABEL_PIECES: &[&str] = &[
    "a", "b", "k8s.io/c", "=", "==", "!=", "!", ",", "(", ")", " in ", " notin ", " ", "x", "-",
    ".", "_",
];

const FIELD_PIECES: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.x",
    "=",
    "==",
    "!=",
    ",",
    " ",
    "a",
    "",
];

const PATH_PIECES: &[&str] = &[
    "/",
    "api",
    "apis",
    "v1",
    "tartan.dev",
    "namespaces",
    "ns",
    "pods",
    "p",
    "status",
    "finalize",
    "watch",
    "serviceaccounts",
    "token",
    "%2F",
    "..",
];

fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    let key = proptest::sample::select(vec!["a", "b", "k8s.io/c"]).prop_map(String::from);
    let value = proptest::sample::select(vec!["", "x", "y"]).prop_map(String::from);
    proptest::collection::btree_map(key, value, 0..3)
}

fn percent_encode(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

proptest! {
    #[test]
    fn label_selectors_parse_or_refuse(
        text in prop_oneof!["[ -~]{0,200}", grammar_text(LABEL_PIECES)],
        l in labels(),
    ) {
        if let Ok(s) = LabelSelector::parse(&text) {
            let obj = json!({"metadata": {"labels": l}});
            prop_assert_eq!(s.matches(&obj), s.matches_labels(Some(&l)), "{}", text);
        }
    }

    #[test]
    fn field_selectors_parse_or_refuse(
        text in prop_oneof!["[ -~]{0,200}", grammar_text(FIELD_PIECES)],
        name in "[a-c]{0,2}",
    ) {
        if let Ok(s) = FieldSelector::parse(&text) {
            let _ = s.matches(&json!({"metadata": {"name": name, "namespace": "ns"}}));
        } else {
            prop_assert!(!text.trim().is_empty());
        }
    }

    #[test]
    fn query_components_decode(text in "\\PC{0,200}") {
        // Encoded byte by byte, any text comes back whole.
        prop_assert_eq!(decode(&percent_encode(&text)), text.clone());
        // Without '%' and '+', nothing changes.
        if !text.contains(['%', '+']) {
            prop_assert_eq!(decode(&text), text.clone());
        }
        let _ = parse_query(Some(&text));
    }

    #[test]
    fn request_paths_have_attributes(
        method in proptest::sample::select(vec!["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
        path in prop_oneof!["[ -~]{0,200}", grammar_text(PATH_PIECES)],
        watch in any::<bool>(),
    ) {
        let query: HashMap<String, String> = if watch {
            [("watch".to_string(), "true".to_string())].into()
        } else {
            HashMap::new()
        };
        let a = attributes(method, &path, &query);
        prop_assert_eq!(&a.path, &path);
        prop_assert!(!a.verb.is_empty());
        if let Some(r) = &a.resource {
            prop_assert!(!r.resource.is_empty());
            prop_assert!(!r.version.is_empty());
        }
    }
}
