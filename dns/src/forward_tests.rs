//! The forwarding path, from a client's query through the forwarder, the
//! upstream's reply, the cache and CNAME following to the client's answer,
//! fed [`Scripted`] upstream replies. [`props`]: the same with arbitrary
//! and mutated replies.

use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, CNAME, SOA};
use hickory_proto::rr::{Name, RData, Record, RecordType};

use super::*;
use crate::answer::tests::{NS, cluster, zone};
use crate::handler::{Handler, Transport};
use crate::metrics::Metrics;
use crate::upstream::{Exchange, Scripted, ScriptedReply};

#[path = "forward_props.rs"]
mod props;

pub(super) fn config() -> ForwardConfig {
    ForwardConfig {
        upstreams: vec!["192.0.2.53:53".parse().unwrap()],
        timeout: Duration::from_secs(5),
        cache_size: 100,
        min_ttl: 0,
        max_ttl: 300,
        max_negative_ttl: 30,
    }
}

/// A handler over the test cluster whose forwarder reads `replies`.
pub(super) struct Setup {
    pub h: Handler,
    pub fwd: Arc<Forwarder>,
    pub wire: Arc<Scripted>,
    rt: tokio::runtime::Runtime,
}

impl Setup {
    pub fn new(cfg: ForwardConfig, replies: impl IntoIterator<Item = ScriptedReply>) -> Setup {
        let metrics = Arc::new(Metrics::new());
        let wire = Arc::new(Scripted::new(replies));
        let fwd = Forwarder::with_upstream(cfg, metrics.clone(), wire.clone());
        let h = Handler {
            records: Arc::new(RwLock::new(cluster())),
            zone: zone(),
            forwarder: Some(fwd.clone()),
            metrics,
            replies: crate::replies::ReplyCache::new(100),
            forwarded: crate::replies::ReplyCache::new(100),
            ready: Arc::new(AtomicBool::new(true)),
        };
        // Timers: the forwarder waits on the upstream with a timeout.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        Setup { h, fwd, wire, rt }
    }

    pub fn ask(&self, req: &[u8], t: Transport) -> Option<Vec<u8>> {
        self.rt.block_on(self.h.handle(req, t))
    }

    /// What the cache holds for `q`, asking no upstream.
    pub fn cached(&self, q: &Query) -> Option<Arc<Entry>> {
        let key = CacheKey {
            name: q.name().to_lowercase(),
            qtype: q.query_type(),
            qclass: q.query_class(),
        };
        self.fwd.lock_cache().get(&key, Instant::now())
    }
}

pub(super) fn name(n: &str) -> Name {
    Name::from_ascii(n).unwrap()
}

/// A client's query, with RD set and EDNS of `edns` bytes if any.
pub(super) fn client_query(q: &Query, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(q.clone());
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

/// An upstream's reply to `q` with ID 0 (the query's, once scripted).
pub(super) fn reply(q: &Query, fill: impl FnOnce(&mut Message)) -> Vec<u8> {
    let mut m = Message::response(0, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.metadata.recursion_available = true;
    m.add_query(q.clone());
    fill(&mut m);
    m.to_vec().unwrap()
}

pub(super) fn scripted(bytes: Vec<u8>) -> ScriptedReply {
    ScriptedReply {
        bytes,
        question: false,
    }
}

pub(super) fn a(owner: &str, ttl: u32, ip: [u8; 4]) -> Record {
    Record::from_rdata(name(owner), ttl, RData::A(A(Ipv4Addr::from(ip))))
}

pub(super) fn cname(owner: &str, ttl: u32, target: &str) -> Record {
    Record::from_rdata(name(owner), ttl, RData::CNAME(CNAME(name(target))))
}

pub(super) fn soa(zone: &str, ttl: u32, minimum: u32) -> Record {
    let data = SOA::new(
        name(&format!("ns.{zone}")),
        name(&format!("hostmaster.{zone}")),
        1,
        3600,
        600,
        86400,
        minimum,
    );
    Record::from_rdata(name(zone), ttl, RData::SOA(data))
}

fn decode(bytes: Option<Vec<u8>>) -> Message {
    Message::from_vec(&bytes.expect("an answer")).expect("our answers decode")
}

fn example() -> Query {
    Query::query(name("example.org."), RecordType::A)
}

#[test]
fn an_answer_is_forwarded_cached_and_its_ttls_count_down() {
    let q = example();
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.add_answer(a("example.org.", 60, [192, 0, 2, 1]));
        }))],
    );
    for t in [Transport::Udp, Transport::Tcp] {
        let m = decode(s.ask(&client_query(&q, None), t));
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.metadata.recursion_available && !m.metadata.authoritative);
        assert_eq!(m.answers, vec![a("example.org.", 60, [192, 0, 2, 1])]);
        assert!(m.answers[0].ttl <= 60);
    }
    // Asked once: the second answer came from the cache.
    assert_eq!(s.wire.exchanges().len(), 1);
    assert!(!s.wire.exchanges()[0].tcp);
}

