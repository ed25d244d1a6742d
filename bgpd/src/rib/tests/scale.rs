//! The benchmark's load through the public API: 10 eBGP peers × 100,000
//! IPv4 /24s, 1,000 per UPDATE, one attribute set per peer, all passed to
//! one sink. Run: cargo test -p tartan-bgpd --release rib::tests::scale
//! -- --ignored --nocapture

use super::*;
use std::time::Instant;

fn vm_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
#[ignore]
fn ten_peers_hundred_thousand_each() {
    const PEERS: u32 = 10;
    const PER_PEER: u32 = 100_000;
    const SINK: PeerId = 99;
    let rss0 = vm_kib("VmRSS:").unwrap_or(0);
    let mut rib = rib();
    for p in 1..=PEERS {
        rib.peer_up(ebgp(p));
        rib.set_export(p, false);
    }
    rib.peer_up(peer(SINK, 64999));

    // Prefixes built up front so that only the RIB is timed.
    let batches: Vec<(PeerId, Vec<IpNet>)> = (1..=PEERS)
        .flat_map(|p| {
            (0..PER_PEER / 1000).map(move |b| {
                let prefixes = (0..1000)
                    .map(|k| {
                        let n = (p - 1) * PER_PEER + b * 1000 + k;
                        let a = Ipv4Addr::from((1u32 << 24) + (n << 8));
                        IpNet::V4(ipnet::Ipv4Net::new_assert(a, 24))
                    })
                    .collect();
                (p, prefixes)
            })
        })
        .collect();
    // Interleave the peers' UPDATEs, as the sessions would.
    let mut order: Vec<usize> = (0..batches.len()).collect();
    order.sort_by_key(|&i| (i % 100, i / 100));

    let t0 = Instant::now();
    let mut kernel = 0;
    for &i in &order {
        let (p, prefixes) = &batches[i];
        let c = rib
            .announce(*p, attrs(&[65000 + p], [192, 0, 2, *p as u8]), prefixes)
            .expect("announce");
        kernel += c.kernel.len();
    }
    let t_in = t0.elapsed();
    let heap_in = rib.heap_bytes();
    let pending = rib.pending(SINK);
    let t1 = Instant::now();
    let (mut out, mut updates) = (0usize, 0usize);
    while let Some(b) = rib.take_output(SINK, 1000) {
        if let OutBatch::Announce { prefixes, .. } = &b {
            out += prefixes.len();
        }
        updates += 1;
    }
    let t_out = t1.elapsed();
    let paths = (PEERS * PER_PEER) as f64;
    let hwm = vm_kib("VmHWM:").unwrap_or(0);
    let rss = vm_kib("VmRSS:").unwrap_or(0);
    println!(
        "insert: {:.1} ns/prefix ({:.3} s); drain to sink: {:.1} ns/prefix ({:.3} s, {updates} batches)",
        t_in.as_nanos() as f64 / paths,
        t_in.as_secs_f64(),
        t_out.as_nanos() as f64 / paths,
        t_out.as_secs_f64()
    );
    println!(
        "RIB heap after insert (sink queue full): {:.1} bytes/path; after drain: {:.1} bytes/path",
        heap_in as f64 / paths,
        rib.heap_bytes() as f64 / paths
    );
    println!(
        "process RSS grew {:.1} MiB ({:.1} bytes/path); peak RSS {:.1} MiB",
        (rss.saturating_sub(rss0)) as f64 / 1024.0,
        (rss.saturating_sub(rss0) * 1024) as f64 / paths,
        hwm as f64 / 1024.0
    );
    assert_eq!(kernel, (PEERS * PER_PEER) as usize);
    assert_eq!(pending, (PEERS * PER_PEER) as usize);
    assert_eq!(out, (PEERS * PER_PEER) as usize);
    assert_eq!(rib.counts(SINK).advertised, u64::from(PEERS * PER_PEER));
    assert_eq!(rib.attr_set_count(), PEERS as usize);
    drop(batches);
}
