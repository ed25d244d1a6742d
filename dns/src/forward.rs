//! Names outside the cluster domain: asked of the upstream servers (from
//! resolv.conf or configured), over UDP and, when the answer is truncated,
//! TCP; answers kept in a [`Cache`]; identical questions asked while one is
//! on its way wait for that one instead of asking again. The bytes go
//! through an [`Upstream`]: sockets, or in tests and fuzzing scripted
//! replies; everything from them is untrusted input.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::{BoxFuture, Shared};
use futures::{FutureExt, StreamExt};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use tracing::debug;

use crate::cache::{Cache, CacheKey, Entry};
use crate::metrics::Metrics;
use crate::upstream::{Network, Upstream};

#[derive(Debug, thiserror::Error, Clone)]
pub enum ForwardError {
    #[error("no upstream server configured")]
    NoUpstream,
    #[error("no upstream answered: {0}")]
    Failed(String),
}

/// Where and how to forward.
#[derive(Clone, Debug)]
pub struct ForwardConfig {
    pub upstreams: Vec<SocketAddr>,
    /// How long one upstream is waited for.
    pub timeout: Duration,
    /// Most answers kept.
    pub cache_size: usize,
    /// Bounds on how long an answer is kept, seconds.
    pub min_ttl: u32,
    pub max_ttl: u32,
    /// Upper bound for negative answers (NXDOMAIN, NODATA), seconds.
    pub max_negative_ttl: u32,
}

/// The `nameserver` lines of a resolv.conf, as socket addresses (port 53).
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next()? == "nameserver").then_some(())?;
            let addr = words.next()?;
            // A scoped IPv6 address (fe80::1%eth0) is not supported.
            addr.parse::<std::net::IpAddr>()
                .ok()
                .map(|ip| SocketAddr::new(ip, 53))
        })
        .collect()
}

type Pending = Shared<BoxFuture<'static, Result<Arc<Entry>, ForwardError>>>;

pub struct Forwarder {
    cfg: ForwardConfig,
    cache: Mutex<Cache>,
    inflight: Mutex<HashMap<CacheKey, Pending>>,
    metrics: Arc<Metrics>,
    /// How questions reach the upstreams ([`Network`] but in tests).
    wire: Arc<dyn Upstream>,
}

impl Forwarder {
    pub fn new(cfg: ForwardConfig, metrics: Arc<Metrics>) -> Arc<Self> {
        Self::with_upstream(cfg, metrics, Arc::new(Network))
    }

    /// A forwarder whose questions go to `wire` (scripted replies in
    /// tests and fuzzing) instead of the network.
    pub fn with_upstream(
        cfg: ForwardConfig,
        metrics: Arc<Metrics>,
        wire: Arc<dyn Upstream>,
    ) -> Arc<Self> {
        Arc::new(Forwarder {
            cache: Mutex::new(Cache::new(cfg.cache_size)),
            cfg,
            inflight: Mutex::new(HashMap::new()),
            metrics,
            wire,
        })
    }

