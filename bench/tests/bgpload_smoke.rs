//! The BGP benchmark's generator end to end (run as root): 2 injectors ×
//! 1,000 prefixes through BIRD into the sink.
use anyhow::Result;
use std::collections::HashMap;
use std::time::Duration;
use tartan_bench::bgpload::{BenchOptions, DeviceKind, Topology, run_device_once};

#[test]
fn two_injectors_through_bird_reach_the_sink() -> Result<()> {
    let opts = BenchOptions {
        peers: 2,
        prefixes: 1000,
        runs: 1,
        runs_per_device: HashMap::new(),
        devices: vec![DeviceKind::Bird],
        per_update: 1000,
        timeout: Duration::from_secs(20),
        settle: Duration::from_millis(200),
        hold_time: 180,
    };
    let topo = Topology::new(opts.peers)?;
    let run = run_device_once(&topo, DeviceKind::Bird, &opts)?;
    assert!(
        run.wall.is_some(),
        "the sink never held everything: {run:?}"
    );
    assert_eq!(run.held, 2000);
    assert_eq!(run.sent_back, 0, "BIRD exports nothing to the injectors");
    assert!(run.peak_rss > 0);
    Ok(())
}
