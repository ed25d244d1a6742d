//! Selectors of any length on a small stack: nesting past the limit is a
//! parse error, and long chains parse into trees shallow enough to match,
//! print, clone, compare and drop. Each test runs on a thread with a 2 MiB
//! stack (a Tokio worker's), where unbounded recursion would overflow.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("the test thread panicked")
}

/// Levels of the tree (a leaf is 1).
fn depth(s: &Selector) -> usize {
    match s {
        Selector::Not(e) => 1 + depth(e),
        Selector::And(a, b) | Selector::Or(a, b) => 1 + depth(a).max(depth(b)),
        _ => 1,
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn nesting_error(text: &str) -> SelectorError {
    let e = Selector::parse(text).expect_err("nests too deep");
    assert_eq!(
        e.message,
        "selector nests deeper than 64 levels of '!' and '('"
    );
    e
}

#[test]
fn a_million_bangs_is_an_error() {
    on_small_stack(|| {
        let text = format!("{}all()", "!".repeat(1_000_000));
        // The 65th '!' is one too many.
        assert_eq!(nesting_error(&text).column, 65);
    });
}

#[test]
fn half_a_million_parentheses_is_an_error() {
    on_small_stack(|| {
        let n = 500_000;
        let text = format!("{}all(){}", "(".repeat(n), ")".repeat(n));
        assert_eq!(nesting_error(&text).column, 65);
        // Alternating, and behind a valid start.
        let text = format!("has(a) || {}all(){}", "!(".repeat(n), ")".repeat(n));
        assert_eq!(nesting_error(&text).column, 11 + 64);
    });
}

#[test]
fn nesting_up_to_the_limit_parses() {
    on_small_stack(|| {
        let l = labels(&[("a", "1")]);
        let bangs = |n: usize| format!("{}has(a)", "!".repeat(n));
        assert!(Selector::parse(&bangs(64)).unwrap().matches(&l));
        assert!(!Selector::parse(&bangs(63)).unwrap().matches(&l));
        nesting_error(&bangs(65));
        let parens = |n: usize| format!("{}has(a){}", "(".repeat(n), ")".repeat(n));
        assert_eq!(
            Selector::parse(&parens(64)).unwrap(),
            Selector::Has("a".into())
        );
        nesting_error(&parens(65));
        // '!' and '(' count together: 32 of each is the limit.
        let both = |n: usize| format!("{}has(a){}", "!(".repeat(n), ")".repeat(n));
        assert!(Selector::parse(&both(32)).unwrap().matches(&l));
        nesting_error(&both(33));
        // Levels closed again do not count.
        let siblings = vec![parens(64); 100].join(" && ");
        assert!(Selector::parse(&siblings).unwrap().matches(&l));
    });
}

#[test]
fn ten_thousand_term_chains_parse_match_print_and_drop() {
    on_small_stack(|| {
        let n = 10_000;
        let terms: Vec<String> = (0..n).map(|i| format!("k{i} == 'v'")).collect();
        let and = Selector::parse(&terms.join(" && ")).unwrap();
        let or = Selector::parse(&terms.join(" || ")).unwrap();
        // ⌈log2 10000⌉ operator levels above the leaves.
        assert_eq!(depth(&and), 15);
        assert_eq!(depth(&or), 15);
        let all: BTreeMap<String, String> =
            (0..n).map(|i| (format!("k{i}"), "v".to_string())).collect();
        let last = labels(&[("k9999", "v")]);
        assert!(and.matches(&all));
        assert!(!and.matches(&last));
        assert!(or.matches(&last));
        assert!(!or.matches(&labels(&[("k10000", "v")])));
        // Printed, parsed back, cloned, compared, dropped.
        let text = and.to_string();
        assert_eq!(Selector::parse(&text).unwrap(), and);
        assert_eq!(and.clone(), and);
        assert!(format!("{or:?}").len() > n);
        drop((and, or));
    });
}

#[test]
fn all_of_builds_what_the_parser_builds() {
    on_small_stack(|| {
        assert_eq!(Selector::all_of(Vec::new()), Selector::All);
        let has = |i: usize| Selector::Has(format!("k{i}"));
        let text: Vec<String> = (0..7).map(|i| format!("has(k{i})")).collect();
        assert_eq!(
            Selector::all_of((0..7).map(has).collect()),
            Selector::parse(&text.join(" && ")).unwrap()
        );
        let many = Selector::all_of((0..100_000).map(has).collect());
        assert_eq!(depth(&many), 18);
        assert!(!many.matches(&labels(&[("k0", "")])));
    });
}

#[test]
fn nested_chains_at_every_level_stay_walkable() {
    on_small_stack(|| {
        // 64 levels of parentheses, each in a 501-term && chain beside a
        // 500-term one (640 kB): every level adds its chains' depth.
        let chain = vec!["has(a)"; 500].join(" && ");
        let mut text = "all()".to_string();
        for _ in 0..MAX_NESTING {
            text = format!("{chain} || {chain} && ({text})");
        }
        let s = Selector::parse(&text).unwrap();
        assert!(depth(&s) < 1_000, "{}", depth(&s));
        assert!(s.matches(&labels(&[("a", "")])));
        assert!(!s.matches(&labels(&[])));
        assert_eq!(s.clone(), s);
        assert!(!s.to_string().is_empty());
    });
}

/// Text made mostly of the tokens that nest and chain, so that generated
/// selectors go deep and long.
fn nesting_text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        6 => Just("!"),
        6 => Just("("),
        4 => Just(")"),
        4 => Just(" && "),
        4 => Just(" || "),
        3 => Just("has(a)"),
        2 => Just("all()"),
        1 => Just("a == '1'"),
        1 => Just("b in {'1', '2'}"),
        1 => Just(" "),
        1 => Just("=="),
        1 => Just("'"),
    ];
    proptest::collection::vec(piece, 0..1_200).prop_map(|p| p.concat())
}

