use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_operator() {
    let l = labels(&[("app", "web"), ("tier", "front-end"), ("k8s.io/zone", "a")]);
    let yes = [
        "",
        "all()",
        "has(app)",
        "!has(db)",
        "app == 'web'",
        "app == \"web\"",
        "app != 'db'",
        "missing != 'x'",
        "app in {'web', 'api'}",
        "app not in {'db'}",
        "missing not in {'x'}",
        "tier contains 'end'",
        "tier starts with 'front'",
        "tier ends with '-end'",
        "k8s.io/zone == 'a'",
        "app == 'web' && tier != 'back'",
        "app == 'db' || has(tier)",
        "!(app == 'db')",
        "!!has(app)",
        "(app == 'db' || app == 'web') && !has(db)",
        "has(all) || all()",
    ];
    for s in yes {
        assert!(sel(s).matches(&l), "{s} should select");
    }
    let no = [
        "has(db)",
        "app == 'db'",
        "missing == 'x'",
        "missing in {'x'}",
        "app in {}",
        "missing contains ''",
        "app != 'web'",
        "app == 'web' && has(db)",
        "!all()",
    ];
    for s in no {
        assert!(!sel(s).matches(&l), "{s} should not select");
    }
}

#[test]
fn precedence_and_association() {
    // && binds tighter than ||; ! tighter than &&.
    assert_eq!(
        sel("has(a) || has(b) && has(c)"),
        Selector::Or(
            Box::new(Selector::Has("a".into())),
            Box::new(Selector::And(
                Box::new(Selector::Has("b".into())),
                Box::new(Selector::Has("c".into()))
            ))
        )
    );
    assert_eq!(
        sel("!has(a) && has(b)"),
        Selector::And(
            Box::new(Selector::Not(Box::new(Selector::Has("a".into())))),
            Box::new(Selector::Has("b".into()))
        )
    );
}

#[test]
fn errors_point_at_the_column() {
    let cases = [
        ("app = 'web'", 5, "use '=='"),
        ("app == web", 8, "expected a quoted string, found \"web\""),
        ("app == 'web", 8, "string not closed"),
        ("has(app", 8, "expected ')', found the end"),
        ("app in {'a' 'b'}", 13, "expected ',' or '}'"),
        ("app", 4, "expected an operator after \"app\""),
        ("app == 'a' has(b)", 12, "expected '&&', '||' or the end"),
        ("app not {'a'}", 9, "expected 'in' after 'not'"),
        ("(has(a)", 8, "expected ')'"),
        ("app == 'a' &&", 14, "expected a label key"),
        ("tier starts 'x'", 13, "expected 'with' after 'starts'"),
        ("app == 'a' # b", 12, "unexpected character '#'"),
    ];
    for (text, column, message) in cases {
        let e = Selector::parse(text).unwrap_err();
        assert_eq!(e.column, column, "{text}: {e}");
        assert!(e.message.contains(message), "{text}: {e}");
    }
}

/// A small alphabet, so that generated labels and selectors meet.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![Just("a"), Just("b"), Just("x.io/c")].prop_map(String::from)
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![Just(""), Just("1"), Just("12"), Just("2"), Just("it's")].prop_map(String::from)
}

fn values() -> impl Strategy<Value = BTreeSet<String>> {
    proptest::collection::btree_set(value(), 0..3)
}

fn selector() -> impl Strategy<Value = Selector> {
    let leaf = prop_oneof![
        Just(Selector::All),
        Just(Selector::Global),
        key().prop_map(Selector::Has),
        (key(), value()).prop_map(|(k, v)| Selector::Eq(k, v)),
        (key(), value()).prop_map(|(k, v)| Selector::Ne(k, v)),
        (key(), values()).prop_map(|(k, v)| Selector::In(k, v)),
        (key(), values()).prop_map(|(k, v)| Selector::NotIn(k, v)),
        (key(), value()).prop_map(|(k, v)| Selector::Contains(k, v)),
        (key(), value()).prop_map(|(k, v)| Selector::StartsWith(k, v)),
        (key(), value()).prop_map(|(k, v)| Selector::EndsWith(k, v)),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| Selector::Not(Box::new(e))),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| Selector::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| Selector::Or(Box::new(a), Box::new(b))),
        ]
    })
}

