//! Interned path attributes: each distinct set is stored once, shared by
//! every path that carries it, and freed when the last such path goes.

use super::types::NextHops;
use crate::model::{NextHop, Origin, PathAttrs, well_known};
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// A handle to an interned attribute set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AttrId(pub u32);

/// What the decision process and the export filter read, precomputed at
/// intern time so that comparing paths never walks an AS_PATH.
#[derive(Debug, Clone)]
pub(crate) struct AttrMeta {
    pub local_pref: u32,
    pub as_len: u32,
    pub origin: Origin,
    pub med: u32,
    pub neighbour_as: Option<u32>,
    pub originator_id: Option<Ipv4Addr>,
    pub cluster_len: u32,
    pub has_next_hop: bool,
    pub no_advertise: bool,
    /// NO_EXPORT or NO_EXPORT_SUBCONFED (no confederations here, so the two
    /// mean the same).
    pub no_export: bool,
}

impl AttrMeta {
    fn of(a: &PathAttrs) -> AttrMeta {
        let has = |c| a.communities.contains(&c);
        AttrMeta {
            // RFC 4271 9.1.1: absent LOCAL_PREF is taken as the default.
            local_pref: a.local_pref.unwrap_or(100),
            as_len: a.as_path.len_for_decision() as u32,
            origin: a.origin,
            // RFC 4271 9.1.2.2 c: a missing MED is the lowest value.
            med: a.med.unwrap_or(0),
            neighbour_as: a.as_path.first_as(),
            originator_id: a.originator_id,
            cluster_len: a.cluster_list.len() as u32,
            has_next_hop: a.next_hop != NextHop::None,
            no_advertise: has(well_known::NO_ADVERTISE),
            no_export: has(well_known::NO_EXPORT) || has(well_known::NO_EXPORT_SUBCONFED),
        }
    }
}

#[derive(Debug)]
pub(crate) struct AttrEntry {
    pub attrs: Arc<PathAttrs>,
    pub meta: AttrMeta,
    /// `[next_hop]`, ready for the kernel.
    pub next_hops: NextHops,
    refs: u32,
    hash: u64,
}

#[derive(Debug, Default)]
pub(crate) struct AttrTable {
    entries: Vec<Option<AttrEntry>>,
    free: Vec<u32>,
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl AttrTable {
    /// Interns `attrs` and takes `refs` references on it.
    pub fn intern(&mut self, attrs: PathAttrs, refs: u32) -> AttrId {
        let hash = self.hasher.hash_one(&attrs);
        let entries = &mut self.entries;
        if let Some(&id) = self.index.find(hash, |&i| {
            entries[i as usize]
                .as_ref()
                .is_some_and(|e| *e.attrs == attrs)
        }) {
            if let Some(e) = entries[id as usize].as_mut() {
                e.refs += refs;
            }
            return AttrId(id);
        }
        let entry = AttrEntry {
            meta: AttrMeta::of(&attrs),
            next_hops: Arc::from([attrs.next_hop]),
            attrs: Arc::new(attrs),
            refs,
            hash,
        };
        let id = match self.free.pop() {
            Some(id) => {
                entries[id as usize] = Some(entry);
                id
            }
            None => {
                entries.push(Some(entry));
                (entries.len() - 1) as u32
            }
        };
        self.index.insert_unique(hash, id, |&i| {
            entries[i as usize].as_ref().map_or(0, |e| e.hash)
        });
        AttrId(id)
    }

    pub fn get(&self, id: AttrId) -> &AttrEntry {
        // Ids come only from `intern` and live while referenced.
        match self.entries.get(id.0 as usize) {
            Some(Some(e)) => e,
            _ => unreachable_entry(),
        }
    }

    /// Drops `n` references; the set is freed when none remain.
    pub fn release(&mut self, id: AttrId, n: u32) {
        let Some(slot) = self.entries.get_mut(id.0 as usize) else {
            return;
        };
        let Some(e) = slot.as_mut() else { return };
        e.refs = e.refs.saturating_sub(n);
        if e.refs == 0 {
            let hash = e.hash;
            if let Ok(found) = self.index.find_entry(hash, |&i| i == id.0) {
                found.remove();
            }
            *slot = None;
            self.free.push(id.0);
        }
    }

    /// Number of distinct attribute sets held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[cfg(test)]
    pub fn refs(&self, id: AttrId) -> u32 {
        self.entries
            .get(id.0 as usize)
            .and_then(|e| e.as_ref())
            .map_or(0, |e| e.refs)
    }

    /// Heap bytes, an estimate: the slab, the index and each set's own size
    /// (not counting the AS_PATH and community vectors inside).
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * size_of::<Option<AttrEntry>>()
            + self.free.capacity() * 4
            + self.index.allocation_size()
            + self.len() * (size_of::<PathAttrs>() + 16 + size_of::<NextHop>() + 16)
    }
}

/// A dangling id is a RIB bug; rather than panic in a daemon, answer with
/// an empty attribute set that no filter lets out.
#[cold]
fn unreachable_entry() -> &'static AttrEntry {
    debug_assert!(false, "dangling attribute id");
    use std::sync::OnceLock;
    static EMPTY: OnceLock<AttrEntry> = OnceLock::new();
    EMPTY.get_or_init(|| AttrEntry {
        attrs: Arc::new(PathAttrs::default()),
        meta: AttrMeta {
            no_advertise: true,
            ..AttrMeta::of(&PathAttrs::default())
        },
        next_hops: Arc::from([]),
        refs: 0,
        hash: 0,
    })
}
