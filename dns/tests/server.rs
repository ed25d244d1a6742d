//! The server over real sockets on 127.0.0.1, fed by an in-memory
//! datastore: readiness, answers following the store, TCP after
//! truncation, forwarding with cache and coalescing against a small
//! upstream in the test, and a flooding client that does not starve others.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_api::store::Datastore;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::typed::TypedStore;
use tartan_dns::answer::Zone;
use tartan_dns::daemon::{Config, Running, start};
use tartan_dns::forward::ForwardConfig;
use tartan_dns::limit::LimitConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

fn config(upstreams: Vec<SocketAddr>, rate: f64) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        health: Some("127.0.0.1:0".parse().unwrap()),
        zone: Zone::new("cluster.local", 5, 5).unwrap(),
        forward: ForwardConfig {
            upstreams,
            timeout: Duration::from_secs(2),
            cache_size: 100,
            min_ttl: 0,
            max_ttl: 300,
            max_negative_ttl: 30,
        },
        limit: LimitConfig {
            rate,
            burst: rate,
            max_clients: 1000,
        },
        max_inflight: 1024,
        max_tcp: 16,
        udp_threads: 2,
    }
}

async fn store() -> Arc<dyn Datastore> {
    let s: Arc<dyn Datastore> = Arc::new(MemoryStore::new());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    s.create_typed(&ns).await.unwrap();
    s
}

fn svc(name: &str, spec: serde_json::Value) -> Service {
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}),
    )
    .unwrap()
}

fn query_bytes(name: &str, t: RecordType) -> (u16, Vec<u8>) {
    let mut m = Message::query();
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
    (m.metadata.id, m.to_vec().unwrap())
}

async fn udp_ask(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp_ask_on(&sock, server, name, t).await.expect("an answer")
}

async fn udp_ask_on(
    sock: &UdpSocket,
    server: SocketAddr,
    name: &str,
    t: RecordType,
) -> Option<Message> {
    let (id, bytes) = query_bytes(name, t);
    sock.send_to(&bytes, server).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok((n, _))) = tokio::time::timeout(left, sock.recv_from(&mut buf)).await else {
            return None;
        };
        let m = Message::from_vec(&buf[..n]).unwrap();
        if m.metadata.id == id {
            return Some(m);
        }
    }
}

async fn tcp_ask(server: SocketAddr, name: &str, t: RecordType) -> Message {
    let (_, bytes) = query_bytes(name, t);
    let mut s = TcpStream::connect(server).await.unwrap();
    s.write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    s.write_all(&bytes).await.unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await.unwrap();
    let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut body).await.unwrap();
    Message::from_vec(&body).unwrap()
}

async fn http_status(addr: SocketAddr, path: &str) -> u16 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out.split_whitespace().nth(1).unwrap().parse().unwrap()
}