    /// The answer to `q`: from the cache, from a question already on its
    /// way upstream, or from the upstreams. The records' TTLs count down
    /// the time the answer spent in the cache.
    pub async fn resolve(self: &Arc<Self>, q: &Query) -> Result<Arc<Entry>, ForwardError> {
        if self.cfg.upstreams.is_empty() {
            return Err(ForwardError::NoUpstream);
        }
        let key = CacheKey {
            name: q.name().to_lowercase(),
            qtype: q.query_type(),
            qclass: q.query_class(),
        };
        let now = Instant::now();
        if let Some(e) = self.lock_cache().get(&key, now) {
            self.metrics.cache_hits.inc();
            return Ok(e);
        }
        self.metrics.cache_misses.inc();
        let pending = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = inflight.get(&key) {
                self.metrics.coalesced.inc();
                p.clone()
            } else {
                let me = self.clone();
                let k = key.clone();
                let query = q.clone();
                let p = async move {
                    let r = me.ask_upstreams(&query).await;
                    if let Ok(e) = &r {
                        me.lock_cache().insert(k.clone(), e.clone());
                    }
                    me.inflight
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&k);
                    r
                }
                .boxed()
                .shared();
                inflight.insert(key, p.clone());
                p
            }
        };
        pending.await
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many answers are cached.
    pub fn cached(&self) -> usize {
        self.lock_cache().len()
    }

    async fn ask_upstreams(&self, q: &Query) -> Result<Arc<Entry>, ForwardError> {
        let mut last = String::new();
        for up in &self.cfg.upstreams {
            let started = Instant::now();
            let r = tokio::time::timeout(self.cfg.timeout, exchange(&*self.wire, *up, q)).await;
            self.metrics
                .upstream_seconds
                .observe(started.elapsed().as_secs_f64());
            match r {
                Ok(Ok(m)) if usable(m.metadata.response_code) => {
                    return Ok(Arc::new(self.entry(m)));
                }
                Ok(Ok(m)) => last = format!("{up}: {}", m.metadata.response_code),
                Ok(Err(e)) => last = format!("{up}: {e}"),
                Err(_) => last = format!("{up}: no answer within {:?}", self.cfg.timeout),
            }
            self.metrics.upstream_errors.inc();
            debug!(upstream = %up, error = %last, "upstream failed");
        }
        Err(ForwardError::Failed(last))
    }

    /// The cache entry for the upstream's answer `m`: kept for the least
    /// TTL of its answers, or for a negative answer its SOA's (RFC 2308
    /// 5), within the configured bounds. Answers other than NOERROR and
    /// NXDOMAIN are passed on, not kept (as CoreDNS's cache does).
    fn entry(&self, m: Message) -> Entry {
        let (mut answers, mut authorities, mut additionals) =
            (m.answers, m.authorities, m.additionals);
        additionals.retain(|r| r.record_type() != RecordType::OPT);
        for r in answers
            .iter_mut()
            .chain(&mut authorities)
            .chain(&mut additionals)
        {
            // RFC 2181 8: a TTL with the top bit set counts as zero.
            if r.ttl > i32::MAX as u32 {
                r.ttl = 0;
            }
        }
        let rcode = m.metadata.response_code;
        let (least, max) = if answers.is_empty() {
            let soa = authorities.iter().find_map(|r| match &r.data {
                hickory_proto::rr::RData::SOA(s) => Some(s.minimum.min(r.ttl)),
                _ => None,
            });
            (soa.unwrap_or(0), self.cfg.max_negative_ttl)
        } else {
            let least = answers.iter().map(|r| r.ttl).min().unwrap_or(0);
            (least, self.cfg.max_ttl)
        };
        // Not `clamp`: it panics when the bounds are crossed.
        let ttl = match rcode {
            ResponseCode::NoError | ResponseCode::NXDomain => least.max(self.cfg.min_ttl).min(max),
            _ => 0,
        };
        Entry::new(
            rcode,
            answers,
            authorities,
            additionals,
            ttl,
            Instant::now(),
        )
    }
}

/// Whether the upstream's rcode is one to pass on: not SERVFAIL (the next
/// upstream is asked), nor an extended one (BADVERS, BADCOOKIE...), which
/// is about our EDNS exchange with it, not the client's question, and
/// could not be told to a client without EDNS anyway.
fn usable(rcode: ResponseCode) -> bool {
    rcode != ResponseCode::ServFail && u16::from(rcode) <= 15
}

fn upstream_query(q: &Query) -> Message {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(q.clone());
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    m.set_edns(edns);
    m
}

fn fits(req: &Message, resp: &Message) -> bool {
    resp.metadata.message_type == MessageType::Response
        && resp.metadata.id == req.metadata.id
        && resp.metadata.op_code == OpCode::Query
        && resp.queries.len() == 1
        && same_question(&resp.queries[0], &req.queries[0])
}

fn same_question(a: &Query, b: &Query) -> bool {
    let lower = |n: &Name| n.to_lowercase();
    lower(a.name()) == lower(b.name())
        && a.query_type() == b.query_type()
        && a.query_class() == b.query_class()
}

/// One question to one upstream: UDP, then TCP if the answer was cut.
/// Replies that do not answer the question asked (ID, question: RFC 5452
/// 9.1) are not used: over UDP they are skipped, as anyone may send them.
async fn exchange(wire: &dyn Upstream, up: SocketAddr, q: &Query) -> Result<Message, String> {
    let req = upstream_query(q);
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let mut datagrams = wire.udp(up, &bytes);
    let resp = loop {
        let Some(datagram) = datagrams.next().await else {
            return Err("no more datagrams".into());
        };
        if let Ok(m) = Message::from_vec(&datagram?)
            && fits(&req, &m)
        {
            break m;
        }
    };
    drop(datagrams);
    if !resp.metadata.truncation {
        return Ok(resp);
    }
    let m = Message::from_vec(&wire.tcp(up, &bytes).await?).map_err(|e| e.to_string())?;
    if !fits(&req, &m) {
        return Err("TCP answer does not match the question".into());
    }
    // Cut even over TCP: incomplete, so a failure rather than an answer
    // cached and passed on as whole.
    if m.metadata.truncation {
        return Err("TCP answer truncated".into());
    }
    Ok(m)
}

/// The class a forwarded question must have (others are refused).
pub fn forwardable(q: &Query) -> bool {
    q.query_class() == DNSClass::IN
}

#[cfg(test)]
#[path = "forward_tests.rs"]
mod tests;
