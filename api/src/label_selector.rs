//! `labelSelector` as the API server reads it: requirements separated by
//! commas, each `key`, `!key`, `key=value` (or `==`), `key!=value`,
//! `key in (a,b)` or `key notin (a,b)`. A key the object lacks fails `=`
//! and `in` and passes `!=` and `notin`, as in Kubernetes. A selector that
//! does not parse is an error (the API server's 400). The API server
//! stand-in and `tartanctl get -l` read selectors with it.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Exists,
    Absent,
    In(Vec<String>),
    NotIn(Vec<String>),
}

/// Every requirement must hold; the empty selector picks everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<(String, Op)>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut out = Vec::new();
        for part in split_outside_parens(text) {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(format!(
                    "unable to parse requirement: found '', expected: identifier in {text:?}"
                ));
            }
            out.push(requirement(part)?);
        }
        Ok(LabelSelector(out))
    }

    /// Whether `obj` (in its wire shape) carries labels that satisfy every
    /// requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.holds(|k| labels?.get(k)?.as_str())
    }

    /// [`Self::matches`] on a label map.
    pub fn matches_labels(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.holds(|k| labels?.get(k).map(String::as_str))
    }

    /// Every requirement, against the labels `get` reads.
    fn holds<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|(k, op)| match op {
            Op::Exists => get(k).is_some(),
            Op::Absent => get(k).is_none(),
            Op::In(vs) => get(k).is_some_and(|v| vs.iter().any(|w| w == v)),
            Op::NotIn(vs) => get(k).is_none_or(|v| vs.iter().all(|w| w != v)),
        })
    }
}

/// `text` split at commas that are not inside `( … )`.
fn split_outside_parens(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn requirement(part: &str) -> Result<(String, Op), String> {
    let bad = |why: &str| format!("unable to parse requirement: {why} in {part:?}");
    if let Some(key) = part.strip_prefix('!') {
        return Ok((checked_key(key.trim()).map_err(|e| bad(&e))?, Op::Absent));
    }
    for (token, negated) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = part.split_once(token) {
            let key = checked_key(k.trim()).map_err(|e| bad(&e))?;
            let value = checked_value(v.trim()).map_err(|e| bad(&e))?;
            let values = vec![value];
            return Ok((
                key,
                if negated {
                    Op::NotIn(values)
                } else {
                    Op::In(values)
                },
            ));
        }
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let Some((k, word)) = head.rsplit_once(char::is_whitespace) else {
            return Err(bad("expected a key and `in` or `notin` before '('"));
        };
        let inner = part[open + 1..]
            .trim_end()
            .strip_suffix(')')
            .ok_or_else(|| bad("expected ')'"))?;
        let values = inner
            .split(',')
            .map(|v| checked_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        let key = checked_key(k.trim()).map_err(|e| bad(&e))?;
        return match word {
            "in" => Ok((key, Op::In(values))),
            "notin" => Ok((key, Op::NotIn(values))),
            other => Err(bad(&format!(
                "{other:?} is not an operator; use in or notin"
            ))),
        };
    }
    Ok((checked_key(part).map_err(|e| bad(&e))?, Op::Exists))
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of
/// 1–63 alphanumerics, `-`, `_`, `.`, beginning and ending alphanumeric.
fn checked_key(k: &str) -> Result<String, String> {
    let name = match k.rsplit_once('/') {
        Some((prefix, name)) => {
            let ok = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            if !ok {
                return Err(format!("{k:?} is not a label key (its prefix)"));
            }
            name
        }
        None => k,
    };
    if name.is_empty() || !is_name(name) {
        return Err(format!("{k:?} is not a label key"));
    }
    Ok(k.to_string())
}

/// A label value: empty, or a name as in a key.
fn checked_value(v: &str) -> Result<String, String> {
    if v.is_empty() || is_name(v) {
        Ok(v.to_string())
    } else {
        Err(format!("{v:?} is not a label value"))
    }
}

fn is_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars()
            .all(|c| alnum(c) || c == '-' || c == '_' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels}})
    }

    #[test]
    fn every_operator_as_kubernetes_reads_it() {
        let web = obj(json!({"app": "web", "tier": "front"}));
        let plain = obj(json!({}));
        for (sel, on_web, on_plain) in [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app = web , tier=front", true, false),
            ("app!=web", false, true),
            ("app!=db", true, true),
            ("app", true, false),
            ("!app", false, true),
            ("! app", false, true),
            ("app in (web, db)", true, false),
            ("app in (db)", false, false),
            ("app notin (db)", true, true),
            ("app notin (web,db),tier", false, false),
            ("!service.kubernetes.io/headless", true, true),
            ("kubernetes.io/service-name=web", false, false),
            ("app=", false, false),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_else(|e| panic!("{sel}: {e}"));
            assert_eq!(s.matches(&web), on_web, "{sel} on web");
            assert_eq!(s.matches(&plain), on_plain, "{sel} on plain");
        }
    }

    #[test]
    fn malformed_selectors_are_refused() {
        for sel in [
            "app=web,",
            ",app",
            "app in web",
            "app in (web",
            "app between (a)",
            "App Name=x",
            "app=we b",
            "-app",
            "app=(x)",
            "/app",
        ] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
    }
}
