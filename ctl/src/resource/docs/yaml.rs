//! Reading YAML: the stream split at its document markers first, each
//! document then parsed alone (so one syntax error hides no other), with
//! lines given in the file's numbering and the reader's bounds in words.

use serde_json::Value;

use super::document::{DocError, Document, Origin};
use super::expand::expand;
use super::limits::{MAX_DOCUMENT_BYTES, MAX_DOCUMENTS};

/// The YAML reader's settings: duplicate keys and unknown tags refused,
/// aliases and events bounded (no "billion laughs").
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        reject_unsupported_tags: true,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
    }
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

pub(super) fn parse_yaml(source: &str, text: &str) -> (Vec<Document>, Vec<DocError>) {
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
