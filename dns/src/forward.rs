//! Names outside the cluster domain: asked of the upstream servers (from
//! resolv.conf or configured), over UDP and, when the answer is truncated,
//! TCP; answers kept in a [`Cache`]; identical questions asked while one is
//! on its way wait for that one instead of asking again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tracing::debug;

use crate::cache::{Cache, CacheKey, Entry};
use crate::metrics::Metrics;

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
}

impl Forwarder {
    pub fn new(cfg: ForwardConfig, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Forwarder {
            cache: Mutex::new(Cache::new(cfg.cache_size)),
            cfg,
            inflight: Mutex::new(HashMap::new()),
            metrics,
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
            let r = tokio::time::timeout(self.cfg.timeout, exchange(*up, q)).await;
            self.metrics
                .upstream_seconds
                .observe(started.elapsed().as_secs_f64());
            match r {
                Ok(Ok(m)) if m.metadata.response_code != ResponseCode::ServFail => {
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

    fn entry(&self, m: Message) -> Entry {
        let negative = m.answers.is_empty();
        let ttl = if negative {
            m.authorities
                .iter()
                .find_map(|r| match &r.data {
                    hickory_proto::rr::RData::SOA(s) => Some(s.minimum.min(r.ttl)),
                    _ => None,
                })
                .unwrap_or(0)
                .clamp(self.cfg.min_ttl, self.cfg.max_negative_ttl)
        } else {
            m.answers
                .iter()
                .map(|r| r.ttl)
                .min()
                .unwrap_or(0)
                .clamp(self.cfg.min_ttl, self.cfg.max_ttl)
        };
        Entry::new(
            m.metadata.response_code,
            m.answers,
            m.authorities,
            m.additionals
                .into_iter()
                .filter(|r| r.record_type() != RecordType::OPT)
                .collect(),
            ttl,
            Instant::now(),
        )
    }
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
async fn exchange(up: SocketAddr, q: &Query) -> Result<Message, String> {
    let req = upstream_query(q);
    let bytes = req.to_vec().map_err(|e| e.to_string())?;
    let bind: SocketAddr = if up.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let sock = UdpSocket::bind(bind).await.map_err(|e| e.to_string())?;
    sock.connect(up).await.map_err(|e| e.to_string())?;
    sock.send(&bytes).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65535];
    let resp = loop {
        let n = sock.recv(&mut buf).await.map_err(|e| e.to_string())?;
        // Anything that is not the answer to our question is ignored.
        if let Ok(m) = Message::from_vec(&buf[..n])
            && fits(&req, &m)
        {
            break m;
        }
    };
    if !resp.metadata.truncation {
        return Ok(resp);
    }
    let mut tcp = TcpStream::connect(up).await.map_err(|e| e.to_string())?;
    let len = u16::try_from(bytes.len()).map_err(|e| e.to_string())?;
    tcp.write_all(&len.to_be_bytes())
        .await
        .map_err(|e| e.to_string())?;
    tcp.write_all(&bytes).await.map_err(|e| e.to_string())?;
    let mut lb = [0u8; 2];
    tcp.read_exact(&mut lb).await.map_err(|e| e.to_string())?;
    let mut body = vec![0u8; usize::from(u16::from_be_bytes(lb))];
    tcp.read_exact(&mut body).await.map_err(|e| e.to_string())?;
    let m = Message::from_vec(&body).map_err(|e| e.to_string())?;
    if !fits(&req, &m) {
        return Err("TCP answer does not match the question".into());
    }
    Ok(m)
}

/// The class a forwarded question must have (others are refused).
pub fn forwardable(q: &Query) -> bool {
    q.query_class() == DNSClass::IN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers() {
        let text = "# generated\nsearch example.org\nnameserver 10.0.0.2\nnameserver  fd00::53 # v6\nnameserver fe80::1%eth0\noptions ndots:2\n";
        assert_eq!(
            parse_resolv_conf(text),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[fd00::53]:53".parse().unwrap()
            ]
        );
    }
}
