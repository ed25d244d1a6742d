//! Strict decoding into typed structs, as the API server's strict field
//! validation: a field of the wrong type, an unknown field or a bad enum
//! value is reported with its path and what is allowed.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::resources::common::Problem;

/// Decodes `v` (found at `root`, e.g. `spec`, or `""` for a whole object)
/// as `T`. Fields `T` does not know are refused: they are the ones that do
/// not survive a round trip through `T`.
pub fn decode<T: DeserializeOwned + Serialize>(v: &Value, root: &str) -> Result<T, Problem> {
    let typed: T = serde_path_to_error::deserialize(v).map_err(|e| parse_problem(&e, root))?;
    let back = serde_json::to_value(&typed).map_err(|e| (root.to_string(), e.to_string()))?;
    if let Some(field) = unknown_field(v, &back, root) {
        return Err((field, "unknown field".into()));
    }
    Ok(typed)
}

/// The first field of `input` that `typed` (its round trip) lacks.
pub fn unknown_field(input: &Value, typed: &Value, path: &str) -> Option<String> {
    match (input, typed) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| {
            let p = join(path, k);
            match b.get(k) {
                None if !v.is_null() => Some(p),
                None => None,
                Some(w) => unknown_field(v, w, &p),
            }
        }),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| unknown_field(v, w, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// The first place where `input` has a list that its round trip through a
/// typed struct turned into an object: serde reads a struct from a list by
/// position, which the API server never does (`destination: [[10.0.0.0/8]]`
/// would become `nets`). An empty list read this way is the struct's
/// defaults, the same as leaving the field out, and is let through.
pub fn list_read_as_object(input: &Value, typed: &Value, path: &str) -> Option<Problem> {
    match (input, typed) {
        (Value::Array(_), Value::Object(_)) => Some((
            path.to_string(),
            "expected an object, got a list".to_string(),
        )),
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| {
            b.get(k)
                .and_then(|w| list_read_as_object(v, w, &join(path, k)))
        }),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (v, w))| list_read_as_object(v, w, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// Fields whose value is a map of free keys (labels, selectors, data): a
/// key under one is written in brackets, as the API server writes
/// `metadata.labels[tier]`, even when it looks like a field name.
const MAP_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "matchLabels",
    "nodeSelector",
    "selector",
    "data",
    "stringData",
];

fn join(path: &str, key: &str) -> String {
    // Field names are identifiers; anything else is a map key (a CIDR,
    // a label key), written in brackets.
    let parent = path.rsplit(['.', ']']).next().unwrap_or("");
    if !key.chars().all(|c| c.is_ascii_alphanumeric()) || MAP_FIELDS.contains(&parent) {
        format!("{path}[{key}]")
    } else if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A serde error turned into (field path, what is wrong and what is allowed).
pub fn parse_problem(e: &serde_path_to_error::Error<serde_json::Error>, root: &str) -> Problem {
    let mut path = String::from(root);
    let mut last_name: Option<String> = None;
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                path = join(&path, key);
                last_name = Some(key.clone());
            }
            Segment::Unknown => path.push_str(".?"),
        }
    }
    let msg = e.inner().to_string();
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        // The path may or may not already end at the unknown field.
        if last_name.as_deref() != Some(field) || !path.ends_with(field) {
            path = join(&path, field);
        }
        let allowed = backquoted(expected);
        let why = if allowed.is_empty() {
            "unknown field; this object has no fields".to_string()
        } else {
            format!("unknown field; allowed fields: {}", allowed.join(", "))
        };
        return (path, why);
    }
    if let Some(rest) = msg.strip_prefix("unknown variant `") {
        let (value, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let noun = enum_noun(last_name.as_deref().unwrap_or(""));
        return (
            path,
            format!(
                "{value:?} is not {noun}; allowed {}",
                backquoted(expected).join(", ")
            ),
        );
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let field = rest.trim_end_matches('`');
        return (join(&path, field), "Required value".into());
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
        return (path, wrong_type(got, expected));
    }
    if let Some(rest) = msg.strip_prefix("invalid value: ") {
        let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
        let got = got.rsplit(' ').next().unwrap_or(got).replace('`', "");
        let allowed = match expected {
            "u8" => "0 to 255".to_string(),
            "u16" => "0 to 65535".to_string(),
            "u32" => "0 to 4294967295".to_string(),
            "i32" => "-2147483648 to 2147483647".to_string(),
            other => expected_words(other),
        };
        return (path, format!("{got} is out of range; allowed {allowed}"));
    }
    // Secret data is base64; the decoder's own words name no format.
    const BASE64: &[&str] = &[
        "Invalid symbol",
        "Invalid last symbol",
        "Invalid input length",
        "Invalid padding",
        "Encoded text cannot",
    ];
    if BASE64.iter().any(|b| msg.starts_with(b)) {
        return (
            path,
            format!("not valid base64 ({})", msg.trim_end_matches('.')),
        );
    }
    (path, msg)
}

