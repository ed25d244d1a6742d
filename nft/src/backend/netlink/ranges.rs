//! Interval sets of one type (`type ipv4_addr; flags interval`): what
//! the kernel holds, and the elements nft 1.0.6 sends to change it.
//!
//! The kernel's rbtree set stores a range `[lo, hi]` as two elements: a
//! start element at `lo` and an end element (flag
//! NFT_SET_ELEM_INTERVAL_END) at `hi + 1`; a range that ends at the top
//! of the type has no `hi + 1`, so it is a start element alone, marked
//! "open" in its userdata. An end element and a start element at the
//! same key are distinct elements, so ranges that touch are kept as
//! they were written. A delete names both elements of the range; the
//! kernel removes whatever start and end elements it is given, so a
//! delete that is not exactly one range written before would leave a
//! different set than nft's (which refuses it): such deletes are left to
//! nft.
//!
//! nft also sends an end element at 0 before the first range of an add
//! command when its view of the set is empty — no element at all, not
//! even that end element from earlier — and the command's lowest range
//! does not start at 0. That view is the kernel's elements when the
//! batch began, or none when the set was flushed earlier in the same
//! batch (or made anew in it): every add command of the batch is judged
//! by it, not by what earlier commands added. Once there, that element
//! stays (deletes never name it) until the set is flushed.
//!
//! Adding elements depends on what the set holds, so the encoder keeps
//! the set's content, learnt from the transactions it observes: from the
//! set made anew (in a table the same transactions removed) or flushed.
//! Without that knowledge, element changes go to nft; so do they for a
//! set given elements with `add set` when it was already there, or in a
//! transaction that also names it in element commands (nft's end
//! element at 0 differs there), and for a set whose elements expire.

use std::collections::BTreeMap;

use nftables::expr::{Expression, NamedExpression};

use super::ops::Bound;
use super::types::DataType;

/// NFTNL_UDATA_SET_ELEM_FLAGS carrying NFTNL_SET_ELEM_F_INTERVAL_OPEN:
/// the userdata nft writes on the start element of a range that ends at
/// the top of the type.
/// nft writes the flags as a u32 in host byte order.
pub const OPEN_USERDATA: [u8; 6] = {
    let v = 1u32.to_ne_bytes();
    [1, 4, v[0], v[1], v[2], v[3]]
};

/// Whether an interval set of type `t` alone is encoded: types whose key
/// bytes compare as their values do (big endian).
pub fn ranged(t: DataType) -> bool {
    matches!(
        t,
        DataType::Ipv4Addr | DataType::Ipv6Addr | DataType::InetService | DataType::InetProto
    )
}

/// The content of a one-type interval set, as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranges {
    /// Each range as written: first key → last key.
    elems: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The end element at 0 is there.
    zero_end: bool,
}

impl Ranges {
    /// A set just made or flushed.
    pub fn bare() -> Ranges {
        Ranges {
            elems: BTreeMap::new(),
            zero_end: false,
        }
    }

    /// No element at all, not even the end element at 0.
    pub fn is_bare(&self) -> bool {
        self.elems.is_empty() && !self.zero_end
    }