async fn until_ready(r: &Running) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !r.ready.load(Ordering::Acquire) {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Poll until `check` holds; returns how long it took.
async fn within<F: AsyncFnMut() -> bool>(limit: Duration, mut check: F) -> Duration {
    let start = Instant::now();
    loop {
        if check().await {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_after_listing_and_services_followed_within_200ms() {
    let store = store().await;
    store
        .create_typed(&svc(
            "kubernetes",
            json!({"clusterIP": "10.96.0.1", "ports": [{"port": 443}]}),
        ))
        .await
        .unwrap();
    let r = start(config(vec![], 0.0), store.clone()).await.unwrap();
    let health = r.health.unwrap();
    assert_eq!(http_status(health, "/livez").await, 200);
    until_ready(&r).await;
    assert_eq!(http_status(health, "/readyz").await, 200);
    let m = udp_ask(
        r.dns,
        "kubernetes.default.svc.cluster.local.",
        RecordType::A,
    )
    .await;
    assert_eq!(m.answers[0].data.to_string(), "10.96.0.1");

    let name = "web.default.svc.cluster.local.";
    store
        .create_typed(&svc(
            "web",
            json!({"clusterIP": "10.96.0.80", "ports": [{"port": 80}]}),
        ))
        .await
        .unwrap();
    let took = within(Duration::from_millis(200), async || {
        udp_ask(r.dns, name, RecordType::A).await.answers.len() == 1
    })
    .await;
    eprintln!("created Service answered after {took:?}");
    store
        .delete_typed::<Service>(Some("default"), "web", None)
        .await
        .unwrap();
    let took = within(Duration::from_millis(200), async || {
        udp_ask(r.dns, name, RecordType::A)
            .await
            .metadata
            .response_code
            == ResponseCode::NXDomain
    })
    .await;
    eprintln!("deleted Service gone after {took:?}");
    let metrics = {
        let mut s = TcpStream::connect(health).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    };
    assert!(
        metrics
            .contains("tartan_dns_queries_total{qtype=\"A\",rcode=\"NXDOMAIN\",transport=\"udp\"}"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headless_with_200_endpoints_truncates_over_udp_and_is_whole_over_tcp() {
    let store = store().await;
    store
        .create_typed(&svc(
            "big",
            json!({"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}),
        ))
        .await
        .unwrap();
    let eps: Vec<_> = (0..200)
        .map(|i| json!({"addresses": [format!("10.250.{}.{}", i / 200, i % 200 + 1)], "conditions": {"ready": true}}))
        .collect();
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "big-x", "namespace": "default", "labels": {"kubernetes.io/service-name": "big"}},
        "addressType": "IPv4", "endpoints": eps, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
    }))
    .unwrap();
    store.create_typed(&slice).await.unwrap();
    let r = start(config(vec![], 0.0), store.clone()).await.unwrap();
    until_ready(&r).await;
    let name = "big.default.svc.cluster.local.";
    let m = udp_ask(r.dns, name, RecordType::A).await;
    assert!(m.metadata.truncation);
    assert!(m.answers.is_empty());
    let m = tcp_ask(r.dns, name, RecordType::A).await;
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 200);
    // An endpoint turning unready leaves the answer within a second.
    let mut stored: EndpointSlice = store.get_typed(Some("default"), "big-x").await.unwrap();
    stored.endpoints[0].conditions.as_mut().unwrap().ready = Some(false);
    store.update_typed(&stored).await.unwrap();
    let took = within(Duration::from_secs(1), async || {
        tcp_ask(r.dns, name, RecordType::A).await.answers.len() == 199
    })
    .await;
    eprintln!("unready endpoint left the answer after {took:?}");
    let _ = slice;
}

/// A tiny upstream: answers every A question with 192.0.2.1 (TTL 60)
/// after `delay`, counting the questions it got.
async fn upstream(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = sock.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = sock.recv_from(&mut buf).await else {
                return;
            };
            c.fetch_add(1, Ordering::SeqCst);
            let Ok(req) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            let sock = sock.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
                resp.metadata.recursion_desired = true;
                resp.metadata.recursion_available = true;
                resp.add_queries(req.queries.clone());
                let q = &req.queries[0];
                if q.name().to_ascii().starts_with("missing") {
                    resp.metadata.response_code = ResponseCode::NXDomain;
                } else {
                    resp.add_answer(Record::from_rdata(
                        q.name().clone(),
                        60,
                        RData::A(A("192.0.2.1".parse().unwrap())),
                    ));
                }
                let _ = sock.send_to(&resp.to_vec().unwrap(), from).await;
            });
        }
    });
    (addr, count, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_caches_and_coalesces_identical_questions() {
    let (up, count, task) = upstream(Duration::from_millis(300)).await;
    let r = start(config(vec![up], 0.0), store().await).await.unwrap();
    until_ready(&r).await;
    // Ten identical questions at once: one goes upstream.
    let asks: Vec<_> = (0..10)
        .map(|_| tokio::spawn(udp_ask(r.dns, "example.org.", RecordType::A)))
        .collect();
    for a in asks {
        let m = a.await.unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.answers[0].data.to_string(), "192.0.2.1");
        assert!(m.metadata.recursion_available);
        assert!(!m.metadata.authoritative);
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Asked again: from the cache, TTL counting down from 60.
    let m = udp_ask(r.dns, "EXAMPLE.org.", RecordType::A).await;
    assert!(m.answers[0].ttl <= 60);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // And again with the same bytes (another ID): the kept reply, with
    // this request's ID, counted as a cache hit too.
    // (`udp_ask` takes only the answer carrying its request's ID.)
    let m = udp_ask(r.dns, "EXAMPLE.org.", RecordType::A).await;
    assert_eq!(m.answers[0].data.to_string(), "192.0.2.1");
    assert!(m.answers[0].ttl <= 60 && m.answers[0].ttl >= 58);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Another type is another question.
    udp_ask(r.dns, "example.org.", RecordType::AAAA).await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
    // NXDOMAIN passes through.
    let m = udp_ask(r.dns, "missing.example.org.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    let text = r.metrics.encode();
    assert!(text.contains("tartan_dns_coalesced_total 9"), "{text}");
    assert!(text.contains("tartan_dns_cache_hits_total 2"), "{text}");
    assert!(
        text.contains("tartan_dns_upstream_duration_seconds_count 3"),
        "{text}"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_name_outside_the_zone_is_answered_with_its_targets_addresses() {
    let (up, count, task) = upstream(Duration::ZERO).await;
    let store = store().await;
    for (name, target) in [("ext", "www.example.org"), ("gone", "missing.example.org")] {
        store
            .create_typed(&svc(
                name,
                json!({"type": "ExternalName", "externalName": target}),
            ))
            .await
            .unwrap();
    }
    let r = start(config(vec![up], 0.0), store).await.unwrap();
    until_ready(&r).await;
    for _ in 0..2 {
        // The second time from the kept reply: the same answer.
        let m = udp_ask(r.dns, "ext.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.metadata.authoritative);
        let got: Vec<(String, String)> = m
            .answers
            .iter()
            .map(|a| (a.name.to_ascii(), a.data.to_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "ext.default.svc.cluster.local.".to_string(),
                    "www.example.org.".to_string()
                ),
                ("www.example.org.".to_string(), "192.0.2.1".to_string()),
            ]
        );
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Asked for the CNAME: nothing goes upstream.
    let m = udp_ask(r.dns, "ext.default.svc.cluster.local.", RecordType::CNAME).await;
    assert_eq!(m.answers.len(), 1);
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // A target that does not exist: the CNAME with the target's NXDOMAIN.
    let m = udp_ask(r.dns, "gone.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(m.answers.len(), 1);
    task.abort();
}

/// Writes `req` on `s` with its length in front.
async fn tcp_send(s: &mut TcpStream, req: &[u8]) {
    s.write_all(&(req.len() as u16).to_be_bytes())
        .await
        .unwrap();
    s.write_all(req).await.unwrap();
}

/// The next answer on `s`, within 10 s.
async fn tcp_next(s: &mut TcpStream) -> Message {
    let read = async {
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.unwrap();
        let mut body = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut body).await.unwrap();
        Message::from_vec(&body).unwrap()
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("an answer within 10 s")
}

/// Two queries pipelined on one connection, the first waiting on an
/// upstream that holds its answer until told: the second is answered
/// first (RFC 7766 6.2.1.1), and the first once the upstream answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_tcp_query_is_not_held_up_by_one_waiting_upstream() {
    let held = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let up = held.local_addr().unwrap();
    let (release, mut released) = tokio::sync::watch::channel(false);
    let upstream = {
        let sock = held.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 4096];
            let (n, from) = sock.recv_from(&mut buf).await.unwrap();
            let req = Message::from_vec(&buf[..n]).unwrap();
            released.wait_for(|r| *r).await.unwrap();
            let mut resp = Message::response(req.metadata.id, req.metadata.op_code);
            resp.metadata.recursion_available = true;
            resp.add_queries(req.queries.clone());
            resp.add_answer(Record::from_rdata(
                req.queries[0].name().clone(),
                60,
                RData::A(A("192.0.2.7".parse().unwrap())),
            ));
            sock.send_to(&resp.to_vec().unwrap(), from).await.unwrap();
        })
    };
    let mut cfg = config(vec![up], 0.0);
    cfg.forward.timeout = Duration::from_secs(60);
    let r = start(cfg, store().await).await.unwrap();
    until_ready(&r).await;
    let mut s = TcpStream::connect(r.dns).await.unwrap();
    // IDs of our choosing (the ones made are random, and could be equal).
    let with_id = |id: u16, (_, mut bytes): (u16, Vec<u8>)| {
        bytes[..2].copy_from_slice(&id.to_be_bytes());
        (id, bytes)
    };
    let (slow, slow_req) = with_id(1, query_bytes("slow.example.org.", RecordType::A));
    let (fast, fast_req) = with_id(
        2,
        query_bytes("dns-version.cluster.local.", RecordType::TXT),
    );
    tcp_send(&mut s, &slow_req).await;
    tcp_send(&mut s, &fast_req).await;
    let first = tcp_next(&mut s).await;
    assert_eq!(
        first.metadata.id, fast,
        "the local answer waited for the upstream"
    );
    assert_eq!(first.answers.len(), 1);
    release.send(true).unwrap();
    let second = tcp_next(&mut s).await;
    assert_eq!(second.metadata.id, slow);
    assert_eq!(second.answers[0].data.to_string(), "192.0.2.7");
    upstream.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_servfail() {
    // A port nothing listens on: the ICMP error or the timeout.
    let dead = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let mut cfg = config(vec![addr], 0.0);
    cfg.forward.timeout = Duration::from_millis(200);
    let r = start(cfg, store().await).await.unwrap();
    let m = udp_ask(r.dns, "example.org.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_client_does_not_starve_others() {
    let store = store().await;
    store
        .create_typed(&svc(
            "web",
            json!({"clusterIP": "10.96.0.80", "ports": [{"port": 80}]}),
        ))
        .await
        .unwrap();
    // 200 queries per second per client.
    let r = start(config(vec![], 200.0), store).await.unwrap();
    until_ready(&r).await;
    let dns = r.dns;
    let name = "web.default.svc.cluster.local.";
    // The flooder: 127.0.0.2, another process in real life, so a thread
    // here, sending as fast as it can for a second.
    let flood = std::thread::spawn(move || {
        let sock = std::net::UdpSocket::bind("127.0.0.2:0").unwrap();
        let (_, bytes) = query_bytes(name, RecordType::A);
        let end = Instant::now() + Duration::from_secs(1);
        let mut sent = 0u64;
        while Instant::now() < end {
            let _ = sock.send_to(&bytes, dns);
            sent += 1;
        }
        sent
    });
    // Meanwhile another client asks 20 times, as a resolver does (a retry
    // after 500 ms, four tries), and gets every answer.
    let sock = UdpSocket::bind("127.0.0.3:0").await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut retries = 0;
    for _ in 0..20 {
        let mut got = None;
        for _ in 0..4 {
            got = tokio::time::timeout(
                Duration::from_millis(500),
                udp_ask_on(&sock, dns, name, RecordType::A),
            )
            .await
            .ok()
            .flatten();
            if got.is_some() {
                break;
            }
            retries += 1;
        }
        assert_eq!(got.expect("answered despite the flood").answers.len(), 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = flood.join().unwrap();
    let text = r.metrics.encode();
    let limited: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("tartan_dns_rate_limited_total "))
        .unwrap()
        .parse()
        .unwrap();
    eprintln!(
        "flooder sent {sent}, {limited} dropped; the other client retried {retries} times in 20 questions"
    );
    let answered: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                r#"tartan_dns_queries_total{qtype="A",rcode="NOERROR",transport="udp"} "#,
            )
        })
        .unwrap()
        .parse()
        .unwrap();
    // The flooder got at most its burst plus at most two seconds of its
    // rate; the rest of what reached the server was dropped unparsed.
    let flooder_answered = answered - 20;
    eprintln!("flooder answered {flooder_answered} times");
    assert!(
        flooder_answered <= 200 + 2 * 200,
        "flooder answered {flooder_answered}"
    );
    assert!(limited > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_on_a_udp_thread_is_timed_on_that_thread() {
    let r = start(config(vec![], 0.0), store().await).await.unwrap();
    until_ready(&r).await;
    let count = |text: &str| -> u64 {
        text.lines()
            .filter_map(|l| {
                l.strip_prefix("tartan_dns_udp_answer_duration_seconds_count{thread=\"")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(count(&r.metrics.encode()), 0);
    for _ in 0..3 {
        let m = udp_ask(r.dns, "web.default.svc.cluster.local.", RecordType::A).await;
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    }
    // Each answer is counted once, on the thread that received its query
    // (the first from the records, the next two from the reply cache).
    // The count follows the send: wait for it.
    within(Duration::from_secs(5), async || {
        count(&r.metrics.encode()) == 3
    })
    .await;
    let text = r.metrics.encode();
    assert!(
        text.contains(
            "tartan_dns_udp_answer_duration_seconds_bucket{le=\"0.000005\",thread=\"0\"}"
        ),
        "{text}"
    );
    // A TCP answer is not a UDP thread's.
    let m = tcp_ask(r.dns, "web.default.svc.cluster.local.", RecordType::A).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(count(&r.metrics.encode()), 3);
}
