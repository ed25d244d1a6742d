//! What a watch remembers of what it told its consumer: per object, its
//! key and the resourceVersion it was told of. The record has an entry per
//! object of the kind (150,000 pods at 5,000 nodes), so an entry is 24
//! bytes and one allocation: the key as one string, the version as a
//! number. A version that is not a plain number (Kubernetes calls them
//! opaque; every backend here writes numbers) is kept aside as text.
//!
//! A relist marks the entries it finds in the entry itself, not in a
//! second set of keys, so that listing a large kind holds no copy of its
//! keys; what is left unmarked at the end is gone.

use std::collections::HashMap;

use crate::store::DynamicObject;

/// An object's key in the record: `namespace/name`, or `/name` for a
/// cluster-wide one (a namespace never contains `/`).
pub(super) type Key = Box<str>;

pub(super) fn record_key(o: &DynamicObject) -> Key {
    let ns = o.metadata.namespace.as_deref().unwrap_or("");
    let name = o.metadata.name.as_deref().unwrap_or("");
    let mut k = String::with_capacity(ns.len() + 1 + name.len());
    k.push_str(ns);
    k.push('/');
    k.push_str(name);
    k.into_boxed_str()
}

/// A [`Key`]'s namespace (empty for none) and name, borrowed.
pub(super) fn key_parts(k: &str) -> (&str, &str) {
    k.split_once('/').unwrap_or(("", k))
}

/// The (namespace, name) of a [`Key`].
pub(super) fn split_key(k: &str) -> (Option<String>, String) {
    let (ns, name) = key_parts(k);
    ((!ns.is_empty()).then(|| ns.to_string()), name.to_string())
}

/// The top bit: found by the listing under way.
const LISTED: u64 = 1 << 63;
/// The version is kept as text ([`Record::odd`]).
const ODD: u64 = LISTED - 1;

/// `rv` as a number when it is one in its plain decimal form and below
/// [`ODD`]; else `None` (absent, or text to keep as it is).
fn plain(rv: Option<&str>) -> Option<u64> {
    let s = rv?;
    let digits =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    s.parse::<u64>().ok().filter(|n| digits && *n < ODD)
}

/// What a listing found of one object against the record.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Not told of before.
    New,
    /// Told of at another version.
    Changed,
    /// Told of at this version.
    Same,
    /// Already found by this listing (a page repeating an object).
    Again,
}

/// The record of one watch.
#[derive(Debug, Default)]
pub(super) struct Record {
    /// The version told of, [`ODD`] for one kept in `odd`; the top bit
    /// [`LISTED`] while a listing is under way.
    told: HashMap<Key, u64>,
    /// Versions that are not plain numbers (`None`: absent).
    odd: HashMap<Key, Option<Box<str>>>,
}

impl Record {
    pub(super) fn len(&self) -> usize {
        self.told.len()
    }

    /// Whether `k` was told of at `rv`; `None` when not told of at all.
    pub(super) fn told_at(&self, k: &str, rv: Option<&str>) -> Option<bool> {
        let v = self.told.get(k)? & !LISTED;
        Some(match plain(rv) {
            Some(n) => v == n,
            None => v == ODD && self.odd.get(k).map(|t| t.as_deref()) == Some(rv),
        })
    }

    /// `k` told of at `rv` (`listed`: found by the listing under way).
    pub(super) fn tell(&mut self, k: Key, rv: Option<&str>, listed: bool) {
        let mark = if listed { LISTED } else { 0 };
        match plain(rv) {
            Some(n) => {
                self.odd.remove(&k);
                self.told.insert(k, n | mark);
            }
            None => {
                self.odd.insert(k.clone(), rv.map(Into::into));
                self.told.insert(k, ODD | mark);
            }
        }
    }

    /// Forget `k`: `Some(version told of)` when it was told of.
    pub(super) fn forget(&mut self, k: &str) -> Option<Option<String>> {
        let v = self.told.remove(k)? & !LISTED;
        let odd = self.odd.remove(k);
        Some(match v {
            ODD => odd.flatten().map(String::from),
            n => Some(n.to_string()),
        })
    }