    /// Whether `[lo, hi]` meets a range held, other than itself.
    fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        if self.elems.get(lo).is_some_and(|h| h == hi) {
            return false;
        }
        // The last range starting at or below `hi` is the only one that
        // can reach into `[lo, hi]`.
        self.elems
            .range(..=hi.to_vec())
            .next_back()
            .is_some_and(|(_, h)| h.as_slice() >= lo)
    }

    /// Apply an add (`add`) or a delete of `spans` as the kernel would,
    /// when nft would send it, in a batch that began with the set `bare`:
    /// `None` when nft would refuse it (ranges overlapping each other or
    /// a range held; a delete of anything but a range held) or it is not
    /// encoded.
    pub fn apply(&mut self, add: bool, bare: bool, spans: &[(Vec<u8>, Vec<u8>)]) -> Option<()> {
        if spans.is_empty() {
            return None;
        }
        if add {
            let mut sorted: Vec<_> = spans.iter().collect();
            sorted.sort();
            for w in sorted.windows(2) {
                if w[1].0 <= w[0].1 {
                    return None;
                }
            }
            if sorted.iter().any(|(lo, hi)| self.overlaps(lo, hi)) {
                return None;
            }
            if bare && sorted[0].0.iter().any(|b| *b != 0) {
                self.zero_end = true;
            }
            for (lo, hi) in sorted {
                self.elems.insert(lo.clone(), hi.clone());
            }
        } else {
            for (lo, hi) in spans {
                if self.elems.get(lo) != Some(hi) {
                    return None;
                }
                self.elems.remove(lo);
            }
        }
        Some(())
    }
}

/// The elements nft sends for an add or a delete of `spans` on a set
/// that was `bare` when the batch began (see the module's comment).
pub fn bounds(add: bool, bare: bool, spans: &[(Vec<u8>, Vec<u8>)]) -> Vec<Bound> {
    let mut spans: Vec<&(Vec<u8>, Vec<u8>)> = spans.iter().collect();
    let mut out = Vec::with_capacity(spans.len() * 2 + 1);
    if add {
        // Sorted, as nft sends them.
        spans.sort();
        if let Some((lo, _)) = spans.first()
            && bare
            && lo.iter().any(|b| *b != 0)
        {
            out.push(Bound {
                key: vec![0; lo.len()],
                end: true,
                open: false,
            });
        }
    }
    for (lo, hi) in spans {
        match successor(hi) {
            Some(next) => {
                out.push(Bound {
                    key: lo.clone(),
                    end: false,
                    open: false,
                });
                out.push(Bound {
                    key: next,
                    end: true,
                    open: false,
                });
            }
            None => out.push(Bound {
                key: lo.clone(),
                end: false,
                open: true,
            }),
        }
    }
    out
}

/// The key one above `k` (big endian); `None` for the top of the type.
fn successor(k: &[u8]) -> Option<Vec<u8>> {
    let mut next = k.to_vec();
    for b in next.iter_mut().rev() {
        if *b == 0xff {
            *b = 0;
        } else {
            *b += 1;
            return Some(next);
        }
    }
    None
}

/// An element of a set of type `t` as an inclusive range of key bytes:
/// a value, a range of values, or (for addresses) a prefix without host
/// bits. `None` for anything else, an empty range, or a prefix with
/// host bits set (nft clears them; left to it).
pub fn span(t: DataType, e: &Expression) -> Option<(Vec<u8>, Vec<u8>)> {
    match e {
        Expression::Named(NamedExpression::Prefix(p)) => {
            if !matches!(t, DataType::Ipv4Addr | DataType::Ipv6Addr) {
                return None;
            }
            let addr = t.encode(&p.addr)?;
            let bits = addr.len() * 8;
            let len = usize::try_from(p.len).ok()?;
            if len > bits {
                return None;
            }
            let mut hi = addr.clone();
            for (i, b) in hi.iter_mut().enumerate() {
                // Bits of this byte past the prefix.
                let host = bits_after(len, i);
                if addr[i] & host != 0 {
                    return None;
                }
                *b |= host;
            }
            Some((addr, hi))
        }
        Expression::Range(_) | Expression::String(_) | Expression::Number(_) => t.encode_span(e),
        _ => None,
    }
}

