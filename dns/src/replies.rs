//! Encoded replies for the cluster domain, reused: a reply that tartan-dns
//! answered itself depends only on the request's bytes after its ID, the
//! transport and the [`Records`](crate::model::Records) (no clock, no
//! randomness), so an identical request — what resolvers send over and over
//! — gets the same bytes with its own ID, without parsing or encoding.
//!
//! Every change of the records bumps their generation, and a cache of an
//! older generation is emptied before use, so a reply is never staler than
//! the records. The handler keeps forwarded answers (whose TTLs age) in a
//! second cache whose generation is the current second. A cache is bounded: at `capacity` entries it is emptied and starts over.
//! Pure: no I/O.

use std::collections::HashMap;
use std::sync::RwLock;

use prometheus_client::metrics::counter::Counter;

/// A reply and the counter its query is counted in.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The encoded reply; bytes 0 and 1 (the ID) are replaced per request.
    pub bytes: Vec<u8>,
    pub counter: Counter,
    /// Counted too, when the reply was cut to fit (TC).
    pub truncated: Option<Counter>,
    /// Counted too at each reuse (a forwarded reply is a cache hit).
    pub hit: Option<Counter>,
}

#[derive(Default)]
struct Inner {
    generation: u64,
    map: HashMap<Vec<u8>, Reply>,
}

pub struct ReplyCache {
    capacity: usize,
    inner: RwLock<Inner>,
}

/// The most bytes of a request kept as a key (a longer request is not
/// cached: a plain question with EDNS is well under this).
pub const MAX_KEY: usize = 512;

impl ReplyCache {
    pub fn new(capacity: usize) -> ReplyCache {
        ReplyCache {
            capacity,
            inner: RwLock::new(Inner::default()),
        }
    }

    /// The reply to `req` (a whole request; its ID is used in the reply)
    /// at records `generation`, counted.
    pub fn get(&self, generation: u64, req: &[u8]) -> Option<Vec<u8>> {
        if req.len() < 12 || req.len() > MAX_KEY {
            return None;
        }
        let inner = self.inner.read().unwrap_or_else(|e| e.into_inner());
        if inner.generation != generation {
            return None;
        }
        let hit = inner.map.get(&req[2..])?;
        let mut out = hit.bytes.clone();
        out[..2].copy_from_slice(&req[..2]);
        hit.counter.inc();
        for c in hit.truncated.iter().chain(&hit.hit) {
            c.inc();
        }
        Some(out)
    }

    /// Keep `reply` (at least a header) as the answer to `req` at records
    /// `generation`. A reply of an older generation than the cache's is
    /// dropped; a newer generation empties the cache first.
    pub fn insert(&self, generation: u64, req: &[u8], reply: Reply) {
        if req.len() < 12 || req.len() > MAX_KEY || reply.bytes.len() < 12 {
            return;
        }
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        if generation < inner.generation {
            return;
        }
        if generation > inner.generation || inner.map.len() >= self.capacity {
            inner.map.clear();
            inner.generation = generation;
        }
        if self.capacity > 0 {
            inner.map.insert(req[2..].to_vec(), reply);
        }
    }

    pub fn len(&self) -> usize {
        self.inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u16, q: &[u8]) -> Vec<u8> {
        let mut r = id.to_be_bytes().to_vec();
        r.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
        r.extend_from_slice(q);
        r
    }

    fn reply(tag: u8) -> Reply {
        Reply {
            bytes: vec![0, 0, 0x85, 0, 0, 1, 0, 1, 0, 0, 0, 0, tag],
            counter: Counter::default(),
            truncated: None,
            hit: None,
        }
    }

    #[test]
    fn a_hit_carries_the_requests_id_and_is_counted() {
        let c = ReplyCache::new(10);
        let r = reply(7);
        let counter = r.counter.clone();
        c.insert(1, &req(5, b"web"), r);
        let out = c.get(1, &req(0xabcd, b"web")).unwrap();
        assert_eq!(&out[..2], &[0xab, 0xcd]);
        assert_eq!(out[12], 7);
        assert_eq!(counter.get(), 1);
        // Another question, or the same with other flags, is another key.
        assert_eq!(c.get(1, &req(1, b"Web")), None);
        let mut other = req(1, b"web");
        other[2] = 0;
        assert_eq!(c.get(1, &other), None);
    }

    #[test]
    fn a_change_of_the_records_empties_it() {
        let c = ReplyCache::new(10);
        c.insert(1, &req(1, b"a"), reply(1));
        assert_eq!(c.get(2, &req(1, b"a")), None, "not at a newer generation");
        c.insert(2, &req(1, b"b"), reply(2));
        assert_eq!(c.len(), 1, "the older generation's replies are gone");
        // A reply computed at an older generation comes too late: dropped.
        c.insert(1, &req(1, b"a"), reply(1));
        assert_eq!(c.get(2, &req(1, b"a")), None);
        assert_eq!(c.get(1, &req(1, b"a")), None);
    }

    #[test]
    fn it_is_bounded_and_refuses_odd_sizes() {
        let c = ReplyCache::new(3);
        for i in 0..10u8 {
            c.insert(1, &req(1, &[i]), reply(i));
            assert!(c.len() <= 3);
        }
        c.insert(1, &[0; 5], reply(1));
        c.insert(1, &req(1, &[0; MAX_KEY]), reply(1));
        assert!(c.get(1, &[0; 5]).is_none());
        let none = ReplyCache::new(0);
        none.insert(1, &req(1, b"a"), reply(1));
        assert!(none.is_empty());
    }
}
