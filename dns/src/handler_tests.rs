use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::answer::tests::{NS, add_service, add_slice, cluster, ping_pong, service, slice, zone};
use crate::metrics::Metrics;

fn handler(records: Records) -> Handler {
    Handler {
        records: Arc::new(RwLock::new(records)),
        zone: zone(),
        forwarder: None,
        metrics: Arc::new(Metrics::new()),
        replies: crate::replies::ReplyCache::new(100),
        forwarded: crate::replies::ReplyCache::new(100),
        ready: Arc::new(AtomicBool::new(true)),
    }
}

fn query(name: &str, t: RecordType, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

fn run(h: &Handler, req: &[u8], t: Transport) -> Option<Message> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(h.handle(req, t))
        .map(|b| Message::from_vec(&b).expect("our answers decode"))
}

/// A headless Service with `n` ready endpoints.
pub(crate) fn big_headless(n: usize) -> Records {
    let mut r = cluster();
    add_service(
        &mut r,
        &service(
            "big",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ),
    );
    let eps: Vec<_> = (0..n)
        .map(|i| json!({"addresses": [format!("10.250.{}.{}", i / 250, i % 250 + 1)]}))
        .collect();
    add_slice(&mut r, &slice("big-1", "big", "IPv4", json!(eps)));
    r
}

#[test]
fn large_udp_answer_is_truncated_and_tcp_carries_it_whole() {
    let h = handler(big_headless(200));
    let name = format!("big.{NS}.svc.cluster.local.");
    for edns in [None, Some(1232)] {
        let m = run(&h, &query(&name, RecordType::A, edns), Transport::Udp).unwrap();
        assert!(m.metadata.truncation, "edns {edns:?}");
        assert!(m.answers.is_empty());
        assert_eq!(m.queries.len(), 1);
        assert_eq!(m.edns.is_some(), edns.is_some());
    }
    let m = run(&h, &query(&name, RecordType::A, None), Transport::Tcp).unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 200);
    // 200 addresses exceed even a 4096-byte EDNS buffer.
    let m = run(&h, &query(&name, RecordType::A, Some(4096)), Transport::Udp).unwrap();
    assert!(m.metadata.truncation);
    assert!(h.metrics.encode().contains("tartan_dns_truncated_total 3"));
    // Asked again, from the reply cache: the same, and counted alike.
    let m = run(&h, &query(&name, RecordType::A, Some(4096)), Transport::Udp).unwrap();
    assert!(m.metadata.truncation);
    assert!(h.metrics.encode().contains("tartan_dns_truncated_total 4"));
    // 40 fit in the 1232 bytes EDNS allows, but not in plain DNS's 512.
    let h = handler(big_headless(40));
    let m = run(&h, &query(&name, RecordType::A, Some(1232)), Transport::Udp).unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 40);
    let m = run(&h, &query(&name, RecordType::A, None), Transport::Udp).unwrap();
    assert!(m.metadata.truncation);
}

#[test]
fn a_headless_service_of_thousands_of_endpoints_comes_whole_over_tcp() {
    // Every address costs 16 bytes however many there are: 3,000 fit one
    // TCP message (before, names after the 120th were not compressed and
    // the answer was cut at about 1,500 with TC).
    let h = handler(big_headless(3000));
    let name = format!("Big.{NS}.svc.cluster.local.");
    let m = run(&h, &query(&name, RecordType::A, None), Transport::Tcp).unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 3000);
    assert!(m.answers.iter().all(|r| r.name.to_ascii() == name));
}

#[test]
fn no_udp_answer_is_larger_than_what_we_advertise() {
    // 100 addresses (about 1.7 KB) fit the 4096 bytes a client offers,
    // but would be sent in fragments: over TCP instead.
    let h = handler(big_headless(100));
    let name = format!("big.{NS}.svc.cluster.local.");
    let req = query(&name, RecordType::A, Some(4096));
    let m = run(&h, &req, Transport::Udp).unwrap();
    assert!(m.metadata.truncation, "sent whole over UDP");
    assert!(m.answers.is_empty());
    assert_eq!(m.edns.as_ref().unwrap().max_payload(), MAX_UDP);
    let m = run(&h, &req, Transport::Tcp).unwrap();
    assert_eq!(m.answers.len(), 100);
}