/// Pieces that always make a selector, to reach depth more often than
/// random text does.
fn valid_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![Just("has(a)".to_string()), Just("a == '1'".to_string())];
    leaf.prop_recursive(80, 2_000, 8, |inner| {
        prop_oneof![
            inner.clone().prop_map(|e| format!("!{e}")),
            inner.clone().prop_map(|e| format!("({e})")),
            proptest::collection::vec(inner.clone(), 1..8).prop_map(|v| v.join(" && ")),
            proptest::collection::vec(inner, 1..8).prop_map(|v| v.join(" || ")),
        ]
    })
}

fn check(text: &str) -> Result<(), TestCaseError> {
    let l = labels(&[("a", "1")]);
    match Selector::parse(text) {
        Ok(s) => {
            // Each '!' adds a level; each of the 65 levels of parentheses
            // (the top one too) an || chain and an && chain, balanced.
            let log2 = usize::BITS - text.len().max(2).leading_zeros();
            let bound = 1 + MAX_NESTING + 2 * (MAX_NESTING + 1) * log2 as usize;
            prop_assert!(depth(&s) <= bound, "{} > {}", depth(&s), bound);
            let copy = s.clone();
            prop_assert_eq!(copy.matches(&l), s.matches(&l));
            prop_assert!(!s.to_string().is_empty());
        }
        Err(e) => prop_assert!(e.column >= 1 && e.column <= text.chars().count() + 1),
    }
    Ok(())
}

proptest! {
    /// Nesting and chaining text up to ~5,000 characters: an answer,
    /// never a crash, and a tree far shallower than the text is long.
    #[test]
    fn nesting_text_never_crashes(text in nesting_text()) {
        check(&text)?;
    }

    #[test]
    fn generated_selectors_parse_or_nest_too_deep(text in valid_text()) {
        match Selector::parse(&text) {
            Ok(_) => check(&text)?,
            Err(e) => prop_assert!(e.message.contains("nests deeper"), "{}: {}", text, e),
        }
    }
}
