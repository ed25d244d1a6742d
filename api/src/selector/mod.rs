//! Label selectors, as operators know them from Calico:
//!
//! ```text
//! all()                      every object
//! global()                   what belongs to no namespace (in a rule's
//!                            namespaceSelector: GlobalNetworkSets)
//! has(k)   !has(k)           the label is set / not set
//! k == 'v'   k != 'v'        equal / not equal (true when k is missing)
//! k in {'a', 'b'}            one of
//! k not in {'a', 'b'}        none of (true when k is missing)
//! k contains 'x'   k starts with 'x'   k ends with 'x'
//! !e   e && e   e || e   (e)
//! ```
//!
//! Strings are in single or double quotes. An empty selector selects all.
//! Parse errors say at which column (1-based) the text went wrong. `!` and
//! `(` may nest at most [`MAX_NESTING`] levels deep.

#[cfg(test)]
mod depth_tests;
mod lexer;
mod parse;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// How deeply `!` and `(` may nest in a selector's text, together
/// (`!(a || !b)` nests 3 levels at `b`). Calico sets no limit; written
/// selectors nest a few levels, and the bound keeps the recursive parser
/// and the trees it builds small enough for any thread's stack.
pub const MAX_NESTING: usize = 64;

/// A parsed selector. A parsed chain `a && b && c && d` is a balanced
/// tree (`(a && b) && (c && d)`), so that the tree stays shallow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Selector {
    All,
    /// `global()`: true of what is in no namespace. A namespace's labels
    /// never match it; see [`Selector::matches_global`].
    Global,
    Has(String),
    Eq(String, String),
    Ne(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Contains(String, String),
    StartsWith(String, String),
    EndsWith(String, String),
    Not(Box<Selector>),
    And(Box<Selector>, Box<Selector>),
    Or(Box<Selector>, Box<Selector>),
}