/// The reference: the meaning of each form written out over a label map
/// independently of `matches`, as the documentation states it.
fn reference(s: &Selector, l: &BTreeMap<String, String>) -> bool {
    reference_in(s, l, false)
}

/// `global` says whether the object is one of no namespace.
fn reference_in(s: &Selector, l: &BTreeMap<String, String>, global: bool) -> bool {
    let reference = |s: &Selector, l: &BTreeMap<String, String>| reference_in(s, l, global);
    match s {
        Selector::All => !global,
        Selector::Global => global,
        Selector::Has(k) => l.keys().any(|x| x == k),
        Selector::Eq(k, v) => l.iter().any(|(x, y)| x == k && y == v),
        Selector::Ne(k, v) => !l.iter().any(|(x, y)| x == k && y == v),
        Selector::In(k, vs) => vs.iter().any(|v| l.iter().any(|(x, y)| x == k && y == v)),
        Selector::NotIn(k, vs) => !vs.iter().any(|v| l.iter().any(|(x, y)| x == k && y == v)),
        Selector::Contains(k, v) => l
            .iter()
            .any(|(x, y)| x == k && y.find(v.as_str()).is_some()),
        Selector::StartsWith(k, v) => l
            .iter()
            .any(|(x, y)| x == k && y.get(..v.len()) == Some(v.as_str())),
        Selector::EndsWith(k, v) => l.iter().any(|(x, y)| {
            x == k && y.len() >= v.len() && y.get(y.len() - v.len()..) == Some(v.as_str())
        }),
        Selector::Not(e) => !reference(e, l),
        Selector::And(a, b) => reference(a, l) && reference(b, l),
        Selector::Or(a, b) => reference(a, l) || reference(b, l),
    }
}

proptest! {
    /// Printing and parsing back gives the same selector, and it selects
    /// exactly what the reference says.
    #[test]
    fn round_trip_and_reference(
        s in selector(),
        l in proptest::collection::btree_map(key(), value(), 0..3),
    ) {
        let text = s.to_string();
        let back = Selector::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &s, "{}", text);
        prop_assert_eq!(back.matches(&l), reference(&s, &l), "{} on {:?}", text, l);
        prop_assert_eq!(
            back.matches_global(),
            reference_in(&s, &BTreeMap::new(), true),
            "{} for what is in no namespace", text
        );
    }

    /// Any text at all: an answer, never a panic.
    #[test]
    fn never_panics(text in "[ -~]{0,40}") {
        let _ = Selector::parse(&text);
    }
}

#[test]
fn global_selects_only_what_is_in_no_namespace() {
    let ns = BTreeMap::from([("env".to_string(), "prod".to_string())]);
    let cases = [
        ("global()", false, true),
        ("all()", true, false),
        ("all() || global()", true, true),
        ("env == 'prod'", true, false),
        ("!has(env)", false, true),
        ("global() || env == 'prod'", true, true),
        ("global() && env == 'prod'", false, false),
        ("!global()", true, false),
    ];
    for (text, namespace, global) in cases {
        let s = Selector::parse(text).unwrap();
        assert_eq!(s.matches(&ns), namespace, "{text} on a namespace");
        assert_eq!(
            s.matches_global(),
            global,
            "{text} on what has no namespace"
        );
        assert_eq!(s.mentions_global(), text.contains("global"), "{text}");
        assert_eq!(Selector::parse(&s.to_string()).unwrap(), s);
    }
    let e = Selector::parse("global(x)").unwrap_err();
    assert!(e.message.contains("global() takes nothing"), "{e}");
}
