//! Counting the prefixes a speaker receives: a shared bitset over the
//! benchmark's prefix indices, fed by a fast walk of each UPDATE's
//! withdrawn routes and NLRI (no allocation per prefix).
use super::prefixes::PrefixPlan;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Prefixes held, counted once each, and the instant the count first
/// reached the target. Shared by every reader feeding it.
#[derive(Debug)]
pub struct Counter {
    plan: PrefixPlan,
    bits: Vec<AtomicU64>,
    held: AtomicU64,
    /// Announcements seen, duplicates and foreign prefixes included.
    announced: AtomicU64,
    target: u64,
    done: Mutex<Option<Instant>>,
    cv: Condvar,
}

impl Counter {
    /// A counter that completes when `target` of `plan`'s prefixes are held.
    pub fn new(plan: PrefixPlan, target: u64) -> Counter {
        let words = plan.total().div_ceil(64) as usize;
        Counter {
            plan,
            bits: (0..words).map(|_| AtomicU64::new(0)).collect(),
            held: AtomicU64::new(0),
            announced: AtomicU64::new(0),
            target,
            done: Mutex::new(None),
            cv: Condvar::new(),
        }
    }

    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    pub fn announced(&self) -> u64 {
        self.announced.load(Ordering::Relaxed)
    }

    /// When the target was reached, if it was.
    pub fn done_at(&self) -> Option<Instant> {
        *self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until the target is reached or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> Option<Instant> {
        let g = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |d| d.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *g
    }

    /// Applies one UPDATE body (after the 19-byte header). A malformed
    /// body is counted as far as it parses.
    pub fn update(&self, body: &[u8]) {
        let Some(wlen) = be16(body, 0) else { return };
        let Some(withdrawn) = body.get(2..2 + wlen) else {
            return;
        };
        let mut delta: i64 = 0;
        walk(withdrawn, |top| {
            if let Some(j) = self.plan.index_of(top) {
                delta -= i64::from(self.flip(j, false));
            }
        });
        let Some(alen) = be16(body, 2 + wlen) else {
            return;
        };
        let nlri = body.get(4 + wlen + alen..).unwrap_or(&[]);
        let mut seen = 0;
        walk(nlri, |top| {
            seen += 1;
            if let Some(j) = self.plan.index_of(top) {
                delta += i64::from(self.flip(j, true));
            }
        });
        self.announced.fetch_add(seen, Ordering::Relaxed);
        self.apply(delta);
    }

    /// Sets or clears bit j; true when it changed.
    fn flip(&self, j: u64, on: bool) -> bool {
        let (w, b) = ((j / 64) as usize, 1u64 << (j % 64));
        let Some(word) = self.bits.get(w) else {
            return false;
        };
        if on {
            word.fetch_or(b, Ordering::Relaxed) & b == 0
        } else {
            word.fetch_and(!b, Ordering::Relaxed) & b != 0
        }
    }

    fn apply(&self, delta: i64) {
        if delta == 0 {
            return;
        }
        let now = if delta > 0 {
            self.held.fetch_add(delta as u64, Ordering::AcqRel) + delta as u64
        } else {
            self.held.fetch_sub((-delta) as u64, Ordering::AcqRel) - (-delta) as u64
        };
        if now >= self.target {
            let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
            if d.is_none() {
                *d = Some(Instant::now());
                self.cv.notify_all();
            }
        }
    }
}

fn be16(b: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
    ])))
}

/// Calls `f` with the top 24 bits of each /24 in an IPv4 prefix list;
/// other lengths are skipped, a truncated tail ends the walk.
fn walk(mut b: &[u8], mut f: impl FnMut(u32)) {
    while let Some((&len, rest)) = b.split_first() {
        let n = usize::from(len).div_ceil(8);
        let Some(addr) = rest.get(..n) else { return };
        if len == 24 {
            f(u32::from(addr[0]) << 16 | u32::from(addr[1]) << 8 | u32::from(addr[2]));
        }
        b = &rest[n..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn counts_each_prefix_once_and_withdrawals() {
        let plan = PrefixPlan::new(1, 2500).unwrap();
        let (buf, _) = super::super::prefixes::encode_updates(
            &plan,
            0,
            65001,
            Ipv4Addr::new(10, 1, 0, 2),
            1000,
        )
        .unwrap();
        let c = Counter::new(plan, 2500);
        let mut rest = &buf[..];
        while rest.len() >= 19 {
            let len = usize::from(u16::from_be_bytes([rest[16], rest[17]]));
            c.update(&rest[19..len]);
            c.update(&rest[19..len]); // duplicates do not count
            rest = &rest[len..];
        }
        assert_eq!(c.held(), 2500);
        assert_eq!(c.announced(), 5000);
        assert!(c.done_at().is_some());
        // Withdraw 11.0.0.0/24: 2 bytes withdrawn length, then the prefix.
        c.update(&[0, 4, 24, 11, 0, 0, 0, 0]);
        assert_eq!(c.held(), 2499);
    }

    #[test]
    fn garbage_does_not_panic() {
        let c = Counter::new(PrefixPlan::new(1, 10).unwrap(), 10);
        for body in [
            &[][..],
            &[0],
            &[0, 9, 1],
            &[0, 0, 0, 0, 33, 1],
            &[0, 0, 255, 255, 24],
        ] {
            c.update(body);
        }
        assert_eq!(c.held(), 0);
    }
}
