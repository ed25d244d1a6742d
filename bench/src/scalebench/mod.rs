//! Scale benchmark (issue 22): one real node (tartan-bgpd and
//! tartan-felix in a namespace) in a datastore populated as an N-node
//! cluster — N Nodes whose kubelets post their status every interval, a
//! block and its affinity per node, pods per node as WorkloadEndpoints —
//! peering with two simulated route reflectors that carry every node's
//! block. Per size: the agents' CPU without and with the heartbeats,
//! their memory, a new block's convergence from the reflector's UPDATE
//! to the kernel, and CNI ADD latency on the real node. With
//! `--services`, `--policies` and `--local-pods` the same node also
//! carries Services, NetworkPolicies and pods wired by the CNI plugin
//! (all of one node's agents together).

mod figures;
mod machine;
mod objects;
mod options;
mod probe;
mod reflector;
mod report;
mod sample;
mod size;
mod writer;

pub use figures::{Figures, SizeFigures};
pub use options::ScaleBenchOptions;
pub use report::render_markdown;

use anyhow::{Result, bail};

pub fn run(o: &ScaleBenchOptions, mut log: impl FnMut(&str)) -> Result<Figures> {
    if o.sizes.is_empty() || o.sizes.iter().any(|n| *n < 1) {
        bail!("every size needs at least the real node");
    }
    let mut figs = Figures::default();
    for &n in &o.sizes {
        let mut f = figures::SizeFigures {
            nodes: n,
            ..Default::default()
        };
        if let Err(e) = size::measure(n, o, &mut f, &mut log) {
            log(&format!("{n} nodes: stopped: {e:#}"));
            f.error = Some(format!("{e:#}"));
        }
        figs.sizes.push(f);
    }
    Ok(figs)
}
