//! A parsed value into documents: a mapping is one, a `List` or an array
//! gives one per item; anything else is refused with what it is.

use serde_json::Value;

use super::document::{DocError, Document, Origin};

/// Adds a document, or each item of a list document.
pub(super) fn expand(
    origin: Origin,
    value: Value,
    out: &mut Vec<Document>,
) -> Result<(), Box<DocError>> {
    let bad = |origin: &Origin, message: String| {
        Box::new(DocError {
            origin: origin.clone(),
            object: None,
            message,
        })
    };
    match value {
        Value::Null => Ok(()),
        Value::Array(items) => push_items(origin, items, out),
        Value::Object(ref map) if is_list(map) => match map.get("items") {
            Some(Value::Array(items)) => push_items(origin, items.clone(), out),
            Some(Value::Null) | None => Ok(()),
            Some(_) => Err(bad(&origin, "a List's items must be a sequence".into())),
        },
        Value::Object(_) => {
            out.push(Document { origin, value });
            Ok(())
        }
        other => Err(bad(
            &origin,
            format!(
                "a document must be a mapping with apiVersion, kind and metadata, not {}",
                type_name(&other)
            ),
        )),
    }
}

/// `kind: List` (kubectl's), or `kind: IPPoolList` with items.
fn is_list(map: &serde_json::Map<String, Value>) -> bool {
    let kind = map.get("kind").and_then(Value::as_str).unwrap_or("");
    kind == "List" || (kind.ends_with("List") && map.contains_key("items"))
}

fn push_items(
    origin: Origin,
    items: Vec<Value>,
    out: &mut Vec<Document>,
) -> Result<(), Box<DocError>> {
    for (i, item) in items.into_iter().enumerate() {
        let o = Origin {
            item: Some(i + 1),
            ..origin.clone()
        };
        match item {
            Value::Object(_) => out.push(Document {
                origin: o,
                value: item,
            }),
            other => {
                return Err(Box::new(DocError {
                    origin: o,
                    object: None,
                    message: format!("a list item must be a mapping, not {}", type_name(&other)),
                }));
            }
        }
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}
