//! The values this process last read or wrote at a few keys, each with
//! its revision. An update carries the stored object's identity fields
//! (uid, creation time, generation) over from the stored value; when the
//! process has that value at the revision it updates from (a CNI ADD has
//! just read the block it takes an address from), the update is one
//! transaction instead of a read and a transaction. The transaction also
//! compares the stored value with the one kept, so a kept value that is
//! not the stored one (a store restored from a backup reusing revisions)
//! fails the compare and the update reads the stored value as before.
//!
//! Only single reads and writes are kept, never listings or watches, and
//! by default only a few: the least recently kept go first. A writer that
//! updates many keys in turn (the scale bench's kubelets, standing in for
//! an API server whose watch cache holds every object) sets larger bounds.

use std::collections::HashMap;
use std::sync::Arc;

/// By default at most this many values are kept...
const MAX_ENTRIES: usize = 128;
/// ...of at most this many bytes together; a value over an eighth of the
/// bytes is not kept.
const MAX_BYTES: usize = 1 << 20;

/// One value kept: when (a count of keeps), its revision and its bytes.
struct Kept {
    when: u64,
    revision: i64,
    value: Arc<[u8]>,
}

pub(super) struct Recent {
    kept: HashMap<Vec<u8>, Kept>,
    bytes: usize,
    next: u64,
    max_entries: usize,
    max_bytes: usize,
}

impl Default for Recent {
    fn default() -> Self {
        Recent::bounded(MAX_ENTRIES, MAX_BYTES)
    }
}

impl Recent {
    /// Keeping at most `entries` values of at most `bytes` together. The
    /// oldest is found by a walk over all kept, so the bounds are meant
    /// to hold the working set, not to be exceeded at every keep.
    pub(super) fn bounded(entries: usize, bytes: usize) -> Self {
        Recent {
            kept: HashMap::new(),
            bytes: 0,
            next: 0,
            max_entries: entries,
            max_bytes: bytes,
        }
    }

    /// The value at `key` if the one kept is at `revision`.
    pub(super) fn at(&self, key: &[u8], revision: i64) -> Option<Arc<[u8]>> {
        match self.kept.get(key) {
            Some(k) if k.revision == revision => Some(k.value.clone()),
            _ => None,
        }
    }

    /// Keep `value`, stored at `key` at `revision`.
    pub(super) fn keep(&mut self, key: &[u8], revision: i64, value: &[u8]) {
        self.forget(key);
        if value.len() > self.max_bytes / 8 || self.max_entries == 0 {
            return;
        }
        let when = self.next;
        self.next += 1;
        self.bytes += value.len();
        let value = Arc::from(value);
        self.kept.insert(
            key.to_vec(),
            Kept {
                when,
                revision,
                value,
            },
        );
        // A search for the oldest: the few kept are cheaper to walk than
        // an order to maintain beside them.
        while self.kept.len() > self.max_entries || self.bytes > self.max_bytes {
            let Some(oldest) = self
                .kept
                .iter()
                .min_by_key(|(_, e)| e.when)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.forget(&oldest);
        }
    }

    /// Keep nothing for `key`.
    pub(super) fn forget(&mut self, key: &[u8]) {
        if let Some(k) = self.kept.remove(key) {
            self.bytes -= k.value.len();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_given_back_at_its_revision_only() {
        let mut r = Recent::default();
        r.keep(b"k", 7, b"v7");
        assert_eq!(r.at(b"k", 7).as_deref(), Some(&b"v7"[..]));
        assert_eq!(r.at(b"k", 8), None);
        r.keep(b"k", 9, b"v9");
        assert_eq!(r.at(b"k", 7), None);
        assert_eq!(r.at(b"k", 9).as_deref(), Some(&b"v9"[..]));
        r.forget(b"k");
        assert_eq!(r.at(b"k", 9), None);
        assert_eq!(r.bytes, 0);
    }

    #[test]
    fn the_least_recently_kept_go_first_and_the_bounds_hold() {
        let mut r = Recent::default();
        for i in 0..(MAX_ENTRIES as i64 + 10) {
            r.keep(format!("k{i}").as_bytes(), i, b"v");
            // A key kept again and again is recent, whenever first kept.
            r.keep(b"hot", i, b"h");
        }
        assert_eq!(r.len(), MAX_ENTRIES);
        assert!(r.at(b"hot", MAX_ENTRIES as i64 + 9).is_some());
        assert_eq!(r.at(b"k0", 0), None, "the oldest went first");
        let last = MAX_ENTRIES as i64 + 9;
        assert!(r.at(format!("k{last}").as_bytes(), last).is_some());
        // Bytes: a value over an eighth of the budget is not kept; many
        // large ones stay under the budget.
        r.keep(b"huge", 1, &vec![0u8; MAX_BYTES / 8 + 1]);
        assert_eq!(r.at(b"huge", 1), None);
        for i in 0..20 {
            r.keep(format!("big{i}").as_bytes(), i, &vec![0u8; MAX_BYTES / 8]);
        }
        assert!(r.bytes <= MAX_BYTES);
        assert_eq!(
            r.bytes,
            r.kept.values().map(|e| e.value.len()).sum::<usize>()
        );
    }

    #[test]
    fn larger_bounds_keep_more_and_none_keep_nothing() {
        let mut r = Recent::bounded(1000, 1 << 20);
        for i in 0..1000 {
            r.keep(format!("k{i}").as_bytes(), i, b"v");
        }
        assert_eq!(r.len(), 1000);
        assert!(r.at(b"k0", 0).is_some(), "nothing went while within bounds");
        r.keep(b"one more", 1, b"v");
        assert_eq!(r.len(), 1000);
        assert_eq!(r.at(b"k0", 0), None, "the oldest went first");

        let mut none = Recent::bounded(0, 1 << 20);
        none.keep(b"k", 1, b"v");
        assert_eq!(none.at(b"k", 1), None);
        assert_eq!(none.bytes, 0);
    }
}