#[test]
fn replies_with_another_id_or_question_are_skipped() {
    // RFC 5452 9.1: a reply must match the query's ID and question; over
    // UDP anyone can send one, so those that do not are dropped and the
    // forwarder waits for the right one.
    let q = example();
    let poison = |m: &mut Message| {
        m.add_answer(a("example.org.", 60, [203, 0, 113, 66]));
    };
    let mut wrong_id = reply(&q, poison);
    wrong_id[..2].copy_from_slice(&[0x12, 0x34]);
    let other = Query::query(name("example.net."), RecordType::A);
    let other_type = Query::query(name("example.org."), RecordType::AAAA);
    let s = Setup::new(
        config(),
        [
            scripted(wrong_id),
            scripted(reply(&other, poison)),
            scripted(reply(&other_type, poison)),
            scripted(reply(&q, |m| {
                m.add_answer(a("example.org.", 60, [192, 0, 2, 1]));
            })),
        ],
    );
    let m = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(m.answers, vec![a("example.org.", 60, [192, 0, 2, 1])]);
    // Over TCP a wrong answer is not waited past: SERVFAIL.
    let q = Query::query(name("tcp.example.org."), RecordType::A);
    let mut wrong_id = reply(&q, poison);
    wrong_id[..2].copy_from_slice(&[0x12, 0x34]);
    let s = Setup::new(
        config(),
        [
            scripted(reply(&q, |m| m.metadata.truncation = true)),
            scripted(wrong_id),
        ],
    );
    let m = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(m.answers.is_empty());
}

#[test]
fn a_truncated_udp_reply_is_asked_again_over_tcp() {
    let q = Query::query(name("big.example.org."), RecordType::A);
    let s = Setup::new(
        config(),
        [
            scripted(reply(&q, |m| m.metadata.truncation = true)),
            scripted(reply(&q, |m| {
                m.add_answers((1..=3).map(|i| a("big.example.org.", 60, [192, 0, 2, i])));
            })),
        ],
    );
    let m = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 3);
    let tcp: Vec<bool> = s.wire.exchanges().iter().map(|e| e.tcp).collect();
    assert_eq!(tcp, vec![false, true]);
}

#[test]
fn a_reply_truncated_even_over_tcp_is_not_passed_on_as_whole() {
    // Before, the cut TCP answer was cached and sent without TC, as if
    // complete.
    let q = Query::query(name("big.example.org."), RecordType::A);
    let cut = reply(&q, |m| {
        m.metadata.truncation = true;
        m.add_answer(a("big.example.org.", 60, [192, 0, 2, 1]));
    });
    let s = Setup::new(config(), [scripted(cut.clone()), scripted(cut)]);
    let m = decode(s.ask(&client_query(&q, None), Transport::Tcp));
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(m.answers.is_empty() && !m.metadata.truncation);
    assert!(s.cached(&q).is_none());
}

#[test]
fn a_reply_too_large_for_the_client_is_cut_with_tc() {
    let q = Query::query(name("many.example.org."), RecordType::A);
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.add_answers((0..100).map(|i| a("many.example.org.", 60, [192, 0, 2, i])));
        }))],
    );
    let req = client_query(&q, None);
    let out = s.ask(&req, Transport::Udp).unwrap();
    assert!(out.len() <= 512);
    let m = decode(Some(out));
    assert!(m.metadata.truncation && m.answers.is_empty());
    assert_eq!(m.queries, vec![q.clone()]);
    // The client asks again over TCP: the whole answer, from the cache.
    let m = decode(s.ask(&req, Transport::Tcp));
    assert_eq!(m.answers.len(), 100);
    assert_eq!(s.wire.exchanges().len(), 1);
}

#[test]
fn ttls_with_the_top_bit_set_count_as_zero() {
    // RFC 2181 8. Before, 2^31 and above were taken as huge: the answer
    // was cached for the longest allowed and sent with that TTL left.
    let q = example();
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.add_answer(a("example.org.", u32::MAX, [192, 0, 2, 1]));
            m.add_answer(a("example.org.", 1 << 31, [192, 0, 2, 2]));
        }))],
    );
    let m = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(m.answers.len(), 2);
    assert!(m.answers.iter().all(|r| r.ttl == 0), "{:?}", m.answers);
    assert!(s.cached(&q).is_none());
    // The largest TTL that is one is kept, within the configured bound.
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.add_answer(a("example.org.", i32::MAX as u32, [192, 0, 2, 1]));
        }))],
    );
    let m = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert!(m.answers[0].ttl <= 300);
    assert_eq!(s.cached(&q).unwrap().ttl, 300);
}

