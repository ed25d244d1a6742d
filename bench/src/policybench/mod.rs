//! Policy benchmark (issue 6, point 5): a synthetic cluster of pods,
//! namespaces and policies (Kubernetes NetworkPolicies, Tartan
//! NetworkPolicies and GlobalNetworkPolicies), compiled by felix's
//! calculation (`calc::policy::desired`) and written by felix's driver
//! (`PolicyDriver`, the `nft` binary) in a fresh network namespace:
//! - full sync: compile + first whole-table write;
//! - one policy changed: compile + difference write;
//! - one pod relabelled into another profile: compile + difference write;
//! - the periodic drift check (`apply(…, check = true)` with nothing to do);
//! - TCP connect + first byte between two pods behind the node, the
//!   receiver's ingress walking the ruleset's policy chains to the last
//!   rule of the last one, beside the same pods with no policy at all.
//!
//! The cluster is generated from a seed: the same options give the same
//! objects. Only IPv4 pod addresses.

mod figures;
mod generate;
mod latency;
mod model;
mod options;
mod policies;
mod report;
mod sync;

use std::time::Instant;

use anyhow::Result;
use tartan_felix::calc::policy::desired;

use crate::benchkit::in_ns;
pub use figures::{Figures, Path, Size, Step};
pub use generate::generate;
use latency::*;
pub use model::{BENCH_NS, PodInfo, Synthetic};
pub use options::PolicyBenchOptions;
pub use report::render_markdown;
use sync::*;
use tartan_lab::netns::Netns;

pub fn run(o: &PolicyBenchOptions, mut log: impl FnMut(&str)) -> Result<(Synthetic, Figures)> {
    let t = Instant::now();
    let mut syn = generate(o)?;
    log(&format!(
        "generated {} namespaces, {} pods ({} local), {} + {} + {} policies in {:?}",
        syn.namespaces,
        syn.pods,
        syn.local_pods,
        syn.kube,
        syn.tartan,
        syn.global,
        t.elapsed()
    ));
    let mut fig = Figures {
        size: size_of(&desired(&syn.node, &syn.state)),
        ..Default::default()
    };
    let node = Netns::new("tpbn")?;
    sync_runs(&node, &mut syn, o, &mut fig, &mut log)?;
    if o.connections > 0 {
        latency(&node, &syn, o, &mut fig, &mut log)?;
    }
    in_ns(&node, || {
        delete_table();
        Ok(())
    })?;
    Ok((syn, fig))
}
