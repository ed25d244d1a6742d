//! The heap the records of a large cluster take: 10,000 Services (in 50
//! namespaces), each with one EndpointSlice of 10 ready endpoints (100,000
//! endpoints), applied one object at a time as the datastore watch hands
//! them over. A counting allocator (this test binary's only) measures the
//! bytes live after the load and the most live at any moment of it, so the
//! figures do not depend on the machine or on glibc's arenas.
//!
//! Run with `--nocapture` to see the figures (bench/dns.md quotes them).

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use tartan_api::store::DynamicObject;
use tartan_dns::records::Records;
use tartan_dns::watch::{apply_namespace, apply_service, apply_slice};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only
// the sizes are counted.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

const SERVICES: usize = 10_000;
const PER: usize = 10;

fn obj(v: serde_json::Value) -> DynamicObject {
    serde_json::from_value(v).expect("a well-formed object")
}

fn ns(i: usize) -> String {
    format!("ns-{:02}", i % 50)
}

fn service(i: usize) -> DynamicObject {
    let ip = Ipv4Addr::from(0x0a60_0000 + i as u32 + 10).to_string();
    obj(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"namespace": ns(i), "name": format!("svc-{i:05}"), "resourceVersion": "7"},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}
    }))
}

fn slice(i: usize) -> DynamicObject {
    let eps: Vec<_> = (0..PER)
        .map(|j| {
            let a = Ipv4Addr::from(0x0a80_0000 + (i * PER + j) as u32 + 1);
            json!({"addresses": [a.to_string()], "nodeName": format!("node-{}", j % 10),
                   "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    obj(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"namespace": ns(i), "name": format!("svc-{i:05}-1"), "resourceVersion": "7",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i:05}")}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": eps
    }))
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// The records of 10,000 Services and 100,000 endpoints fit in a few MiB
/// of heap, and loading them one object at a time never holds much more.
#[test]
fn a_large_cluster_fits_in_a_small_heap() {
    let base = LIVE.load(Ordering::Relaxed);
    let mut r = Records::new();
    PEAK.store(base, Ordering::Relaxed);
    for n in 0..50 {
        let o = obj(json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": format!("ns-{n:02}")}}));
        apply_namespace(&mut r, &(String::new(), format!("ns-{n:02}")), Some(o));
    }
    for i in 0..SERVICES {
        apply_service(&mut r, &(ns(i), format!("svc-{i:05}")), Some(service(i)));
    }
    let services = LIVE.load(Ordering::Relaxed) - base;
    for i in 0..SERVICES {
        apply_slice(&mut r, &(ns(i), format!("svc-{i:05}-1")), Some(slice(i)));
    }
    let live = LIVE.load(Ordering::Relaxed) - base;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    assert_eq!(r.counts(), (SERVICES, SERVICES));
    let per_endpoint = (live - services) as f64 / (SERVICES * PER) as f64;
    println!(
        "records of {SERVICES} Services / {} endpoints: {:.2} MiB live ({:.2} MiB the Services and their PTR, then {per_endpoint:.0} B per endpoint), {:.2} MiB peak while loading",
        SERVICES * PER,
        mib(live),
        mib(services),
        mib(peak)
    );
    // 6.7 MiB when written; the budget leaves room, not a second copy.
    assert!(
        mib(live) < 10.0,
        "the records take {:.1} MiB of heap",
        mib(live)
    );
    assert!(
        mib(peak) < 12.0,
        "loading them held {:.1} MiB at once",
        mib(peak)
    );
}