/// Where and why a selector does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("selector {text:?}, column {column}: {message}")]
pub struct SelectorError {
    pub text: String,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        parse::parse(text)
    }

    /// What every one of `terms` selects (`all()` for none), as the parser
    /// builds an `&&` chain: a balanced tree. Folding [`Selector::And`]
    /// instead makes a tree as deep as the list is long, which a long
    /// enough list turns into a stack overflow wherever it is walked.
    pub fn all_of(terms: Vec<Selector>) -> Selector {
        parse::balanced(terms, Selector::And)
    }

    /// Whether an object with `labels` is selected. `global()` is false:
    /// labels are a namespaced object's, or a namespace's.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.eval(labels, false)
    }

    /// Whether this namespace selector takes in what belongs to no
    /// namespace: it is evaluated as for something without labels in
    /// which `global()` holds and `all()` (every namespace) does not, as
    /// Calico reads a rule's namespaceSelector: `global()`, `!has(k)`
    /// and `!all()` do, `all()` and `k == 'v'` do not.
    pub fn matches_global(&self) -> bool {
        self.eval(&BTreeMap::new(), true)
    }

    /// Whether `global()` appears anywhere in it.
    pub fn mentions_global(&self) -> bool {
        match self {
            Selector::Global => true,
            Selector::Not(e) => e.mentions_global(),
            Selector::And(a, b) | Selector::Or(a, b) => a.mentions_global() || b.mentions_global(),
            _ => false,
        }
    }

    /// The same selector over keys written with `prefix` before them
    /// (Calico's reading of a selector over a service account's labels,
    /// prefix `pcsa.`, as it labels endpoints), with `all()` read as
    /// `all`. `global()` is kept.
    pub fn with_key_prefix(&self, prefix: &str, all: &Selector) -> Selector {
        let k = |key: &String| format!("{prefix}{key}");
        let walk = |e: &Selector| Box::new(e.with_key_prefix(prefix, all));
        match self {
            Selector::All => all.clone(),
            Selector::Global => Selector::Global,
            Selector::Has(key) => Selector::Has(k(key)),
            Selector::Eq(key, v) => Selector::Eq(k(key), v.clone()),
            Selector::Ne(key, v) => Selector::Ne(k(key), v.clone()),
            Selector::In(key, vs) => Selector::In(k(key), vs.clone()),
            Selector::NotIn(key, vs) => Selector::NotIn(k(key), vs.clone()),
            Selector::Contains(key, v) => Selector::Contains(k(key), v.clone()),
            Selector::StartsWith(key, v) => Selector::StartsWith(k(key), v.clone()),
            Selector::EndsWith(key, v) => Selector::EndsWith(k(key), v.clone()),
            Selector::Not(e) => Selector::Not(walk(e)),
            Selector::And(a, b) => Selector::And(walk(a), walk(b)),
            Selector::Or(a, b) => Selector::Or(walk(a), walk(b)),
        }
    }

    /// Whether a label key starting with `prefix` appears anywhere in it.
    pub fn mentions_key_prefix(&self, prefix: &str) -> bool {
        match self {
            Selector::All | Selector::Global => false,
            Selector::Has(k)
            | Selector::Eq(k, _)
            | Selector::Ne(k, _)
            | Selector::In(k, _)
            | Selector::NotIn(k, _)
            | Selector::Contains(k, _)
            | Selector::StartsWith(k, _)
            | Selector::EndsWith(k, _) => k.starts_with(prefix),
            Selector::Not(e) => e.mentions_key_prefix(prefix),
            Selector::And(a, b) | Selector::Or(a, b) => {
                a.mentions_key_prefix(prefix) || b.mentions_key_prefix(prefix)
            }
        }
    }

    fn eval(&self, labels: &BTreeMap<String, String>, global: bool) -> bool {
        let get = |k: &str| labels.get(k).map(String::as_str);
        match self {
            // In a namespace selector `all()` is every namespace.
            Selector::All => !global,
            Selector::Global => global,
            Selector::Has(k) => labels.contains_key(k),
            Selector::Eq(k, v) => get(k) == Some(v.as_str()),
            Selector::Ne(k, v) => get(k) != Some(v.as_str()),
            Selector::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
            Selector::NotIn(k, vs) => !get(k).is_some_and(|x| vs.contains(x)),
            Selector::Contains(k, v) => get(k).is_some_and(|x| x.contains(v.as_str())),
            Selector::StartsWith(k, v) => get(k).is_some_and(|x| x.starts_with(v.as_str())),
            Selector::EndsWith(k, v) => get(k).is_some_and(|x| x.ends_with(v.as_str())),
            Selector::Not(e) => !e.eval(labels, global),
            Selector::And(a, b) => a.eval(labels, global) && b.eval(labels, global),
            Selector::Or(a, b) => a.eval(labels, global) || b.eval(labels, global),
        }
    }
}

fn quote(s: &str) -> String {
    if s.contains('\'') {
        format!("\"{s}\"")
    } else {
        format!("'{s}'")
    }
}

fn set(vs: &BTreeSet<String>) -> String {
    vs.iter().map(|v| quote(v)).collect::<Vec<_>>().join(", ")
}

/// The canonical text: fully parenthesised where operators nest, so that
/// it parses back to the same selector (provided the parentheses it adds,
/// `!(…)` for each `!`, stay within [`MAX_NESTING`]).
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Selector::All => f.write_str("all()"),
            Selector::Global => f.write_str("global()"),
            Selector::Has(k) => write!(f, "has({k})"),
            Selector::Eq(k, v) => write!(f, "{k} == {}", quote(v)),
            Selector::Ne(k, v) => write!(f, "{k} != {}", quote(v)),
            Selector::In(k, vs) => write!(f, "{k} in {{{}}}", set(vs)),
            Selector::NotIn(k, vs) => write!(f, "{k} not in {{{}}}", set(vs)),
            Selector::Contains(k, v) => write!(f, "{k} contains {}", quote(v)),
            Selector::StartsWith(k, v) => write!(f, "{k} starts with {}", quote(v)),
            Selector::EndsWith(k, v) => write!(f, "{k} ends with {}", quote(v)),
            Selector::Not(e) => write!(f, "!({e})"),
            Selector::And(a, b) => write!(f, "({a} && {b})"),
            Selector::Or(a, b) => write!(f, "({a} || {b})"),
        }
    }
}
