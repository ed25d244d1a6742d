//! One address family's prefixes: a dense slab of 12-byte (IPv4) or
//! 24-byte (IPv6) slots, each holding its prefix and, inline, its single
//! path; a hash index of slot numbers; and a side slab for the prefixes
//! that have several paths. Slot numbers index the per-peer output bit
//! sets, so a slot is reused only once no peer has it pending or held.

use super::attrs::AttrId;
use crate::model::Family;
use hashbrown::{DefaultHashBuilder, HashTable};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::hash::{BuildHasher, Hash};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The internal index of a peer (0 is the local pseudo-peer).
pub(crate) type PeerIdx = u16;

/// One path of a prefix: a peer and an attribute set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Path {
    pub attr: AttrId,
    pub peer: PeerIdx,
    /// RFC 4724: kept from a restarting peer, to be swept unless refreshed.
    pub stale: bool,
}

/// An address type a table is keyed on.
pub(crate) trait Addr: Copy + Eq + Hash + std::fmt::Debug {
    const FAMILY: Family;
    fn net(self, len: u8) -> IpNet;
    /// The prefix as a number: its `len` leading bits.
    fn prefix_number(self, len: u8) -> u128;
}

impl Addr for Ipv4Addr {
    const FAMILY: Family = Family::Ipv4Unicast;
    fn prefix_number(self, len: u8) -> u128 {
        u128::from(
            u32::from(self)
                .checked_shr(32 - u32::from(len.min(32)))
                .unwrap_or(0),
        )
    }
    fn net(self, len: u8) -> IpNet {
        IpNet::V4(Ipv4Net::new_assert(self, len.min(32)))
    }
}

impl Addr for Ipv6Addr {
    const FAMILY: Family = Family::Ipv6Unicast;
    fn prefix_number(self, len: u8) -> u128 {
        u128::from(self)
            .checked_shr(128 - u32::from(len.min(128)))
            .unwrap_or(0)
    }
    fn net(self, len: u8) -> IpNet {
        IpNet::V6(Ipv6Net::new_assert(self, len.min(128)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// On the free list.
    Free,
    /// No paths, but some peer still holds it or has it pending: kept until
    /// the withdraw has gone out.
    Empty,
    /// One path, inline: `peer` and `val` (attribute id).
    One,
    OneStale,
    /// Several paths: `val` indexes `Table::multi`.
    Many,
}

/// The fields are flat (not a nested Path) so that an IPv4 slot is 12 bytes.
#[derive(Debug, Clone, Copy)]
struct Slot<A> {
    addr: A,
    len: u8,
    kind: Kind,
    peer: PeerIdx,
    val: u32,
}

#[derive(Debug)]
pub(crate) struct Table<A> {
    slots: Vec<Slot<A>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    multi: Vec<Vec<Path>>,
    multi_free: Vec<u32>,
    hasher: DefaultHashBuilder,
    /// Slots that hold a prefix (with or without paths).
    live: usize,
}

impl<A: Addr> Default for Table<A> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
            index: HashTable::new(),
            multi: Vec::new(),
            multi_free: Vec::new(),
            hasher: DefaultHashBuilder::default(),
            live: 0,
        }
    }
}

impl<A: Addr> Table<A> {
    /// Runs of up to 256 consecutive prefixes of one length (e.g. the
    /// /24s of a /16) hash to consecutive buckets: UPDATEs carry such runs,
    /// and neighbouring buckets share cache lines. The block above them is
    /// hashed with a random key, so the runs land far apart.
    fn hash(&self, addr: A, len: u8) -> u64 {
        hash_prefix(&self.hasher, addr, len)
    }

