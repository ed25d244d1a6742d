//! What a JSON patch may build. A patch body is small, but its operations
//! are not: each `copy` may double the document, and a `move` can carry a
//! value a level deeper each time (`add /w {}`, `move /d → /w/d`,
//! `move /w → /d`), past any depth a request body could have and on to
//! overflow the stack of the recursive code that reads the result. So, as
//! the API server: at most [`MAX_OPERATIONS`] operations, and copies that
//! add at most [`MAX_COPY_BYTES`] in all; and the stand-in's own bound,
//! no value nested deeper than [`MAX_DEPTH`].

use std::io;

use serde_json::Value;

use super::PatchError;

/// The API server's `maxJSONPatchOperations`; more is a 413.
pub const MAX_OPERATIONS: usize = 10_000;

/// The API server's default `JSONPatchMaxCopyBytes`: twice etcd's 1.5 MiB
/// request limit, counted as the JSON the copied values take.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Levels of arrays and objects that serde_json reads in a request body
/// (its recursion limit of 128 refuses the 128th level), so that a patched
/// object is no deeper than one that could have been written whole.
pub const MAX_DEPTH: usize = 127;

/// Levels of arrays and objects in `v` (a scalar: 0). Iterative, so that
/// it measures a value of any depth.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut todo = vec![(v, 0)];
    while let Some((v, above)) = todo.pop() {
        let level = above + 1;
        match v {
            Value::Array(a) => todo.extend(a.iter().map(|c| (c, level))),
            Value::Object(m) => todo.extend(m.values().map(|c| (c, level))),
            _ => continue,
        }
        deepest = deepest.max(level);
    }
    deepest
}

/// Refuses placing `v` at `path` when that nests the document deeper than
/// [`MAX_DEPTH`] (a value at a path of n tokens sits inside n levels).
pub fn fits(path: &[String], v: &Value) -> Result<(), PatchError> {
    let levels = path.len() + depth(v);
    if levels > MAX_DEPTH {
        return Err(PatchError::Invalid(format!(
            "the patched object would nest {levels} levels deep; at most {MAX_DEPTH} are allowed"
        )));
    }
    Ok(())
}

/// Counts the bytes written through it.
struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What the copies of one patch have added so far.
#[derive(Debug, Default)]
pub struct CopyBudget(usize);

impl CopyBudget {
    /// Spends the JSON size of `v`, a value about to be copied; past
    /// [`MAX_COPY_BYTES`] the patch fails, in the API server's words.
    pub fn spend(&mut self, v: &Value) -> Result<(), PatchError> {
        let mut n = Count(0);
        // Writing to `Count` cannot fail.
        let _ = serde_json::to_writer(&mut n, v);
        self.0 += n.0;
        if self.0 > MAX_COPY_BYTES {
            return Err(PatchError::Invalid(format!(
                "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
                self.0
            )));
        }
        Ok(())
    }
}
