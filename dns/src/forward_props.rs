//! Proptests of the forwarding path: the upstream's reply is arbitrary
//! bytes, or a well-formed reply with bytes flipped, set, inserted or
//! deleted. Whatever it is, the client gets a well-formed answer to its
//! own query, built only from replies that answer the question asked
//! (ID and question, RFC 5452 9.1; not cut), with no TTL above the one
//! the upstream gave, over UDP within its size limit; and the cache
//! keeps nothing longer than the upstream said.

use std::net::Ipv6Addr;

use hickory_proto::rr::rdata::{AAAA, MX, NULL, SRV, TXT};
use proptest::prelude::*;

use super::*;
use crate::handler::MAX_UDP;

/// One client question and the upstream's replies, in order.
struct Case {
    question: Query,
    replies: Vec<Vec<u8>>,
}

fn case(question: Query, replies: Vec<Vec<u8>>) -> Case {
    Case { question, replies }
}

/// Well-formed replies of every kind the forwarder meets.
fn catalogue() -> Vec<Case> {
    let org = example();
    let poison = |m: &mut Message| {
        m.add_answer(a("example.org.", 60, [203, 0, 113, 66]));
    };
    let good = reply(&org, |m| {
        m.add_answer(a("example.org.", 60, [192, 0, 2, 1]));
    });
    let mut wrong_id = reply(&org, poison);
    wrong_id[..2].copy_from_slice(&[0x12, 0x34]);
    let www = Query::query(name("www.example.org."), RecordType::A);
    let missing = Query::query(name("missing.example.org."), RecordType::A);
    let six = Query::query(name("example.org."), RecordType::AAAA);
    let big = Query::query(name("big.example.org."), RecordType::A);
    let many = Query::query(name("many.example.org."), RecordType::A);
    let txt = Query::query(name("example.org."), RecordType::TXT);
    let target = Query::query(name("foo.example.com."), RecordType::A);
    vec![
        case(org.clone(), vec![good.clone()]),
        case(
            six.clone(),
            vec![reply(&six, |m| {
                let ip: Ipv6Addr = "2001:db8::1".parse().unwrap();
                m.add_answer(Record::from_rdata(
                    name("example.org."),
                    3600,
                    RData::AAAA(AAAA(ip)),
                ));
            })],
        ),
        case(
            www.clone(),
            vec![reply(&www, |m| {
                m.add_answer(cname("www.example.org.", 300, "a.example.net."));
                m.add_answer(cname("a.example.net.", 30, "b.example.com."));
                m.add_answer(a("b.example.com.", 60, [192, 0, 2, 2]));
                m.add_authority(Record::from_rdata(
                    name("example.com."),
                    86400,
                    RData::NS(hickory_proto::rr::rdata::NS(name("ns.example.com."))),
                ));
                m.add_additional(a("ns.example.com.", 86400, [192, 0, 2, 53]));
            })],
        ),
        case(
            missing.clone(),
            vec![reply(&missing, |m| {
                m.metadata.response_code = ResponseCode::NXDomain;
                m.add_authority(soa("example.org.", 3600, 20));
            })],
        ),
        case(
            big.clone(),
            vec![
                reply(&big, |m| m.metadata.truncation = true),
                reply(&big, |m| {
                    m.add_answers((1..=3).map(|i| a("big.example.org.", 60, [192, 0, 2, i])));
                }),
            ],
        ),
        case(org.clone(), vec![wrong_id, good.clone()]),
        case(
            org.clone(),
            vec![reply(&www, poison), reply(&six, poison), good.clone()],
        ),
        case(
            org.clone(),
            vec![reply(&org, |m| {
                m.add_answer(a("example.org.", u32::MAX, [192, 0, 2, 1]));
                m.add_answer(a("example.org.", i32::MAX as u32, [192, 0, 2, 2]));
            })],
        ),
        case(
            org.clone(),
            vec![reply(&org, |m| {
                m.add_answer(a("example.org.", 0, [192, 0, 2, 3]));
            })],
        ),
        case(
            many.clone(),
            vec![reply(&many, |m| {
                m.add_answers((0..100).map(|i| a("many.example.org.", 60, [192, 0, 2, i])));
                m.add_additional(a("ns.example.org.", 60, [192, 0, 2, 53]));
            })],
        ),
        case(
            external_name(),
            vec![reply(&target, |m| {
                m.add_answer(cname("foo.example.com.", 300, "cdn.example.net."));
                m.add_answer(a("cdn.example.net.", 20, [192, 0, 2, 9]));
            })],
        ),
        case(
            txt.clone(),
            vec![reply(&txt, |m| {
                let owner = name("example.org.");
                let mx = MX::new(10, name("mail.example.org."));
                let srv = SRV::new(1, 2, 443, name("svc.example.org."));
                m.add_answers([
                    Record::from_rdata(owner.clone(), 60, RData::TXT(TXT::new(vec!["v=1".into()]))),
                    Record::from_rdata(owner.clone(), 60, RData::MX(mx)),
                    Record::from_rdata(owner.clone(), 60, RData::SRV(srv)),
                    Record::from_rdata(owner, 60, RData::NULL(NULL::with(vec![1, 2, 3]))),
                ]);
                let mut e = Edns::new();
                e.set_max_payload(1232);
                m.set_edns(e);
            })],
        ),
    ]
}

