//! The forwarding path over arbitrary upstream replies: a client's query,
//! answered through a forwarder whose upstream sends the input's replies
//! (decoding, the ID and question checks, TC and the TCP retry, caching,
//! an ExternalName's CNAME followed, the answer encoded and cut to size).
//! It must not panic, and every answer must decode, carry the query's ID
//! with QR set, and fit what we allow over UDP.
//!
//! Input: a flag byte (bit 0: the client asks over TCP), the client's
//! query as a 2-byte big-endian length and its bytes, then replies, each a
//! flag byte (bit 0: the forwarded question is put after the reply's
//! header), a 2-byte length and its bytes. A reply's ID is XORed with the
//! forwarded query's (random): ID 0 is the right one.
#![no_main]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tartan_dns::answer::Zone;
use tartan_dns::forward::{ForwardConfig, Forwarder};
use tartan_dns::handler::{Handler, MAX_UDP, Transport};
use tartan_dns::metrics::Metrics;
use tartan_dns::model::{ServiceKind, ServiceRec};
use tartan_dns::records::Records;
use tartan_dns::replies::ReplyCache;
use tartan_dns::upstream::{Scripted, ScriptedReply};

struct Fixed {
    records: Arc<RwLock<Records>>,
    rt: tokio::runtime::Runtime,
}

/// An ExternalName `ext.default.svc.cluster.local` for `example.com`,
/// whose CNAME is followed through the forwarder.
fn fixed() -> &'static Fixed {
    static F: OnceLock<Fixed> = OnceLock::new();
    F.get_or_init(|| {
        let mut r = Records::new();
        r.set_namespace("default", true);
        r.set_service(
            &("default".into(), "ext".into()),
            Some(ServiceRec {
                kind: ServiceKind::ExternalName("example.com".into()),
                ports: Box::new([]),
                publish_not_ready: false,
            }),
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        Fixed {
            records: Arc::new(RwLock::new(r)),
            rt,
        }
    })
}

/// `len`-prefixed bytes at the front of `data`, and the rest.
fn take(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = data.split_first_chunk::<2>()?;
    let len = usize::from(u16::from_be_bytes(*len)).min(rest.len());
    Some(rest.split_at(len))
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    let Some((query, mut data)) = take(data) else {
        return;
    };
    let mut replies = Vec::new();
    while let Some((&fit, rest)) = data.split_first()
        && let Some((bytes, rest)) = take(rest)
    {
        replies.push(ScriptedReply {
            bytes: bytes.to_vec(),
            question: fit & 1 != 0,
        });
        data = rest;
    }
    let f = fixed();
    let metrics = Arc::new(Metrics::new());
    let cfg = ForwardConfig {
        upstreams: vec!["192.0.2.53:53".parse().unwrap()],
        timeout: Duration::from_secs(5),
        cache_size: 16,
        min_ttl: 0,
        max_ttl: 300,
        max_negative_ttl: 30,
    };
    let forwarder =
        Forwarder::with_upstream(cfg, metrics.clone(), Arc::new(Scripted::new(replies)));
    let h = Handler {
        records: f.records.clone(),
        zone: Zone::new("cluster.local", 5, 5).unwrap(),
        forwarder: Some(forwarder),
        metrics,
        replies: ReplyCache::new(16),
        forwarded: ReplyCache::new(16),
        ready: Arc::new(AtomicBool::new(true)),
    };
    let t = if flags & 1 != 0 {
        Transport::Tcp
    } else {
        Transport::Udp
    };
    // The second time from the cache, or the reply kept for this second.
    for _ in 0..2 {
        let Some(out) = f.rt.block_on(h.handle(query, t)) else {
            continue;
        };
        assert!(tartan_dns::handler::decodes(&out), "undecodable answer");
        assert_eq!(out[..2], query[..2], "another ID");
        assert!(out[2] & 0x80 != 0, "QR clear");
        if t == Transport::Udp {
            assert!(
                out.len() <= usize::from(MAX_UDP),
                "{} bytes over UDP",
                out.len()
            );
        }
    }
});