#[test]
fn answers_are_authoritative_and_echo_id_and_rd() {
    let h = handler(cluster());
    let req = query("kubernetes.default.svc.cluster.local.", RecordType::A, None);
    let id = u16::from_be_bytes([req[0], req[1]]);
    let m = run(&h, &req, Transport::Udp).unwrap();
    assert_eq!(m.metadata.id, id);
    assert!(m.metadata.authoritative && m.metadata.recursion_desired);
    assert_eq!(m.answers.len(), 1);
    assert!(m.edns.is_none());
    let text = h.metrics.encode();
    assert!(
        text.contains(r#"tartan_dns_queries_total{qtype="A",rcode="NOERROR",transport="udp"} 1"#),
        "{text}"
    );
}

#[test]
fn edns_is_echoed_and_unknown_versions_get_badvers() {
    let h = handler(cluster());
    let m = run(
        &h,
        &query(
            "kubernetes.default.svc.cluster.local.",
            RecordType::A,
            Some(4096),
        ),
        Transport::Udp,
    )
    .unwrap();
    assert_eq!(m.edns.as_ref().unwrap().max_payload(), MAX_UDP);
    let mut req = Message::query();
    req.add_query(Query::query(Name::from_ascii("x.").unwrap(), RecordType::A));
    let mut e = Edns::new();
    e.set_version(1);
    req.set_edns(e);
    let m = run(&h, &req.to_vec().unwrap(), Transport::Udp).unwrap();
    // 16 is BADVERS in an OPT-carrying answer (the decoder names it BADSIG).
    assert_eq!(u16::from(m.metadata.response_code), 16);
    assert!(m.edns.is_some());
}

#[test]
fn other_opcodes_are_not_implemented_and_responses_are_dropped() {
    let h = handler(cluster());
    let mut req = Message::query();
    req.metadata.op_code = OpCode::Status;
    req.add_query(Query::query(Name::from_ascii("x.").unwrap(), RecordType::A));
    let m = run(&h, &req.to_vec().unwrap(), Transport::Udp).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::NotImp);
    let mut resp = Message::response(7, OpCode::Query);
    resp.add_query(Query::query(Name::from_ascii("x.").unwrap(), RecordType::A));
    assert!(run(&h, &resp.to_vec().unwrap(), Transport::Udp).is_none());
}

#[test]
fn malformed_and_questionless_queries_get_formerr() {
    let h = handler(cluster());
    // A header that promises a question that is not there.
    let mut bad = query("kubernetes.default.svc.cluster.local.", RecordType::A, None);
    bad.truncate(20);
    let m = run(&h, &bad, Transport::Udp).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert_eq!(m.metadata.id, u16::from_be_bytes([bad[0], bad[1]]));
    let empty = Message::query().to_vec().unwrap();
    let m = run(&h, &empty, Transport::Udp).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    // Shorter than a header: nothing to answer.
    assert!(run(&h, &[0u8; 5], Transport::Udp).is_none());
}

#[test]
fn before_the_first_listing_names_of_the_zone_are_servfail_not_nxdomain() {
    let h = handler(Records::new());
    h.ready.store(false, std::sync::atomic::Ordering::Release);
    let ask = |name: &str| {
        run(&h, &query(name, RecordType::A, None), Transport::Udp)
            .unwrap()
            .metadata
    };
    // A Service not read yet, and one that may never exist: neither gets
    // an authoritative answer a client would cache.
    for name in [
        "kubernetes.default.svc.cluster.local.",
        "nothing.default.svc.cluster.local.",
    ] {
        let m = ask(name);
        assert_eq!(m.response_code, ResponseCode::ServFail, "{name}");
        assert!(!m.authoritative, "{name}");
    }
    // Once the listing is in, the zone is answered from it.
    h.records.write().unwrap().set_namespace("default", true);
    h.ready.store(true, std::sync::atomic::Ordering::Release);
    let m = ask("nothing.default.svc.cluster.local.");
    assert_eq!(m.response_code, ResponseCode::NXDomain);
    assert!(m.authoritative);
}

#[test]
fn a_loop_of_external_names_is_servfail_without_authority() {
    let h = handler(ping_pong());
    let m = run(
        &h,
        &query(
            &format!("ping.{NS}.svc.cluster.local."),
            RecordType::A,
            None,
        ),
        Transport::Udp,
    )
    .unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(!m.metadata.authoritative);
    assert_eq!(m.answers.len(), 2);
}

#[test]
fn outside_the_zone_without_upstreams_is_servfail_and_zone_transfers_refused() {
    let h = handler(cluster());
    let m = run(
        &h,
        &query("example.com.", RecordType::A, None),
        Transport::Udp,
    )
    .unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
    assert!(!m.metadata.recursion_available);
    let m = run(
        &h,
        &query("example.com.", RecordType::AXFR, None),
        Transport::Tcp,
    )
    .unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::Refused);
}