/// An ExternalName Service's name: its CNAME is followed upstream
/// (to `foo.example.com.`).
fn external_name() -> Query {
    Query::query(
        name(&format!("dns-test-service-3.{NS}.svc.cluster.local.")),
        RecordType::A,
    )
}

/// A change to a reply's bytes, at `at` (modulo its length).
#[derive(Clone, Debug)]
enum Edit {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Edit::Flip(at, 1 << bit)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, v)| Edit::Set(at, v)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, v)| Edit::Insert(at, v)),
        any::<usize>().prop_map(Edit::Delete),
    ]
}

fn apply(bytes: &mut Vec<u8>, e: &Edit) {
    let len = bytes.len();
    match *e {
        Edit::Flip(at, bit) if len > 0 => bytes[at % len] ^= bit,
        Edit::Set(at, v) if len > 0 => bytes[at % len] = v,
        Edit::Insert(at, v) => bytes.insert(at % (len + 1), v),
        Edit::Delete(at) if len > 0 => {
            bytes.remove(at % len);
        }
        _ => {}
    }
}

/// The replies of the exchanges so far that answer their query.
fn usable_replies(s: &Setup) -> Vec<Message> {
    s.wire
        .exchanges()
        .iter()
        .filter_map(answers_its_query)
        .collect()
}

/// Replies that may be the answer to their query: the same ID and
/// question, a response to a QUERY, not cut.
fn answers_its_query(e: &Exchange) -> Option<Message> {
    let q = Message::from_vec(&e.query).ok()?;
    let r = Message::from_vec(&e.reply).ok()?;
    let same = r.metadata.message_type == MessageType::Response
        && r.metadata.op_code == OpCode::Query
        && r.metadata.id == q.metadata.id
        && !r.metadata.truncation
        && r.queries.len() == 1
        && r.queries[0].name().to_lowercase() == q.queries[0].name().to_lowercase()
        && r.queries[0].query_type() == q.queries[0].query_type()
        && r.queries[0].query_class() == q.queries[0].query_class();
    same.then_some(r)
}

/// RFC 2181 8: a TTL with the top bit set counts as zero.
fn effective(ttl: u32) -> u32 {
    if ttl > i32::MAX as u32 { 0 } else { ttl }
}

/// Whether `r` is a record of one of `sources`, with a TTL no higher.
fn from_upstream(r: &Record, sources: &[Message]) -> bool {
    sources.iter().any(|m| {
        m.answers
            .iter()
            .chain(&m.authorities)
            .chain(&m.additionals)
            .any(|u| u == r && u.record_type() == r.record_type() && r.ttl <= effective(u.ttl))
    })
}

/// The client's answer to `req` (its question `q`) against what the
/// upstream sent; `local`: the records the cluster answers with itself.
fn check_answer(
    s: &Setup,
    req: &[u8],
    q: &Query,
    t: Transport,
    out: Option<Vec<u8>>,
    local: &[Record],
) -> Result<(), TestCaseError> {
    // A well-formed query is always answered, SERVFAIL at worst.
    let out = out.ok_or_else(|| TestCaseError::fail("no answer"))?;
    let m = Message::from_vec(&out).map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(m.metadata.message_type, MessageType::Response);
    prop_assert_eq!(m.metadata.id, u16::from_be_bytes([req[0], req[1]]));
    prop_assert_eq!(&m.queries, &vec![q.clone()]);
    if t == Transport::Udp {
        let limit = Message::from_vec(req)
            .unwrap()
            .edns
            .map_or(512, |e| usize::from(e.max_payload().clamp(512, MAX_UDP)));
        prop_assert!(out.len() <= limit, "{} bytes", out.len());
    }
    let sources = usable_replies(s);
    for r in m.answers.iter().chain(&m.authorities).chain(&m.additionals) {
        if local.contains(r) {
            continue;
        }
        prop_assert!(
            from_upstream(r, &sources),
            "{r} not from a reply to the question asked"
        );
    }
    Ok(())
}

