//! What is taken of one range (the service range, the NodePorts, the LB
//! range): a [`Bitmap`] over its members, and who holds what where that
//! is known. Built from a stored RangeAllocation (holders unknown, only
//! the Services being written are named) or from a listing of every
//! Service (holders known, for messages and for repair). Values outside
//! the range have no bit; only named holders track them. Pure.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use super::bitmap::Bitmap;

/// A member of a range: an address or a port, as a number (wide enough
/// for an IPv6 address).
pub trait Member: Copy + Ord {
    fn number(self) -> u128;
    fn from_number(n: u128) -> Option<Self>;
}

impl Member for Ipv4Addr {
    fn number(self) -> u128 {
        u128::from(u32::from(self))
    }
    fn from_number(n: u128) -> Option<Self> {
        u32::try_from(n).ok().map(Ipv4Addr::from)
    }
}

impl Member for Ipv6Addr {
    fn number(self) -> u128 {
        u128::from(self)
    }
    fn from_number(n: u128) -> Option<Self> {
        Some(Ipv6Addr::from(n))
    }
}

impl Member for u16 {
    fn number(self) -> u128 {
        u128::from(self)
    }
    fn from_number(n: u128) -> Option<Self> {
        u16::try_from(n).ok()
    }
}

/// Who holds a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// The Service `namespace/name`.
    Service(String),
    /// Taken in the stored bitmap, holder not read.
    Unknown,
}

impl Holder {
    pub fn is(&self, key: &str) -> bool {
        matches!(self, Holder::Service(k) if k == key)
    }
}

impl fmt::Display for Holder {
    /// The end of an "is already allocated" message: ` to Service a/b`,
    /// or nothing (the API server's own text names no holder either).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Holder::Service(k) => write!(f, " to Service {k}"),
            Holder::Unknown => Ok(()),
        }
    }
}

/// What is taken of one range.
#[derive(Clone, Debug)]
pub struct Claims<A> {
    first: u128,
    /// The offsets handed out when nothing is asked for.
    usable: Range<u64>,
    bits: Bitmap,
    holders: BTreeMap<A, String>,
}

impl<A: Member> Claims<A> {
    /// `len` members from `first`, none taken; `usable` are the offsets
    /// handed out by [`Claims::take`].
    pub fn new(first: A, len: u64, usable: Range<u64>) -> Claims<A> {
        Claims::with_bits(first, Bitmap::new(len), usable)
    }

    /// As stored.
    pub fn with_bits(first: A, bits: Bitmap, usable: Range<u64>) -> Claims<A> {
        Claims {
            first: first.number(),
            usable,
            bits,
            holders: BTreeMap::new(),
        }
    }

    pub fn bits(&self) -> &Bitmap {
        &self.bits
    }

    fn offset(&self, a: A) -> Option<u64> {
        let n = u64::try_from(a.number().checked_sub(self.first)?).ok()?;
        (n < self.bits.len()).then_some(n)
    }

    /// Whether `a` is a member of the range.
    pub fn contains(&self, a: A) -> bool {
        self.offset(a).is_some()
    }

    /// Who holds `a`, if anyone.
    pub fn holder(&self, a: A) -> Option<Holder> {
        if let Some(k) = self.holders.get(&a) {
            return Some(Holder::Service(k.clone()));
        }
        self.offset(a)
            .filter(|i| self.bits.get(*i))
            .map(|_| Holder::Unknown)
    }

    /// `a` taken by `key`; who held it before (then nothing changes).
    pub fn insert(&mut self, a: A, key: &str) -> Option<Holder> {
        if let Some(h) = self.holder(a) {
            return Some(h);
        }
        if let Some(i) = self.offset(a) {
            self.bits.put(i, true);
        }
        self.holders.insert(a, key.to_string());
        None
    }

    /// `a` free again.
    pub fn remove(&mut self, a: A) {
        if let Some(i) = self.offset(a) {
            self.bits.put(i, false);
        }
        self.holders.remove(&a);
    }

    /// The lowest usable member nobody holds, now held by `key`.
    pub fn take(&mut self, key: &str) -> Option<A> {
        let mut from = self.usable.start;
        loop {
            let i = self.bits.first_free(from, self.usable.end)?;
            let a = A::from_number(self.first.checked_add(u128::from(i))?)?;
            if self.insert(a, key).is_none() {
                return Some(a);
            }
            from = i + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_by_whom_and_lowest_free() {
        let mut c: Claims<u16> = Claims::new(30000, 8, 0..8);
        assert_eq!(c.insert(30001, "a/x"), None);
        assert_eq!(c.insert(30001, "a/y"), Some(Holder::Service("a/x".into())));
        assert_eq!(c.take("a/y"), Some(30000));
        assert_eq!(c.take("a/y"), Some(30002));
        // A stored bitmap names nobody.
        let stored = Claims::<u16>::with_bits(30000, c.bits().clone(), 0..8);
        assert_eq!(stored.holder(30001), Some(Holder::Unknown));
        assert_eq!(stored.holder(30003), None);
        // Outside the range: no bit, only the named holder.
        assert_eq!(c.insert(8080, "a/z"), None);
        assert!(c.holder(8080).unwrap().is("a/z"));
        c.remove(30001);
        assert_eq!(c.take("a/w"), Some(30001));
        let mut full: Claims<u16> = Claims::new(1, 2, 0..2);
        full.take("k");
        full.take("k");
        assert_eq!(full.take("k"), None);
    }
}
