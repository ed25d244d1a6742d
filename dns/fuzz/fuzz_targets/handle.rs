//! The server's request handling over arbitrary bytes, as UDP and as TCP:
//! it must not panic, and whatever it sends back must decode.
#![no_main]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, RwLock};

use libfuzzer_sys::fuzz_target;
use tartan_dns::answer::Zone;
use tartan_dns::handler::{Handler, Transport};
use tartan_dns::metrics::Metrics;
use tartan_dns::model::{Endpoint, Port, ServiceKind, ServiceRec, SliceRec};
use tartan_dns::records::Records;

fn handler() -> &'static (Handler, tokio::runtime::Runtime) {
    static H: OnceLock<(Handler, tokio::runtime::Runtime)> = OnceLock::new();
    H.get_or_init(|| {
        let mut r = Records::new();
        r.set_namespace("default", true);
        let http = vec![Port::new(Some("http"), Some("TCP"), Some(80)).unwrap()];
        r.set_service(
            &("default".into(), "web".into()),
            Some(ServiceRec {
                kind: ServiceKind::ClusterIp(Box::new(["10.96.0.80".parse().unwrap(), "fd00::80".parse().unwrap()])),
                ports: http.clone().into(),
                publish_not_ready: false,
            }),
        );
        r.set_service(
            &("default".into(), "db".into()),
            Some(ServiceRec { kind: ServiceKind::Headless, ports: http.clone().into(), publish_not_ready: false }),
        );
        r.set_service(
            &("default".into(), "ext".into()),
            Some(ServiceRec {
                kind: ServiceKind::ExternalName("example.com".into()),
                ports: Box::new([]),
                publish_not_ready: false,
            }),
        );
        let endpoints = (0..60).map(|i| Endpoint {
                addresses: vec![format!("10.244.0.{}", i + 1).parse().unwrap()],
                hostname: (i % 2 == 0).then(|| format!("db-{i}")),
                ready: i % 7 != 0,
            });
        r.set_slice(
            &("default".into(), "db-1".into()),
            Some(SliceRec::new("db", http, endpoints)),
        );
        let h = Handler {
            records: Arc::new(RwLock::new(r)),
            zone: Zone::new("cluster.local", 5, 5).unwrap(),
            forwarder: None,
            metrics: Arc::new(Metrics::new()),
            replies: tartan_dns::replies::ReplyCache::new(1024),
            forwarded: tartan_dns::replies::ReplyCache::new(1024),
            ready: Arc::new(AtomicBool::new(true)),
        };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        (h, rt)
    })
}

fuzz_target!(|data: &[u8]| {
    let (h, rt) = handler();
    for t in [Transport::Udp, Transport::Tcp] {
        if let Some(out) = rt.block_on(h.handle(data, t)) {
            assert!(hickory_ok(&out), "undecodable answer");
            if t == Transport::Udp {
                assert!(out.len() <= 4096);
                // Asked again (perhaps from the reply cache): the same.
                let again = rt.block_on(h.handle(data, t));
                assert_eq!(again.as_deref(), Some(&out[..]), "a repeat answered otherwise");
            }
        }
    }
});

fn hickory_ok(b: &[u8]) -> bool {
    tartan_dns::handler::decodes(b)
}
