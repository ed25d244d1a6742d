//! The scale benchmark end to end at a tiny size (run as root): a
//! 12-node cluster with a few pods each, one Service and one policy on the
//! real node, short windows.
use anyhow::Result;
use std::time::Duration;
use tartan_bench::scalebench::{ScaleBenchOptions, run};

#[test]
fn scale_bench_runs_at_a_tiny_size() -> Result<()> {
    let opts = ScaleBenchOptions {
        sizes: vec![12],
        pods_per_node: 3,
        heartbeat: Duration::from_secs(1),
        window: Duration::from_secs(2),
        adds: 3,
        new_blocks: 3,
        services: 1,
        endpoints: 2,
        policies: 1,
        local_pods: 2,
    };
    let fig = run(&opts, |l| eprintln!("{l}"))?;
    let s = &fig.sizes[0];
    assert_eq!(s.error, None);
    assert_eq!((s.nodes, s.workloads), (12, 33));
    // The kubelets post: 12 Nodes a second (a loaded machine may lag).
    assert!(s.beat_rate > 3.0, "{s:?}");
    assert_eq!((s.convergence.len(), s.adds.len(), s.dels.len()), (3, 3, 3));
    assert_eq!(s.add_starts.len(), 3);
    // The datastore's round trips were timed, each answered.
    assert!(
        !s.store_reads.is_empty() && !s.store_writes.is_empty() && s.store_failures == 0,
        "{s:?}"
    );
    assert!(s.rss_kib.iter().all(|k| *k > 0), "{s:?}");
    Ok(())
}
