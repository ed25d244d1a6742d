//! Label selectors for `get -l`, in Kubernetes syntax: `k=v`, `k==v`,
//! `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, joined by commas; all
//! terms must match.

use std::collections::BTreeMap;

use anyhow::bail;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector(Vec<Term>);

/// Splits at commas outside parentheses.
fn split_terms(s: &str) -> anyhow::Result<Vec<&str>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            bail!("selector {s:?}: unbalanced parentheses");
        }
    }
    if depth != 0 {
        bail!("selector {s:?}: unbalanced parentheses");
    }
    out.push(&s[start..]);
    Ok(out)
}

fn key(s: &str, whole: &str) -> anyhow::Result<String> {
    let k = s.trim();
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/');
    if k.is_empty() || !k.chars().all(ok) {
        bail!("selector {whole:?}: {k:?} is not a label key");
    }
    Ok(k.to_string())
}

/// `(a, b)` → [a, b].
fn set(s: &str, whole: &str) -> anyhow::Result<Vec<String>> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| anyhow::anyhow!("selector {whole:?}: expected a set like (a,b)"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

pub fn parse(s: &str) -> anyhow::Result<Selector> {
    let mut terms = Vec::new();
    for raw in split_terms(s)? {
        let t = raw.trim();
        if t.is_empty() {
            bail!("selector {s:?}: empty term");
        }
        let term = if let Some((k, v)) = t.split_once("!=") {
            Term::NotEquals(key(k, s)?, v.trim().to_string())
        } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
            Term::Equals(key(k, s)?, v.trim().to_string())
        } else if let Some(k) = t.strip_prefix('!') {
            Term::Absent(key(k, s)?)
        } else if let Some((k, rest)) = t.split_once(" notin ") {
            Term::NotIn(key(k, s)?, set(rest, s)?)
        } else if let Some((k, rest)) = t.split_once(" in ") {
            Term::In(key(k, s)?, set(rest, s)?)
        } else {
            Term::Exists(key(t, s)?)
        };
        terms.push(term);
    }
    Ok(Selector(terms))
}

impl Selector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|t| match t {
            Term::Equals(k, v) => labels.get(k) == Some(v),
            Term::NotEquals(k, v) => labels.get(k) != Some(v),
            Term::Exists(k) => labels.contains_key(k),
            Term::Absent(k) => !labels.contains_key(k),
            Term::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Term::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn terms_match() {
        let l = labels(&[("env", "prod"), ("tier", "web")]);
        for (sel, want) in [
            ("env=prod", true),
            ("env==prod", true),
            ("env=dev", false),
            ("env!=dev", true),
            ("env,tier", true),
            ("!legacy", true),
            ("!env", false),
            ("env in (dev, prod),tier notin (db)", true),
            ("env notin (prod)", false),
            ("missing notin (x)", true),
            ("missing in (x)", false),
            ("env=prod,tier=db", false),
        ] {
            assert_eq!(parse(sel).unwrap().matches(&l), want, "{sel}");
        }
    }

    #[test]
    fn bad_selectors_are_errors() {
        for bad in ["", "env=prod,", "a in (x", "a in x)", "sp ace=1", "=x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