#[test]
fn nxdomain_is_cached_for_the_soa_s_negative_ttl() {
    let q = Query::query(name("missing.example.org."), RecordType::A);
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.metadata.response_code = ResponseCode::NXDomain;
            m.add_authority(soa("example.org.", 3600, 20));
        }))],
    );
    let m = decode(s.ask(&client_query(&q, Some(1232)), Transport::Udp));
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(m.authorities.len(), 1);
    assert!(m.authorities[0].ttl <= 20);
    assert_eq!(s.cached(&q).unwrap().ttl, 20);
}

#[test]
fn an_extended_rcode_from_the_upstream_is_servfail() {
    // BADVERS (16) needs an OPT to be told; before, it was passed on to a
    // client without EDNS as its low four bits: NOERROR, no answer.
    let q = example();
    let badvers = reply(&q, |m| {
        // Written as 0 in the header and 1 in the OPT's high bits.
        m.metadata.response_code = ResponseCode::BADVERS;
        m.set_edns(Edns::new());
    });
    assert_eq!(badvers[3] & 0x0f, 0);
    let s = Setup::new(config(), [scripted(badvers)]);
    let r = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(r.metadata.response_code, ResponseCode::ServFail);
    assert!(s.cached(&q).is_none());
}

#[test]
fn refused_is_passed_on_but_not_cached() {
    let mut cfg = config();
    cfg.min_ttl = 10;
    let q = example();
    let s = Setup::new(
        cfg,
        [scripted(reply(&q, |m| {
            m.metadata.response_code = ResponseCode::Refused;
        }))],
    );
    let r = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(r.metadata.response_code, ResponseCode::Refused);
    assert!(s.cached(&q).is_none());
}

#[test]
fn a_least_ttl_above_the_negative_bound_does_not_panic() {
    // `u32::clamp` panics when its bounds cross, as these do.
    let mut cfg = config();
    cfg.min_ttl = 60;
    cfg.max_negative_ttl = 30;
    let q = Query::query(name("missing.example.org."), RecordType::A);
    let s = Setup::new(
        cfg,
        [scripted(reply(&q, |m| {
            m.metadata.response_code = ResponseCode::NXDomain;
            m.add_authority(soa("example.org.", 3600, 20));
        }))],
    );
    let r = decode(s.ask(&client_query(&q, None), Transport::Udp));
    assert_eq!(r.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(s.cached(&q).unwrap().ttl, 30);
}

#[test]
fn an_external_name_s_target_is_asked_upstream_and_added() {
    let client = Query::query(
        name(&format!("dns-test-service-3.{NS}.svc.cluster.local.")),
        RecordType::A,
    );
    let target = Query::query(name("foo.example.com."), RecordType::A);
    let s = Setup::new(
        config(),
        [scripted(reply(&target, |m| {
            m.add_answer(cname("foo.example.com.", 300, "cdn.example.net."));
            m.add_answer(a("cdn.example.net.", 20, [192, 0, 2, 9]));
        }))],
    );
    let m = decode(s.ask(&client_query(&client, None), Transport::Udp));
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.metadata.authoritative);
    let got: Vec<String> = m.answers.iter().map(|r| r.data.to_string()).collect();
    assert_eq!(got, ["foo.example.com.", "cdn.example.net.", "192.0.2.9"]);
    assert_eq!(
        Message::from_vec(&s.wire.exchanges()[0].query)
            .unwrap()
            .queries,
        vec![target]
    );
}

#[test]
fn a_query_without_rd_is_forwarded_all_the_same() {
    // As CoreDNS's forward plugin does; the reply copies the client's RD
    // (clear) and says recursion is available.
    let q = example();
    let s = Setup::new(
        config(),
        [scripted(reply(&q, |m| {
            m.add_answer(a("example.org.", 60, [192, 0, 2, 1]));
        }))],
    );
    let mut req = client_query(&q, None);
    req[2] &= !1;
    let m = decode(s.ask(&req, Transport::Udp));
    assert_eq!(m.answers.len(), 1);
    assert!(!m.metadata.recursion_desired && m.metadata.recursion_available);
    let Exchange { query, .. } = &s.wire.exchanges()[0];
    assert!(Message::from_vec(query).unwrap().metadata.recursion_desired);
}

#[test]
fn no_reply_at_all_is_servfail() {
    let q = example();
    let s = Setup::new(config(), []);
    for t in [Transport::Udp, Transport::Tcp] {
        let m = decode(s.ask(&client_query(&q, None), t));
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(m.metadata.message_type, MessageType::Response);
    }
}

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