/// What any UDP reply to `req` must be: a response with the request's ID,
/// opcode and RD (RFC 1035 4.1.1); no larger than 512 bytes unless the
/// request carries an OPT (RFC 1035 4.2.1), and then no larger than its
/// payload size (RFC 6891 6.2.3, 6.2.5); with an OPT when the request
/// had one it could be read from (RFC 6891 7).
fn reply_fits_request(req: &[u8], m: &Message, len: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(m.metadata.message_type, MessageType::Response);
    prop_assert_eq!(m.metadata.id, u16::from_be_bytes([req[0], req[1]]));
    prop_assert_eq!(u8::from(m.metadata.op_code), (req[2] >> 3) & 0x0f);
    prop_assert_eq!(m.metadata.recursion_desired, req[2] & 1 != 0);
    let limit = match Message::from_vec(req) {
        Ok(q) => {
            prop_assert_eq!(m.edns.is_some(), q.edns.is_some());
            q.edns
                .map_or(512, |e| usize::from(e.max_payload().clamp(512, MAX_UDP)))
        }
        Err(_) => 512,
    };
    prop_assert!(len <= limit, "{} bytes for a limit of {}", len, limit);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Arbitrary bytes never panic the handler, and anything it sends back
    /// decodes and fits a UDP datagram.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let h = handler(cluster());
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        if let Some(out) = rt.block_on(h.handle(&bytes, Transport::Udp)) {
            prop_assert!(out.len() <= usize::from(MAX_UDP));
            let m = Message::from_vec(&out);
            prop_assert!(m.is_ok());
            reply_fits_request(&bytes, &m.unwrap(), out.len())?;
        }
    }

    /// Valid queries with mutated bytes: the same.
    #[test]
    fn mutated_queries_never_panic(
        pos in 0usize..80, val in any::<u8>(), t in 0u16..300,
        name in "[a-z0-9-]{1,12}(\\.[a-z0-9-]{1,12}){0,5}",
    ) {
        let h = handler(big_headless(40));
        let Ok(n) = Name::from_ascii(format!("{name}.svc.cluster.local.")) else {
            return Ok(());
        };
        let mut req = query(&n.to_ascii(), RecordType::from(t), Some(512));
        if pos < req.len() {
            req[pos] = val;
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for tr in [Transport::Udp, Transport::Tcp] {
            if let Some(out) = rt.block_on(h.handle(&req, tr)) {
                let m = Message::from_vec(&out);
                prop_assert!(m.is_ok());
                if tr == Transport::Udp {
                    reply_fits_request(&req, &m.unwrap(), out.len())?;
                }
            }
        }
    }
}