    /// A listing starts: nothing is found yet (a listing that failed
    /// half-way left marks).
    pub(super) fn start_listing(&mut self) {
        self.told.values_mut().for_each(|v| *v &= !LISTED);
    }

    /// A listing found `k` at `rv`: recorded, and what it was before.
    pub(super) fn found(&mut self, k: Key, rv: Option<&str>) -> Found {
        let before = match self.told.get(&k) {
            Some(v) if v & LISTED != 0 => return Found::Again,
            Some(_) if self.told_at(&k, rv) == Some(true) => Found::Same,
            Some(_) => Found::Changed,
            None => Found::New,
        };
        self.tell(k, rv, true);
        before
    }

    /// The listing is complete: the objects it did not find, forgotten,
    /// with the version each was told of, in key order; the marks cleared.
    pub(super) fn end_listing(&mut self) -> Vec<(Key, Option<String>)> {
        let mut gone: Vec<Key> = self
            .told
            .iter()
            .filter(|(_, v)| *v & LISTED == 0)
            .map(|(k, _)| k.clone())
            .collect();
        gone.sort_by(|a, b| key_parts(a).cmp(&key_parts(b)));
        let out = gone
            .into_iter()
            .map(|k| {
                let rv = self.forget(&k).flatten();
                (k, rv)
            })
            .collect();
        self.start_listing();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_read_back_as_they_were_told() {
        let mut r = Record::default();
        let cases = [
            None,
            Some("0"),
            Some("123"),
            Some("007"),
            Some("+5"),
            Some(""),
            Some("abc"),
            Some("9223372036854775807"),
            Some("18446744073709551615"),
            Some("18446744073709551616"),
        ];
        for (i, rv) in cases.iter().enumerate() {
            let k: Key = format!("ns/o{i}").into();
            r.tell(k.clone(), *rv, false);
            assert_eq!(r.told_at(&k, *rv), Some(true), "{rv:?}");
            for other in cases.iter().filter(|o| *o != rv) {
                assert_eq!(r.told_at(&k, *other), Some(false), "{rv:?} / {other:?}");
            }
        }
        for (i, rv) in cases.iter().enumerate() {
            let k = format!("ns/o{i}");
            assert_eq!(r.forget(&k), Some(rv.map(String::from)), "{rv:?}");
            assert_eq!(r.forget(&k), None);
        }
        assert!(r.odd.is_empty());
        assert_eq!(r.told_at("ns/x", Some("1")), None);
    }

    #[test]
    fn a_listing_finds_marks_and_forgets_what_it_did_not_find() {
        let mut r = Record::default();
        r.tell("a/kept".into(), Some("1"), false);
        r.tell("a/changed".into(), Some("1"), false);
        r.tell("a/gone".into(), Some("1"), false);
        r.tell("/gone-too".into(), Some("opaque"), false);
        // A listing that failed half-way.
        r.start_listing();
        assert_eq!(r.found("a/gone".into(), Some("1")), Found::Same);
        // The listing that completes.
        r.start_listing();
        assert_eq!(r.found("a/kept".into(), Some("1")), Found::Same);
        assert_eq!(r.found("a/changed".into(), Some("2")), Found::Changed);
        assert_eq!(r.found("a/new".into(), None), Found::New);
        assert_eq!(r.found("a/kept".into(), Some("1")), Found::Again);
        let gone = r.end_listing();
        assert_eq!(
            gone,
            [
                ("/gone-too".into(), Some("opaque".to_string())),
                ("a/gone".into(), Some("1".to_string())),
            ]
        );
        assert_eq!(r.len(), 3);
        // Marks cleared: the next listing finds them anew.
        assert_eq!(r.found("a/kept".into(), Some("1")), Found::Same);
        assert_eq!(r.told_at("a/changed", Some("2")), Some(true));
        assert_eq!(r.told_at("a/new", None), Some(true));
        assert_eq!(split_key("a/kept"), (Some("a".into()), "kept".into()));
        assert_eq!(split_key("/gone-too"), (None, "gone-too".into()));
    }
}
