//! The services benchmark end to end at a tiny size (run as root): 10
//! Services, one run, a few connections, tartan-felix with 10 Services.
use anyhow::Result;
use tartan_bench::servicebench::{ServiceBenchOptions, run};

#[test]
fn service_bench_runs_at_a_tiny_size() -> Result<()> {
    let opts = ServiceBenchOptions {
        sizes: vec![10],
        endpoints: 10,
        runs: 1,
        connections: 20,
        latency_sizes: [2, 10],
        felix_services: 10,
        felix_settle: std::time::Duration::from_millis(500),
    };
    let fig = run(&opts, |_| {})?;
    let s = &fig.sizes[0];
    assert_eq!(s.services, 10);
    assert_eq!((s.full.len(), s.replace.len()), (1, 2));
    assert_eq!((s.add.len(), s.remove.len(), s.check.len()), (1, 1, 1));
    // 10 frontends, 100 slots in two maps; no local pods in the sync runs.
    assert_eq!(s.elements, 10 + 2 * 100);
    assert!(s.replace.iter().all(|c| c.bytes > 0 && c.bytes < 5_000));
    assert_eq!(s.floor.len(), 3);
    assert!(fig.enforced.starts_with("checked"), "{}", fig.enforced);
    // 200 connections through the Service reach more than one endpoint.
    assert!(fig.spread.len() > 1, "{:?}", fig.spread);
    assert_eq!(fig.svc_small.len(), 1);
    assert!(fig.svc_small[0] > 0.0 && fig.svc_large[0] > 0.0);
    let felix = fig.felix.expect("felix measured");
    assert!(felix.rss_kib > 0 && felix.baseline_rss_kib > 0);
    Ok(())
}
