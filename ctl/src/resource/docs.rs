//! Reading resource files: multi-document YAML (`---`), or JSON (one or
//! more objects, an array, or a `List` with `items`). Each document keeps
//! where it came from (file, document number, line) so every message can
//! point at it. Syntax errors in one YAML document do not hide the others:
//! documents are split first and parsed one by one.//!
//! The parts: [`limits`] (how much a source may hold), [`document`] (what
//! reading yields), the JSON and YAML readers, and the expansion of lists
//! into documents.

mod document;
mod dup;
mod expand;
mod json;
mod limits;
mod yaml;

use serde_json::Value;

pub use document::{DocError, Document, Origin};
pub use limits::{
    MAX_DOCUMENT_BYTES, MAX_DOCUMENTS, MAX_OBJECT_BYTES, MAX_SOURCE_BYTES, check_source_size,
};

use json::parse_json;
use yaml::parse_yaml;

/// All documents of one source, and the problems found reading it.
/// A `.json` file is read as JSON only; anything else that starts like
/// JSON is tried as JSON first, then as YAML.
pub fn parse(source: &str, text: &str) -> (Vec<Document>, Vec<DocError>) {
    let (docs, mut errors) = parse_any(source, text);
    let mut kept = Vec::with_capacity(docs.len());
    for d in docs {
        let size = serde_json::to_vec(&d.value).map_or(usize::MAX, |v| v.len());
        if size > MAX_OBJECT_BYTES {
            let name = |f: &str| d.value.pointer(f).and_then(Value::as_str);
            let object = match (name("/kind"), name("/metadata/name")) {
                (Some(kind), Some(n)) => Some(format!("{kind} {n:?}")),
                _ => None,
            };
            errors.push(DocError {
                origin: d.origin,
                object,
                message: format!(
                    "the object is {size} bytes; an object may be at most {MAX_OBJECT_BYTES} bytes (1.5 MiB)"
                ),
            });
        } else {
            kept.push(d);
        }
    }
    (kept, errors)
}

fn parse_any(source: &str, text: &str) -> (Vec<Document>, Vec<DocError>) {
    if source.ends_with(".json") {
        return match parse_json(source, text) {
            Ok(docs) => (docs, Vec::new()),
            Err(e) => (Vec::new(), vec![e]),
        };
    }
    let looks_like_json = matches!(text.trim_start().chars().next(), Some('{' | '['));
    if looks_like_json {
        match parse_json(source, text) {
            Ok(docs) => return (docs, Vec::new()),
            // A YAML flow mapping (`{a: b}`) is not JSON; if it is not
            // YAML either, the JSON error is the one that makes sense when
            // the text was meant as JSON (its first key is quoted).
            Err(json_err) => {
                let (docs, errors) = parse_yaml(source, text);
                if errors.is_empty() || !meant_as_json(text) {
                    return (docs, errors);
                }
                return (Vec::new(), vec![json_err]);
            }
        }
    }
    parse_yaml(source, text)
}

