//! The forwarder's cache: answers by (name, type, class), each kept for its
//! TTL (already clamped by the caller), at most `capacity` of them. When
//! full, expired answers go first, then the oldest inserted.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{DNSClass, Name, Record, RecordType};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// Lower case.
    pub name: Name,
    pub qtype: RecordType,
    pub qclass: DNSClass,
}

/// One upstream answer.
#[derive(Clone, Debug)]
pub struct Entry {
    pub rcode: ResponseCode,
    pub answers: Vec<Record>,
    pub authorities: Vec<Record>,
    pub additionals: Vec<Record>,
    /// Seconds it is kept.
    pub ttl: u32,
    pub stored: Instant,
}

impl Entry {
    pub fn new(
        rcode: ResponseCode,
        answers: Vec<Record>,
        authorities: Vec<Record>,
        additionals: Vec<Record>,
        ttl: u32,
        stored: Instant,
    ) -> Entry {
        Entry {
            rcode,
            answers,
            authorities,
            additionals,
            ttl,
            stored,
        }
    }

    fn expires(&self) -> Instant {
        self.stored + Duration::from_secs(u64::from(self.ttl))
    }

    /// Seconds left at `now` (0 when expired).
    pub fn remaining(&self, now: Instant) -> u32 {
        let left = self.expires().saturating_duration_since(now).as_secs();
        u32::try_from(left).unwrap_or(u32::MAX)
    }

    /// The sections with every TTL at most the time left.
    pub fn aged(&self, now: Instant) -> (Vec<Record>, Vec<Record>, Vec<Record>) {
        let left = self.remaining(now);
        let age = |rs: &[Record]| {
            rs.iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.ttl = r.ttl.min(left);
                    r
                })
                .collect::<Vec<_>>()
        };
        (
            age(&self.answers),
            age(&self.authorities),
            age(&self.additionals),
        )
    }
}

pub struct Cache {
    capacity: usize,
    entries: HashMap<CacheKey, (u64, Arc<Entry>)>,
    /// Insertion order: (key, generation); stale generations are skipped.
    order: VecDeque<(CacheKey, u64)>,
    generation: u64,
}

impl Cache {
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A live answer; an expired one is dropped.
    pub fn get(&mut self, key: &CacheKey, now: Instant) -> Option<Arc<Entry>> {
        let (_, e) = self.entries.get(key)?;
        if e.expires() > now {
            return Some(e.clone());
        }
        self.entries.remove(key);
        None
    }

    pub fn insert(&mut self, key: CacheKey, e: Arc<Entry>) {
        if self.capacity == 0 || e.ttl == 0 {
            return;
        }
        let now = e.stored;
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, v)| v.expires() > now);
            while self.entries.len() >= self.capacity {
                let Some((k, g)) = self.order.pop_front() else {
                    break;
                };
                if self.entries.get(&k).is_some_and(|(gen_, _)| *gen_ == g) {
                    self.entries.remove(&k);
                }
            }
        }
        self.generation += 1;
        self.order.push_back((key.clone(), self.generation));
        self.entries.insert(key, (self.generation, e));
        // Keep the order list from growing without bound on replacements.
        if self.order.len() > self.capacity.saturating_mul(2).max(16) {
            let entries = &self.entries;
            self.order
                .retain(|(k, g)| entries.get(k).is_some_and(|(gen_, _)| gen_ == g));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> CacheKey {
        CacheKey {
            name: Name::from_ascii(n).unwrap(),
            qtype: RecordType::A,
            qclass: DNSClass::IN,
        }
    }

    fn entry(ttl: u32, at: Instant) -> Arc<Entry> {
        Arc::new(Entry::new(
            ResponseCode::NoError,
            vec![],
            vec![],
            vec![],
            ttl,
            at,
        ))
    }

    #[test]
    fn entries_expire_after_their_ttl() {
        let t0 = Instant::now();
        let mut c = Cache::new(10);
        c.insert(key("a."), entry(30, t0));
        assert!(c.get(&key("a."), t0 + Duration::from_secs(29)).is_some());
        assert!(c.get(&key("a."), t0 + Duration::from_secs(30)).is_none());
        assert!(c.is_empty());
    }

    #[test]
    fn size_is_bounded_oldest_out_first_expired_before_that() {
        let t0 = Instant::now();
        let mut c = Cache::new(3);
        c.insert(key("a."), entry(100, t0));
        c.insert(key("b."), entry(1, t0));
        c.insert(key("c."), entry(100, t0));
        // b has expired by now: it goes, not a.
        let t1 = t0 + Duration::from_secs(2);
        c.insert(key("d."), entry(100, t1));
        assert_eq!(c.len(), 3);
        assert!(c.get(&key("a."), t1).is_some());
        assert!(c.get(&key("b."), t1).is_none());
        // Now full of live ones: the oldest (a) goes.
        c.insert(key("e."), entry(100, t1));
        assert_eq!(c.len(), 3);
        assert!(c.get(&key("a."), t1).is_none());
        for k in ["c.", "d.", "e."] {
            assert!(c.get(&key(k), t1).is_some(), "{k}");
        }
        // Replacing many times keeps the bookkeeping bounded.
        for i in 0..1000 {
            c.insert(key("e."), entry(100, t1 + Duration::from_millis(i)));
        }
        assert!(c.order.len() <= 16);
    }

    #[test]
    fn zero_ttl_answers_are_not_kept() {
        let mut c = Cache::new(3);
        c.insert(key("a."), entry(0, Instant::now()));
        assert!(c.is_empty());
    }
}
