//! Reading resource files: multi-document YAML (`---`), or JSON (one or
//! more objects, an array, or a `List` with `items`). Each document keeps
//! where it came from (file, document number, line) so every message can
//! point at it. Syntax errors in one YAML document do not hide the others:
//! documents are split first and parsed one by one.

mod dup;

use std::fmt;

use serde_json::Value;

/// The API server's limit on a request body: a document is one request.
pub const MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;
/// The largest object etcd keeps (the API server's limit on an object).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;
/// Documents in one source.
pub const MAX_DOCUMENTS: usize = 10_000;
/// A source is refused before it is read whole past this size.
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;

/// Refuses a source larger than [`MAX_SOURCE_BYTES`].
pub fn check_source_size(name: &str, len: u64) -> anyhow::Result<()> {
    if len > MAX_SOURCE_BYTES {
        anyhow::bail!(
            "{name}: larger than {} MiB; split it into several files",
            MAX_SOURCE_BYTES / 1024 / 1024
        );
    }
    Ok(())
}

/// The YAML reader's settings: duplicate keys and unknown tags refused,
/// aliases and events bounded (no "billion laughs").
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        reject_unsupported_tags: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
    }
}

/// Where a document came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file name, or `stdin`.
    pub source: String,
    /// 1-based number of the document in its source (empty ones are not
    /// counted).
    pub index: usize,
    /// 1-based position inside a `List` or array document.
    pub item: Option<usize>,
    /// The document's first line in its source, when known.
    pub line: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.source, self.index)?;
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        Ok(())
    }
}

/// One parsed document (an item of a list counts as a document).
#[derive(Clone, Debug)]
pub struct Document {
    pub origin: Origin,
    pub value: Value,
}

/// What is wrong with one document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocError {
    pub origin: Origin,
    /// `IPPool "pool-a"`, when the document got far enough to name itself.
    pub object: Option<String>,
    pub message: String,
}

impl fmt::Display for DocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.object {
            Some(o) => write!(f, "{}, {o}: {}", self.origin, self.message),
            None => write!(f, "{}: {}", self.origin, self.message),
        }
    }
}

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

/// A stream of JSON values, each a document.
fn parse_json(source: &str, text: &str) -> Result<Vec<Document>, DocError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(DocError {
            origin: Origin {
                source: source.to_string(),
                index: 1,
                item: None,
                line: None,
            },
            object: None,
            message: format!(
                "{} bytes of JSON; a request may be at most {MAX_DOCUMENT_BYTES} bytes (3 MiB)",
                text.len()
            ),
        });
    }
    // Duplicate keys are refused, as the API server's strict decoding does.
    let dup = serde_json::Deserializer::from_str(text)
        .into_iter::<dup::NoDuplicates>()
        .find_map(|r| {
            r.err()
                .filter(|e| e.to_string().starts_with(dup::DUPLICATE))
        });
    if let Some(e) = dup {
        return Err(DocError {
            origin: Origin {
                source: source.to_string(),
                index: 1,
                item: None,
                line: Some(e.line()),
            },
            object: None,
            message: format!("invalid JSON: {e}"),
        });
    }
    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut index = 0;
    loop {
        let start = stream.byte_offset();
        let line = line_of_next_content(text, start);
        match stream.next() {
            None => return Ok(docs),
            Some(Ok(value)) => {
                index += 1;
                let origin = Origin {
                    source: source.to_string(),
                    index,
                    item: None,
                    line,
                };
                expand(origin, value, &mut docs).map_err(|e| *e)?;
            }
            Some(Err(e)) => {
                return Err(DocError {
                    origin: Origin {
                        source: source.to_string(),
                        index: index + 1,
                        item: None,
                        line,
                    },
                    object: None,
                    message: format!(
                        "invalid JSON at line {}, column {}: {e}",
                        e.line(),
                        e.column()
                    ),
                });
            }
        }
    }
}

/// The 1-based line of the first non-blank character at or after `offset`.
fn line_of_next_content(text: &str, offset: usize) -> Option<usize> {
    let rest = text.get(offset..)?;
    let skip = rest.len() - rest.trim_start().len();
    let at = offset + skip;
    if at >= text.len() {
        return None;
    }
    Some(text[..at].matches('\n').count() + 1)
}

/// One YAML document's text, with the line its first line has in the file.
struct Chunk {
    first_line: usize,
    text: String,
}

