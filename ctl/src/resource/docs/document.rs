//! What reading a source yields: each document with where it came from,
//! and each problem with the document it is about.

use std::fmt;

use serde_json::Value;

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
