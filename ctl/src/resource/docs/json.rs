//! Reading JSON: a stream of values, each a document, with duplicate keys
//! refused and errors placed at their line.

use serde_json::Value;

use super::document::{DocError, Document, Origin};
use super::dup;
use super::expand::expand;
use super::limits::MAX_DOCUMENT_BYTES;

/// A stream of JSON values, each a document.
pub(super) fn parse_json(source: &str, text: &str) -> Result<Vec<Document>, DocError> {
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
