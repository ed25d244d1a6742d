//! The policy benchmark end to end at a tiny size (run as root): 20
//! policies over 10 pods, one run, a few connections.
use anyhow::Result;
use tartan_bench::policybench::{PolicyBenchOptions, run};

#[test]
fn policy_bench_runs_at_a_tiny_size() -> Result<()> {
    let opts = PolicyBenchOptions {
        policies: 20,
        pods: 10,
        namespaces: 4,
        local_every: 2,
        runs: 1,
        connections: 20,
        seed: 1,
    };
    let (syn, fig) = run(&opts, |_| {})?;
    assert_eq!(syn.kube + syn.tartan + syn.global, 20);
    assert_eq!(fig.full.len(), 1);
    assert_eq!(fig.change.len(), 2);
    assert_eq!(fig.relabel.len(), 2);
    assert!(fig.size.run_sets > 0 && fig.size.sets > 0);
    // The receiver's ingress walks the bench policies, and the ruleset
    // was shown to decide (the connection drops without the final rule).
    assert!(fig.path.lookups >= 1, "{:?}", fig.path);
    assert!(fig.enforced.starts_with("checked"));
    assert_eq!(fig.latency_policy.len(), 1);
    assert!(fig.latency_policy[0] > 0.0 && fig.latency_empty[0] > 0.0);
    Ok(())
}
