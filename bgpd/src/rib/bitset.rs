//! Growable bit sets indexed by prefix slot: one bit per prefix per peer is
//! all the per-peer output state the RIB keeps.

/// A plain growable bit set with a population count.
#[derive(Debug, Default)]
pub(crate) struct Bitset {
    words: Vec<u64>,
    count: usize,
}

impl Bitset {
    pub fn get(&self, i: u32) -> bool {
        let i = i as usize;
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }

    /// Sets bit `i`; true if it was clear.
    pub fn set(&mut self, i: u32) -> bool {
        let i = i as usize;
        if i / 64 >= self.words.len() {
            self.words.resize(i / 64 + 1, 0);
        }
        let w = &mut self.words[i / 64];
        let was = *w & (1 << (i % 64)) != 0;
        *w |= 1 << (i % 64);
        if !was {
            self.count += 1;
        }
        !was
    }

    /// Clears bit `i`; true if it was set.
    pub fn clear(&mut self, i: u32) -> bool {
        let i = i as usize;
        let Some(w) = self.words.get_mut(i / 64) else {
            return false;
        };
        let was = *w & (1 << (i % 64)) != 0;
        *w &= !(1 << (i % 64));
        if was {
            self.count -= 1;
        }
        was
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Every set bit, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some((wi * 64) as u32 + b)
            })
        })
    }

    /// The first set bit at or after `from`, if any.
    pub fn next_from(&self, from: u32) -> Option<u32> {
        let from = from as usize;
        let mut wi = from / 64;
        let first = *self.words.get(wi)? & (!0u64 << (from % 64));
        if first != 0 {
            return Some((wi * 64) as u32 + first.trailing_zeros());
        }
        wi += 1;
        while let Some(&w) = self.words.get(wi) {
            if w != 0 {
                return Some((wi * 64) as u32 + w.trailing_zeros());
            }
            wi += 1;
        }
        None
    }
}

/// A bit set with a summary level (one bit per non-zero word), so finding
/// the next set bit costs O(n / 4096) words rather than O(n / 64): a drain
/// of a few dirty prefixes in a large table stays cheap.
#[derive(Debug, Default)]
pub(crate) struct DirtySet {
    bits: Bitset,
    summary: Bitset,
}

impl DirtySet {
    pub fn get(&self, i: u32) -> bool {
        self.bits.get(i)
    }

    pub fn set(&mut self, i: u32) -> bool {
        let new = self.bits.set(i);
        if new {
            self.summary.set(i / 64);
        }
        new
    }

    pub fn clear(&mut self, i: u32) -> bool {
        let was = self.bits.clear(i);
        if was && self.bits.words[i as usize / 64] == 0 {
            self.summary.clear(i / 64);
        }
        was
    }

    pub fn count(&self) -> usize {
        self.bits.count()
    }

    pub fn heap_bytes(&self) -> usize {
        self.bits.heap_bytes() + self.summary.heap_bytes()
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter()
    }

    /// The first set bit at or after `from`, without wrapping.
    pub fn next_from(&self, from: u32) -> Option<u32> {
        let word = from / 64;
        let w = *self.bits.words.get(word as usize)? & (!0u64 << (from % 64));
        if w != 0 {
            return Some(word * 64 + w.trailing_zeros());
        }
        let next_word = self.summary.next_from(word + 1)?;
        let w = self.bits.words[next_word as usize];
        Some(next_word * 64 + w.trailing_zeros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_set_walks_in_order() {
        let mut d = DirtySet::default();
        for i in [3u32, 64, 65, 5000, 100_000] {
            assert!(d.set(i));
        }
        assert!(!d.set(64));
        assert_eq!(d.count(), 5);
        assert_eq!(d.next_from(0), Some(3));
        assert_eq!(d.next_from(4), Some(64));
        assert_eq!(d.next_from(66), Some(5000));
        assert_eq!(d.next_from(5001), Some(100_000));
        assert_eq!(d.next_from(100_001), None);
        assert!(d.clear(5000));
        assert_eq!(d.next_from(66), Some(100_000));
        assert_eq!(d.iter().collect::<Vec<_>>(), vec![3, 64, 65, 100_000]);
        assert!(!d.clear(7));
        assert!(!d.clear(10_000_000));
    }
}