/// Whether text starting with `{` or `[` was written as JSON: the first
/// thing inside the brackets is a quoted string, a number or a closing
/// bracket, where a YAML flow mapping has a bare word (`{apiVersion: v1}`).
fn meant_as_json(text: &str) -> bool {
    let inner = text.trim_start_matches(|c: char| c.is_whitespace() || c == '{' || c == '[');
    matches!(
        inner.chars().next(),
        Some('"' | '}' | ']' | '-' | '0'..='9') | None
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kinds(docs: &[Document]) -> Vec<&str> {
        docs.iter()
            .map(|d| d.value["kind"].as_str().unwrap_or("?"))
            .collect()
    }

    #[test]
    fn multi_document_yaml_keeps_order_and_lines() {
        let text = "# pools\n---\napiVersion: tartan.dev/v1\nkind: IPPool\nmetadata:\n  name: a\n---\n\n---\napiVersion: tartan.dev/v1\nkind: BGPPeer\nmetadata: {name: p}\nspec:\n  asNumber: 65001\n...\n";
        let (docs, errors) = parse("f.yaml", text);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kinds(&docs), ["IPPool", "BGPPeer"]);
        assert_eq!(docs[0].origin.index, 1);
        assert_eq!(docs[0].origin.line, Some(3));
        assert_eq!(docs[1].origin.index, 2);
        assert_eq!(docs[1].origin.line, Some(10));
        assert_eq!(docs[1].value["spec"]["asNumber"], json!(65001));
        assert_eq!(docs[1].value["metadata"]["name"], json!("p"));
    }

    #[test]
    fn content_on_the_marker_line_belongs_to_its_document() {
        let (docs, errors) = parse("f", "--- {kind: A}\n--- {kind: B}\n");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(kinds(&docs), ["A", "B"]);
        assert_eq!(docs[1].origin.line, Some(2));
    }

    #[test]
    fn a_document_marker_inside_a_value_is_not_a_split() {
        let (docs, errors) = parse("f", "kind: A\ndescription: x --- y\nnote: \"---\"\n");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].value["description"], json!("x --- y"));
    }

    #[test]
    fn json_list_array_and_stream() {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [
            {"kind": "IPPool"}, {"kind": "BGPPeer"}
        ]});
        let (docs, errors) = parse("l.json", &list.to_string());
        assert!(errors.is_empty());
        assert_eq!(kinds(&docs), ["IPPool", "BGPPeer"]);
        assert_eq!(docs[1].origin.item, Some(2));

        let (docs, _) = parse("a.json", r#"[{"kind": "A"}, {"kind": "B"}]"#);
        assert_eq!(kinds(&docs), ["A", "B"]);

        let (docs, errors) = parse("s.json", "{\"kind\": \"A\"}\n\n{\"kind\": \"B\"}\n");
        assert!(errors.is_empty());
        assert_eq!(kinds(&docs), ["A", "B"]);
        assert_eq!(docs[1].origin.index, 2);
        assert_eq!(docs[1].origin.line, Some(3));
    }

    #[test]
    fn typed_lists_expand_too() {
        let (docs, _) = parse(
            "f",
            "kind: IPPoolList\nitems:\n- kind: IPPool\n- kind: IPPool\n",
        );
        assert_eq!(kinds(&docs), ["IPPool", "IPPool"]);
    }

    #[test]
    fn broken_json_names_the_line() {
        // Valid as a YAML flow mapping (`"x":` is null), but not JSON.
        let (docs, errors) = parse("bad.json", "{\n  \"kind\": \"A\",\n  \"x\": \n}\n");
        assert!(docs.is_empty());
        assert_eq!(errors.len(), 1);
        let msg = errors[0].to_string();
        assert!(msg.starts_with("bad.json: document 1 (line 1)"), "{msg}");
        assert!(msg.contains("invalid JSON at line 4"), "{msg}");
        // Broken as either: the JSON error is reported, whatever the name.
        let (docs, errors) = parse("stdin", "{\"kind\": \"A\",\n \"x\": [1,\n}\n");
        assert!(docs.is_empty());
        assert!(
            errors[0].message.starts_with("invalid JSON at line 3"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn a_yaml_flow_mapping_is_not_mistaken_for_broken_json() {
        let (docs, errors) = parse("f", "{kind: A, metadata: {name: x}}\n");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(docs[0].value["metadata"]["name"], json!("x"));
    }

    #[test]
    fn broken_yaml_names_the_document_and_file_line_and_keeps_the_others() {
        let text = "kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n---\nkind: C\n";
        let (docs, errors) = parse("f.yaml", text);
        assert_eq!(kinds(&docs), ["A", "C"]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let e = &errors[0];
        assert_eq!(e.origin.index, 2);
        assert_eq!(e.origin.line, Some(3), "where the document starts");
        assert!(
            e.message.starts_with("invalid YAML at line 5")
                || e.message.starts_with("invalid YAML at line 6"),
            "{e}"
        );
        assert!(!e.message.contains('\n'), "one line: {e}");
    }

    #[test]
    fn bad_indentation_is_reported_at_its_line() {
        let text = "kind: A\nmetadata:\n  name: x\n   labels: y\n";
        let (_, errors) = parse("f.yaml", text);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].message.starts_with("invalid YAML at line 4:"),
            "{}",
            errors[0]
        );
    }

    #[test]
    fn scalars_are_not_documents_and_empty_documents_are_skipped() {
        let (docs, errors) = parse("f", "---\n# nothing\n---\njust a string\n---\nkind: A\n");
        assert_eq!(kinds(&docs), ["A"]);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].origin.index, 1);
        assert!(errors[0].message.contains("not a string"), "{}", errors[0]);
        assert_eq!(docs[0].origin.index, 2);
    }

    #[test]
    fn empty_input_has_no_documents() {
        let (docs, errors) = parse("f", "\n# only a comment\n");
        assert!(docs.is_empty() && errors.is_empty());
    }
}