#[test]
fn a_repeated_udp_question_is_answered_from_kept_bytes_until_the_records_change() {
    let h = handler(big_headless(3));
    let name = format!("big.{NS}.svc.cluster.local.");
    let mut req = query(&name, RecordType::A, Some(1232));
    let first = run(&h, &req, Transport::Udp).unwrap();
    assert_eq!(first.answers.len(), 3);
    assert_eq!(h.replies.len(), 1);
    // Another ID: the kept reply, with that ID; counted as a query.
    req[0] = 0x12;
    req[1] = 0x34;
    let again = run(&h, &req, Transport::Udp).unwrap();
    assert_eq!(again.metadata.id, 0x1234);
    assert_eq!(again.answers, first.answers);
    assert!(
        h.metrics
            .encode()
            .contains(r#"tartan_dns_queries_total{qtype="A",rcode="NOERROR",transport="udp"} 2"#),
        "{}",
        h.metrics.encode()
    );
    // The Service goes: the next answer is NXDOMAIN, not the kept one.
    h.records
        .write()
        .unwrap()
        .set_service(&(NS.into(), "big".into()), None);
    let gone = run(&h, &req, Transport::Udp).unwrap();
    assert_eq!(gone.metadata.response_code, ResponseCode::NXDomain);
    // TCP is not served from it.
    assert!(run(&h, &req, Transport::Tcp).is_some());
    assert_eq!(h.replies.len(), 1);
}

#[test]
fn zone_transfers_of_the_cluster_zone_are_refused() {
    let h = handler(cluster());
    for t in [RecordType::AXFR, RecordType::IXFR] {
        for transport in [Transport::Tcp, Transport::Udp] {
            let m = run(&h, &query("cluster.local.", t, None), transport).unwrap();
            assert_eq!(m.metadata.response_code, ResponseCode::Refused, "{t}");
            assert!(m.answers.is_empty() && m.authorities.is_empty(), "{t}");
        }
    }
}

#[test]
fn the_do_bit_is_copied_into_the_response() {
    let h = handler(cluster());
    for dnssec_ok in [true, false] {
        let mut m = Message::query();
        m.add_query(Query::query(
            Name::from_ascii("kubernetes.default.svc.cluster.local.").unwrap(),
            RecordType::A,
        ));
        let mut e = Edns::new();
        e.set_max_payload(1232);
        e.set_dnssec_ok(dnssec_ok);
        m.set_edns(e);
        let r = run(&h, &m.to_vec().unwrap(), Transport::Udp).unwrap();
        assert_eq!(r.edns.unwrap().flags().dnssec_ok, dnssec_ok);
    }
}

#[test]
fn additional_records_that_do_not_fit_are_left_out_without_truncation() {
    let h = handler(big_headless(7));
    let name = format!("_http._tcp.big.{NS}.svc.cluster.local.");
    // Whole (over TCP), the reply is larger than plain DNS's 512 bytes...
    let whole = rt_handle(&h, &query(&name, RecordType::SRV, None), Transport::Tcp);
    assert!(whole.len() > 512, "{} bytes", whole.len());
    let m = Message::from_vec(&whole).unwrap();
    assert_eq!((m.answers.len(), m.additionals.len()), (7, 7));
    // ...but its answers fit: sent without the additionals, TC clear.
    let m = run(&h, &query(&name, RecordType::SRV, None), Transport::Udp).unwrap();
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 7);
    assert!(m.additionals.is_empty());
    assert!(!h.metrics.encode().contains("tartan_dns_truncated_total 1"));
}

fn rt_handle(h: &Handler, req: &[u8], t: Transport) -> Vec<u8> {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(h.handle(req, t))
        .unwrap()
}

/// A request of `flags` (header bytes 2 and 3) and `counts`, then `body`.
fn raw(flags: [u8; 2], counts: [u16; 4], body: &[u8]) -> Vec<u8> {
    let mut v = vec![0xab, 0xcd, flags[0], flags[1]];
    for c in counts {
        v.extend_from_slice(&c.to_be_bytes());
    }
    v.extend_from_slice(body);
    v
}

#[test]
fn an_undecodable_request_gets_its_opcode_and_rd_back() {
    let h = handler(cluster());
    // RFC 1035 4.1.1: OPCODE and RD are copied into the response, even
    // when the rest of the request does not decode. A QUERY: FORMERR.
    let bad = raw([0x01, 0x10], [1, 0, 0, 0], &[3, b'a']);
    let m = run(&h, &bad, Transport::Udp).unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    assert_eq!(m.metadata.op_code, OpCode::Query);
    assert!(m.metadata.recursion_desired);
    assert!(m.metadata.checking_disabled);
    // Another opcode: NOTIMP (RFC 1035 4.1.1), its opcode copied, whether
    // or not its body decodes.
    for (op, counts) in [(15u8, [1, 0, 0, 0]), (1, [1, 0, 0, 0]), (15, [0, 0, 0, 0])] {
        let bad = raw([op << 3 | 1, 0], counts, &[3, b'a']);
        let m = run(&h, &bad, Transport::Tcp).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::NotImp, "{op}");
        assert_eq!(u8::from(m.metadata.op_code), op);
        assert!(m.metadata.recursion_desired);
        assert_eq!(m.metadata.id, 0xabcd);
    }
}

#[test]
fn compression_pointers_that_loop_or_point_forward_are_formerr() {
    let h = handler(cluster());
    for body in [
        // A pointer to itself.
        &[0xc0, 12, 0, 1, 0, 1][..],
        // A pointer forward, past itself.
        &[0xc0, 14, 0, 1, 0, 1, 0][..],
        // Two labels pointing at each other.
        &[1, b'a', 0xc0, 16, 1, b'b', 0xc0, 12, 0, 1, 0, 1][..],
        // A pointer past the end.
        &[0xff, 0xff, 0, 1, 0, 1][..],
    ] {
        for t in [Transport::Udp, Transport::Tcp] {
            let m = run(&h, &raw([1, 0], [1, 0, 0, 0], body), t).unwrap();
            assert_eq!(m.metadata.response_code, ResponseCode::FormErr, "{body:?}");
        }
    }
}
