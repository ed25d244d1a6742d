//! A bitmap over the members of one range (member `i` taken when bit
//! `i % 8` of byte `i / 8` is set), and its hexadecimal text as a
//! RangeAllocation stores it. Pure.

/// Which of `len` members are taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bitmap {
    len: u64,
    bytes: Vec<u8>,
}

impl Bitmap {
    /// `len` members, none taken.
    pub fn new(len: u64) -> Bitmap {
        Bitmap {
            len,
            bytes: vec![0; usize::try_from(len.div_ceil(8)).unwrap_or(0)],
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// From the stored text; `None` when it is not hexadecimal, or sets
    /// members beyond `len`.
    pub fn from_hex(len: u64, text: &str) -> Option<Bitmap> {
        let mut b = Bitmap::new(len);
        let digits = text.as_bytes();
        if !digits.len().is_multiple_of(2) || digits.len() / 2 > b.bytes.len() {
            return None;
        }
        for (i, pair) in digits.chunks(2).enumerate() {
            let hex = std::str::from_utf8(pair).ok()?;
            b.bytes[i] = u8::from_str_radix(hex, 16).ok()?;
        }
        // Bits past the last member must be clear.
        let past = (len..b.bytes.len() as u64 * 8).any(|i| b.get(i));
        (!past).then_some(b)
    }

    /// The stored text, without trailing free bytes.
    pub fn to_hex(&self) -> String {
        let used = self
            .bytes
            .iter()
            .rposition(|b| *b != 0)
            .map_or(0, |i| i + 1);
        self.bytes[..used]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn get(&self, i: u64) -> bool {
        usize::try_from(i / 8)
            .ok()
            .and_then(|at| self.bytes.get(at))
            .is_some_and(|b| b & (1 << (i % 8)) != 0)
    }

    /// Sets or clears member `i` (nothing beyond the range).
    pub fn put(&mut self, i: u64, taken: bool) {
        if i >= self.len {
            return;
        }
        if let Some(b) = usize::try_from(i / 8)
            .ok()
            .and_then(|at| self.bytes.get_mut(at))
        {
            if taken {
                *b |= 1 << (i % 8);
            } else {
                *b &= !(1 << (i % 8));
            }
        }
    }

    /// The first free member in `from..to`.
    pub fn first_free(&self, from: u64, to: u64) -> Option<u64> {
        let to = to.min(self.len);
        let mut i = from;
        while i < to {
            // Whole taken bytes are skipped at once.
            if i.is_multiple_of(8)
                && let Some(0xff) = usize::try_from(i / 8)
                    .ok()
                    .and_then(|at| self.bytes.get(at))
            {
                i += 8;
                continue;
            }
            if !self.get(i) {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// The members set here and not in `other` (of the same length).
    pub fn minus(&self, other: &Bitmap) -> Vec<u64> {
        (0..self.len)
            .filter(|i| self.get(*i) && !other.get(*i))
            .collect()
    }

    /// Every member taken here or in `other` (of the same length).
    pub fn union(&self, other: &Bitmap) -> Bitmap {
        let mut u = self.clone();
        for (a, b) in u.bytes.iter_mut().zip(&other.bytes) {
            *a |= b;
        }
        u
    }

    /// How many members are taken.
    pub fn count(&self) -> u64 {
        self.bytes.iter().map(|b| u64::from(b.count_ones())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_find_and_round_trip() {
        let mut b = Bitmap::new(20);
        assert_eq!(b.to_hex(), "");
        for i in 0..9 {
            b.put(i, true);
        }
        b.put(12, true);
        b.put(25, true);
        assert_eq!(b.to_hex(), "ff11");
        assert_eq!(b.first_free(0, 20), Some(9));
        assert_eq!(b.first_free(12, 13), None);
        assert_eq!(Bitmap::from_hex(20, "ff11"), Some(b.clone()));
        assert_eq!(b.count(), 10);
        let mut c = b.clone();
        c.put(3, false);
        assert_eq!(b.minus(&c), vec![3]);
        // Not hex, odd, too long, or bits past the end: refused.
        for bad in ["zz", "f", "ffffffff", "000010"] {
            assert_eq!(Bitmap::from_hex(20, bad), None, "{bad}");
        }
    }
}