    pub fn find(&self, addr: A, len: u8) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(self.hash(addr, len), |&i| {
                let s = &slots[i as usize];
                s.addr == addr && s.len == len
            })
            .copied()
    }

    /// The slot of a prefix, created (with no paths) if absent.
    pub fn find_or_insert(&mut self, addr: A, len: u8) -> u32 {
        let hash = self.hash(addr, len);
        let slots = &mut self.slots;
        let entry = self.index.entry(
            hash,
            |&i| {
                let s = &slots[i as usize];
                s.addr == addr && s.len == len
            },
            |&i| {
                let s = &slots[i as usize];
                hash_prefix(&self.hasher, s.addr, s.len)
            },
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(o) => *o.get(),
            hashbrown::hash_table::Entry::Vacant(v) => {
                let slot = Slot {
                    addr,
                    len,
                    kind: Kind::Empty,
                    peer: 0,
                    val: 0,
                };
                let i = match self.free.pop() {
                    Some(i) => {
                        slots[i as usize] = slot;
                        i
                    }
                    None => {
                        slots.push(slot);
                        (slots.len() - 1) as u32
                    }
                };
                v.insert(i);
                self.live += 1;
                i
            }
        }
    }

    /// Releases an empty slot. The caller has checked that no peer has it
    /// pending or advertised.
    pub fn free_slot(&mut self, i: u32) {
        let Some(s) = self.slots.get(i as usize).copied() else {
            return;
        };
        if s.kind != Kind::Empty {
            return;
        }
        let hash = self.hash(s.addr, s.len);
        if let Ok(e) = self.index.find_entry(hash, |&j| j == i) {
            e.remove();
        }
        self.slots[i as usize].kind = Kind::Free;
        self.free.push(i);
        self.live -= 1;
    }

    /// One past the highest slot number in use.
    pub fn slot_count(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn prefix(&self, i: u32) -> IpNet {
        let s = &self.slots[i as usize];
        s.addr.net(s.len)
    }

    pub fn is_empty_slot(&self, i: u32) -> bool {
        self.slots
            .get(i as usize)
            .is_some_and(|s| s.kind == Kind::Empty)
    }

    /// Number of prefixes with at least one path.
    pub fn prefix_count(&self) -> usize {
        self.live - self.slots.iter().filter(|s| s.kind == Kind::Empty).count()
    }

    /// Slot numbers of every prefix that has paths.
    pub fn occupied(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !matches!(s.kind, Kind::Free | Kind::Empty))
            .map(|(i, _)| i as u32)
    }

    /// Calls `f` with the paths of slot `i` (none for an empty slot).
    pub fn with_paths<R>(&self, i: u32, f: impl FnOnce(&[Path]) -> R) -> R {
        let s = &self.slots[i as usize];
        match s.kind {
            Kind::Free | Kind::Empty => f(&[]),
            Kind::One | Kind::OneStale => f(&[Path {
                attr: AttrId(s.val),
                peer: s.peer,
                stale: s.kind == Kind::OneStale,
            }]),
            Kind::Many => f(&self.multi[s.val as usize]),
        }
    }

    /// Adds or replaces `path.peer`'s path; returns the replaced one.
    pub fn upsert(&mut self, i: u32, path: Path) -> Option<Path> {
        let s = &mut self.slots[i as usize];
        match s.kind {
            Kind::Free | Kind::Empty => {
                set_one(s, path);
                None
            }
            Kind::One | Kind::OneStale => {
                let old = Path {
                    attr: AttrId(s.val),
                    peer: s.peer,
                    stale: s.kind == Kind::OneStale,
                };
                if old.peer == path.peer {
                    set_one(s, path);
                    return Some(old);
                }
                let v = vec![old, path];
                let m = match self.multi_free.pop() {
                    Some(m) => {
                        self.multi[m as usize] = v;
                        m
                    }
                    None => {
                        self.multi.push(v);
                        (self.multi.len() - 1) as u32
                    }
                };
                s.kind = Kind::Many;
                s.val = m;
                None
            }
            Kind::Many => {
                let v = &mut self.multi[s.val as usize];
                match v.iter_mut().find(|p| p.peer == path.peer) {
                    Some(p) => Some(std::mem::replace(p, path)),
                    None => {
                        v.push(path);
                        None
                    }
                }
            }
        }
    }

    /// Removes the paths of slot `i` for which `pred` holds; `removed`
    /// gets them.
    pub fn remove_where(
        &mut self,
        i: u32,
        mut pred: impl FnMut(&Path) -> bool,
        removed: &mut Vec<Path>,
    ) {
        let s = &mut self.slots[i as usize];
        match s.kind {
            Kind::Free | Kind::Empty => {}
            Kind::One | Kind::OneStale => {
                let p = Path {
                    attr: AttrId(s.val),
                    peer: s.peer,
                    stale: s.kind == Kind::OneStale,
                };
                if pred(&p) {
                    s.kind = Kind::Empty;
                    removed.push(p);
                }
            }
            Kind::Many => {
                let m = s.val;
                let v = &mut self.multi[m as usize];
                v.retain(|p| {
                    let gone = pred(p);
                    if gone {
                        removed.push(*p);
                    }
                    !gone
                });
                match v.len() {
                    0 => s.kind = Kind::Empty,
                    1 => set_one(s, v[0]),
                    _ => return,
                }
                self.multi[m as usize] = Vec::new();
                self.multi_free.push(m);
            }
        }
    }

    /// Sets the stale flag on `peer`'s path of slot `i`; true if it had one.
    pub fn mark_stale(&mut self, i: u32, peer: PeerIdx) -> bool {
        let s = &mut self.slots[i as usize];
        match s.kind {
            Kind::One | Kind::OneStale if s.peer == peer => {
                s.kind = Kind::OneStale;
                true
            }
            Kind::Many => self.multi[s.val as usize]
                .iter_mut()
                .find(|p| p.peer == peer)
                .map(|p| p.stale = true)
                .is_some(),
            _ => false,
        }
    }

    /// Heap bytes of the table's own structures.
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot<A>>()
            + self.free.capacity() * 4
            + self.index.allocation_size()
            + self.multi.capacity() * size_of::<Vec<Path>>()
            + self
                .multi
                .iter()
                .map(|v| v.capacity() * size_of::<Path>())
                .sum::<usize>()
            + self.multi_free.capacity() * 4
    }

    #[cfg(test)]
    pub fn slot_size() -> usize {
        size_of::<Slot<A>>()
    }
}