/// The mask of byte `i`'s bits beyond the first `len` bits of a key.
fn bits_after(len: usize, i: usize) -> u8 {
    let start = i * 8;
    if len <= start {
        0xff
    } else if len >= start + 8 {
        0
    } else {
        0xff >> (len - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sp(t: DataType, v: serde_json::Value) -> Option<(Vec<u8>, Vec<u8>)> {
        span(t, &serde_json::from_value(v).unwrap())
    }

    #[test]
    fn elements_are_ranges_of_key_bytes() {
        let v4 = DataType::Ipv4Addr;
        assert_eq!(
            sp(v4, json!({"prefix": {"addr": "10.0.0.0", "len": 23}})),
            Some((vec![10, 0, 0, 0], vec![10, 0, 1, 255]))
        );
        assert_eq!(
            sp(v4, json!({"prefix": {"addr": "0.0.0.0", "len": 0}})),
            Some((vec![0; 4], vec![255; 4]))
        );
        assert_eq!(
            sp(v4, json!({"prefix": {"addr": "10.0.0.5", "len": 24}})),
            None
        );
        assert_eq!(
            sp(v4, json!({"prefix": {"addr": "10.0.0.0", "len": 33}})),
            None
        );
        assert_eq!(sp(v4, json!({"range": ["10.0.0.9", "10.0.0.1"]})), None);
        assert_eq!(
            sp(DataType::InetService, json!({"range": [80, 90]})),
            Some((vec![0, 80], vec![0, 90]))
        );
        assert_eq!(
            sp(
                DataType::InetService,
                json!({"prefix": {"addr": "10.0.0.0", "len": 8}})
            ),
            None
        );
    }

    #[test]
    fn a_range_is_a_start_and_the_end_one_past_it() {
        let r = |lo: [u8; 4], hi: [u8; 4]| (lo.to_vec(), hi.to_vec());
        let b = bounds(
            true,
            true,
            &[
                r([128, 0, 0, 0], [255; 4]),
                r([10, 0, 0, 0], [10, 0, 0, 255]),
            ],
        );
        let keys: Vec<_> = b.iter().map(|b| (b.key.clone(), b.end, b.open)).collect();
        assert_eq!(
            keys,
            vec![
                (vec![0; 4], true, false),
                (vec![10, 0, 0, 0], false, false),
                (vec![10, 0, 1, 0], true, false),
                (vec![128, 0, 0, 0], false, true),
            ]
        );
        // Not bare, or starting at 0: no end element at 0.
        assert_eq!(bounds(true, false, &[r([10, 0, 0, 0], [10; 4])]).len(), 2);
        assert_eq!(bounds(true, true, &[r([0; 4], [10; 4])]).len(), 2);
    }

    #[test]
    fn only_ranges_held_are_deleted_and_overlaps_are_refused() {
        let r = |lo: u8, hi: u8| (vec![lo], vec![hi]);
        let mut s = Ranges::bare();
        assert_eq!(s.apply(true, true, &[r(10, 19), r(30, 39)]), Some(()));
        assert!(!s.is_bare());
        // Touching is fine, overlapping is not; a range held again is.
        assert_eq!(s.clone().apply(true, false, &[r(20, 29)]), Some(()));
        assert_eq!(s.clone().apply(true, false, &[r(10, 19)]), Some(()));
        assert_eq!(s.clone().apply(true, false, &[r(15, 25)]), None);
        assert_eq!(s.clone().apply(true, false, &[r(0, 10)]), None);
        assert_eq!(s.clone().apply(true, false, &[r(0, 255)]), None);
        assert_eq!(s.clone().apply(true, false, &[r(40, 50), r(50, 60)]), None);
        assert_eq!(s.clone().apply(false, false, &[r(10, 15)]), None);
        assert_eq!(s.clone().apply(false, false, &[r(10, 39)]), None);
        assert_eq!(s.apply(false, false, &[r(10, 19), r(30, 39)]), Some(()));
        // The end element at 0 stays.
        assert!(s.elems.is_empty() && !s.is_bare());
        // A range from 0 sends none: emptied, the set is bare again.
        let mut s = Ranges::bare();
        s.apply(true, true, &[r(0, 9)]).unwrap();
        s.apply(false, false, &[r(0, 9)]).unwrap();
        assert!(s.is_bare());
    }
}