/// Splits a YAML stream at its document markers (`---`, `...` at the
/// start of a line). Markers are blanked rather than removed so that
/// columns and line numbers inside each chunk stay those of the file.
fn split_yaml(text: &str) -> impl Iterator<Item = Chunk> + '_ {
    let mut lines = text.lines().enumerate();
    let mut current = Some(Chunk {
        first_line: 1,
        text: String::new(),
    });
    // Lazy, so that a reader stopping at the document cap never builds
    // the chunks past it.
    std::iter::from_fn(move || {
        let chunk = current.as_mut()?;
        for (i, line) in lines.by_ref() {
            let n = i + 1;
            let is_marker = |m: &str| {
                line.strip_prefix(m)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
            };
            if is_marker("---") || is_marker("...") {
                let mut next = Chunk {
                    first_line: n,
                    text: String::new(),
                };
                if is_marker("---") {
                    // `--- {a: 1}`: content may follow the marker.
                    next.text.push_str("   ");
                    next.text.push_str(&line[3..]);
                }
                next.text.push('\n');
                return Some(std::mem::replace(chunk, next));
            }
            chunk.text.push_str(line);
            chunk.text.push('\n');
        }
        current.take()
    })
}

/// The line of a chunk's first content (not blank, not a comment).
fn content_line(chunk: &Chunk) -> Option<usize> {
    chunk.text.lines().enumerate().find_map(|(i, l)| {
        let t = l.trim();
        (!t.is_empty() && !t.starts_with('#')).then_some(chunk.first_line + i)
    })
}

fn parse_yaml(source: &str, text: &str) -> (Vec<Document>, Vec<DocError>) {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let chunks: Vec<(Chunk, usize)> = split_yaml(text)
        .filter_map(|c| content_line(&c).map(|l| (c, l)))
        .take(MAX_DOCUMENTS + 1)
        .collect();
    if chunks.len() > MAX_DOCUMENTS {
        errors.push(DocError {
            origin: Origin {
                source: source.to_string(),
                index: MAX_DOCUMENTS + 1,
                item: None,
                line: Some(chunks[MAX_DOCUMENTS].1),
            },
            object: None,
            message: format!(
                "more than {MAX_DOCUMENTS} documents; at most {MAX_DOCUMENTS} are read from one source"
            ),
        });
        return (docs, errors);
    }
    for (i, (chunk, line)) in chunks.into_iter().enumerate() {
        let origin = Origin {
            source: source.to_string(),
            index: i + 1,
            item: None,
            line: Some(line),
        };
        if chunk.text.len() > MAX_DOCUMENT_BYTES {
            errors.push(DocError {
                origin,
                object: None,
                message: format!(
                    "the document is {} bytes; a request may be at most {MAX_DOCUMENT_BYTES} bytes (3 MiB)",
                    chunk.text.len()
                ),
            });
            continue;
        }
        match serde_saphyr::from_str_with_options::<Value>(&chunk.text, yaml_options()) {
            Ok(value) => {
                if let Err(e) = expand(origin, value, &mut docs) {
                    errors.push(*e);
                }
            }
            Err(e) => {
                let at = e
                    .location()
                    .map(|l| chunk.first_line + l.line() as usize - 1);
                let message = match at {
                    Some(l) => format!("invalid YAML at line {l}: {}", yaml_message(&e)),
                    None => format!("invalid YAML: {}", yaml_message(&e)),
                };
                errors.push(DocError {
                    origin,
                    object: None,
                    message,
                });
            }
        }
    }
    (docs, errors)
}

/// The parser's message on one line, without its source snippet or its
/// own (chunk-relative) position.
fn yaml_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    if let Some(breach) = first.strip_prefix("budget breached: ") {
        return budget_message(breach);
    }
    // Its position is relative to the chunk; ours is the file's.
    let first = match first.rfind(" at line ") {
        Some(i) => &first[..i],
        None => first,
    };
    first.trim_end_matches(['.', ',', ':']).to_string()
}

/// The reader's bound on a document's size once its aliases are expanded
/// (`Nodes { nodes: 250001 } at line …`), said in words.
fn budget_message(breach: &str) -> String {
    let what = breach.split([' ', '{']).next().unwrap_or("");
    let count: String = breach
        .split_once(": ")
        .map(|(_, n)| n.chars().take_while(char::is_ascii_digit).collect())
        .unwrap_or_default();
    let measure = match what {
        "Nodes" => "nodes",
        "Aliases" => "aliases",
        "Anchors" => "anchors",
        "Events" => "parser events",
        "Depth" => "levels of nesting",
        "ScalarBytes" => "bytes of scalars",
        "MergeKeys" => "merge keys",
        "AliasAnchorRatio" => "aliases per anchor",
        _ => "units",
    };
    format!(
        "the YAML is too large once its aliases are expanded: {count} {measure} \
         passed the reader's bound (anchors and aliases that multiply, a \"billion laughs\", are refused)"
    )
}

/// Adds a document, or each item of a list document.
fn expand(origin: Origin, value: Value, out: &mut Vec<Document>) -> Result<(), Box<DocError>> {
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