/// What the cache keeps: records of replies to the question, kept no
/// longer than their least TTL (or the SOA's for a negative answer).
fn check_cache(s: &Setup, q: &Query) -> Result<(), TestCaseError> {
    let Some(e) = s.cached(q) else {
        return Ok(());
    };
    let sources = usable_replies(s);
    for r in e.answers.iter().chain(&e.authorities).chain(&e.additionals) {
        prop_assert!(from_upstream(r, &sources), "cached {r} not from a reply");
    }
    let bound = match e.answers.iter().map(|r| r.ttl).min() {
        Some(least) => least,
        None => e
            .authorities
            .iter()
            .find_map(|r| match &r.data {
                RData::SOA(soa) => Some(soa.minimum.min(r.ttl)),
                _ => None,
            })
            .unwrap_or(0),
    };
    prop_assert!(e.ttl <= bound, "kept {} s, upstream said {}", e.ttl, bound);
    Ok(())
}

/// Ask `q` twice (the second time from the cache or the kept reply) over
/// each transport and check every answer.
fn drive(replies: Vec<ScriptedReply>, q: &Query, edns: Option<u16>) -> Result<(), TestCaseError> {
    let local = {
        let s = Setup::new(config(), []);
        let bytes = s.ask(&client_query(q, None), Transport::Tcp);
        let m = Message::from_vec(&bytes.unwrap()).unwrap();
        m.answers
    };
    for t in [Transport::Udp, Transport::Tcp] {
        let s = Setup::new(config(), replies.clone());
        let req = client_query(q, edns);
        for _ in 0..2 {
            let out = s.ask(&req, t);
            check_answer(&s, &req, q, t, out, &local)?;
        }
        let target = Query::query(name("foo.example.com."), q.query_type());
        check_cache(&s, q)?;
        check_cache(&s, &target)?;
    }
    Ok(())
}

fn client_edns() -> impl Strategy<Value = Option<u16>> {
    prop_oneof![
        Just(None),
        Just(Some(512)),
        Just(Some(1232)),
        Just(Some(4096))
    ]
}

/// A reply's bytes that decode more often than any: a header of small
/// counts, the query's ID and question (mostly), then anything.
fn loose_reply() -> impl Strategy<Value = ScriptedReply> {
    (
        any::<bool>(),
        any::<[u8; 2]>(),
        [0u16..2, 0..5, 0..3, 0..3],
        proptest::collection::vec(any::<u8>(), 0..300),
        any::<bool>(),
    )
        .prop_map(|(right_id, flags, counts, body, question)| {
            let mut bytes = if right_id { vec![0, 0] } else { vec![0, 1] };
            bytes.extend_from_slice(&flags);
            for c in counts {
                bytes.extend_from_slice(&c.to_be_bytes());
            }
            bytes.extend_from_slice(&body);
            ScriptedReply { bytes, question }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// Any bytes as the upstream's replies.
    #[test]
    fn arbitrary_upstream_bytes(
        external in any::<bool>(),
        raw in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..3),
        loose in proptest::collection::vec(loose_reply(), 0..3),
        edns in client_edns(),
    ) {
        let q = if external { external_name() } else { example() };
        let replies = raw.into_iter().map(scripted).chain(loose).collect();
        drive(replies, &q, edns)?;
    }

    /// Well-formed replies with a few bytes changed.
    #[test]
    fn mutated_upstream_replies(
        which in any::<proptest::sample::Index>(),
        edits in proptest::collection::vec((any::<usize>(), edit()), 0..5),
        edns in client_edns(),
    ) {
        let mut cases = catalogue();
        let Case { question, mut replies } = cases.swap_remove(which.index(cases.len()));
        for (i, e) in &edits {
            let n = replies.len();
            apply(&mut replies[i % n], e);
        }
        drive(replies.into_iter().map(scripted).collect(), &question, edns)?;
    }
}

#[test]
fn every_catalogue_case_is_answered_from_its_good_reply() {
    for (i, c) in catalogue().into_iter().enumerate() {
        let s = Setup::new(config(), c.replies.iter().cloned().map(scripted));
        let out = s.ask(&client_query(&c.question, Some(1232)), Transport::Tcp);
        let m = Message::from_vec(&out.unwrap()).unwrap();
        assert!(
            !m.answers.is_empty() || m.metadata.response_code == ResponseCode::NXDomain,
            "case {i}: {m:?}"
        );
        assert!(
            m.answers
                .iter()
                .all(|r| r.data.to_string() != "203.0.113.66"),
            "case {i}"
        );
    }
}