fn hash_prefix<A: Addr>(h: &DefaultHashBuilder, addr: A, len: u8) -> u64 {
    let n = addr.prefix_number(len);
    let run = (n & 0xff) as u64;
    // hashbrown takes the bucket from the low bits and a 7-bit tag from the
    // top: the run position goes into both, so neighbours differ in tag.
    h.hash_one((n >> 8, len)).wrapping_add(run) ^ (run << 57)
}

fn set_one<A>(s: &mut Slot<A>, p: Path) {
    s.kind = if p.stale { Kind::OneStale } else { Kind::One };
    s.peer = p.peer;
    s.val = p.attr.0;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_compact() {
        assert_eq!(Table::<Ipv4Addr>::slot_size(), 12);
        assert_eq!(Table::<Ipv6Addr>::slot_size(), 24);
        assert_eq!(size_of::<Path>(), 8);
    }

    #[test]
    fn one_many_one() {
        let mut t = Table::<Ipv4Addr>::default();
        let a = Ipv4Addr::new(10, 0, 0, 0);
        let i = t.find_or_insert(a, 24);
        assert_eq!(t.find_or_insert(a, 24), i);
        assert_eq!(t.find(a, 25), None);
        let p = |peer, attr| Path {
            attr: AttrId(attr),
            peer,
            stale: false,
        };
        assert_eq!(t.upsert(i, p(1, 7)), None);
        assert_eq!(t.upsert(i, p(1, 8)), Some(p(1, 7)));
        assert_eq!(t.upsert(i, p(2, 9)), None);
        t.with_paths(i, |ps| assert_eq!(ps, &[p(1, 8), p(2, 9)]));
        let mut gone = Vec::new();
        t.remove_where(i, |x| x.peer == 1, &mut gone);
        assert_eq!(gone, vec![p(1, 8)]);
        t.with_paths(i, |ps| assert_eq!(ps, &[p(2, 9)]));
        assert!(t.mark_stale(i, 2));
        t.remove_where(i, |x| x.stale, &mut gone);
        assert!(t.is_empty_slot(i));
        t.free_slot(i);
        assert_eq!(t.find(a, 24), None);
        assert_eq!(t.find_or_insert(Ipv4Addr::new(10, 0, 1, 0), 24), i);
    }
}