/// "expected a string, got the boolean true (YAML reads ...)": what a
/// person who wrote YAML needs to know about a value of the wrong type.
fn wrong_type(serde_got: &str, serde_expected: &str) -> String {
    let expected = expected_words(serde_expected);
    let value = serde_got.split('`').nth(1).unwrap_or("");
    let (got, hint) = if serde_got.starts_with("boolean") {
        let word = if value == "true" { "y" } else { "n" };
        let hint = if expected == "a string" {
            format!(" (YAML reads an unquoted {word} as {value}: quote it)")
        } else {
            String::new()
        };
        (format!("the boolean {value}"), hint)
    } else if serde_got.starts_with("integer") || serde_got.starts_with("floating point") {
        let hint = if expected == "a string" {
            format!(" (YAML reads an unquoted {value} as a number: quote it)")
        } else {
            String::new()
        };
        (format!("the number {value}"), hint)
    } else if let Some(s) = serde_got.strip_prefix("string ") {
        (
            format!("the string {}", s.replace('`', "\"")),
            String::new(),
        )
    } else {
        (
            match serde_got {
                "sequence" => "a list".to_string(),
                "map" => "an object".to_string(),
                "null" | "unit value" => "null".to_string(),
                other => other.replace('`', ""),
            },
            String::new(),
        )
    };
    format!("expected {expected}, got {got}{hint}")
}

/// The names in "expected one of `a`, `b`" / "expected `a` or `b`".
fn backquoted(s: &str) -> Vec<&str> {
    s.split('`').skip(1).step_by(2).collect()
}

/// What serde's type names mean to a person writing YAML.
fn expected_words(serde_expected: &str) -> String {
    match serde_expected {
        "u8" => "a whole number 0 to 255".into(),
        "u16" => "a whole number 0 to 65535".into(),
        "u32" => "a whole number 0 to 4294967295".into(),
        "i32" => "a whole number".into(),
        "u64" | "i64" => "a whole number".into(),
        "f64" => "a number".into(),
        "a boolean" | "bool" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a map" => "an object".into(),
        "a string" | "string" => "a string".into(),
        s if s.starts_with("struct ")
            || s.ends_with("Spec")
            || s.starts_with('a') && s.contains("map") =>
        {
            "an object".into()
        }
        s => s.into(),
    }
}

/// "an action" for the field `action`, and so on.
fn enum_noun(field: &str) -> &'static str {
    match field {
        "action" => "an action",
        "ipipMode" | "vxlanMode" => "an encapsulation mode",
        "nextHopMode" => "a next-hop mode",
        "sourceAddress" => "a source address mode",
        "matchOperator" => "a match operator",
        "source" => "a route source",
        "state" => "an affinity state",
        "types" => "a policy type",
        _ => "an allowed value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use serde_json::json;

    #[test]
    fn a_boolean_where_a_string_goes_says_how_to_fix_it() {
        let v = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "a"},
            "spec": {"podSelector": {"matchLabels": {"kubernetes.io/metadata.name": true}}}});
        let (field, why) = decode::<NetworkPolicy>(&v, "").unwrap_err();
        assert_eq!(
            field,
            "spec.podSelector.matchLabels[kubernetes.io/metadata.name]"
        );
        assert_eq!(
            why,
            "expected a string, got the boolean true (YAML reads an unquoted y as true: quote it)"
        );
    }

    #[test]
    fn unknown_fields_are_refused_with_their_path() {
        let v = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "a"},
            "spec": {"podSelector": {}, "ingress": [{"form": []}, {"from": [{"podSelectr": {"x": 1}}]}]}});
        let (field, why) = decode::<NetworkPolicy>(&v, "").unwrap_err();
        assert_eq!(
            (field.as_str(), why.as_str()),
            ("spec.ingress[0].form", "unknown field")
        );
    }
}
