//! Services benchmark (issue 7, point 8): synthetic ClusterIP Services
//! (TCP 80 → 8080, ten ready endpoints each, spread over nine other
//! nodes) fed to felix's service proxy (`ServiceProxy`, its per-Service
//! index and the `nft` binary) in a fresh network namespace:
//! - full sync at each size: index update + the first whole-table write;
//! - one endpoint replaced (and back), one added and one removed, in the
//!   middle Service: index (pure), patch (pure) and nft apart;
//! - the periodic check (`sync(true)` with nothing changed);
//! - fresh TCP connections to a Service's ClusterIP from a pod behind the
//!   node, the table holding 10 Services or 10,000 (the measured one
//!   among them), back to back;
//! - the resident memory of the real `tartan-felix` holding 10,000
//!   Services and their slices from etcd.
//!
//! Everything is generated from the Service's index: the same options
//! give the same objects. IPv4 only.

mod felix;
mod figures;
pub mod heap;
mod latency;
mod objects;
mod options;
mod report;
mod sync;

use anyhow::{Result, bail};

use crate::benchkit::status_kib;
use felix::*;
pub use figures::{FelixFigures, Figures, SizeFigures, Step};
use latency::*;
pub use objects::{Item, NODE, k8s_service, k8s_slice, service_key, synthetic};
pub use options::ServiceBenchOptions;
pub use report::render_markdown;
use sync::*;
use tartan_lab::netns::Netns;

pub fn run(o: &ServiceBenchOptions, mut log: impl FnMut(&str)) -> Result<Figures> {
    if o.endpoints == 0 || o.sizes.iter().any(|n| *n < 1) {
        bail!("at least one Service and one endpoint");
    }
    let mut fig = Figures::default();
    let node = Netns::new("tsbn")?;
    for &n in &o.sizes {
        let f = size_runs(&node, n, o, &mut log)?;
        fig.sizes.push(f);
    }
    if o.connections > 0 {
        latency(&node, o, &mut fig, &mut log)?;
    }
    fig.bench_rss_kib = status_kib("self", "VmHWM").unwrap_or(0);
    if o.felix_services > 0 {
        match felix_rss(o, &mut log) {
            Ok(f) => fig.felix = Some(f),
            Err(e) => {
                log(&format!("felix's memory not measured: {e:#}"));
                fig.felix_error = Some(format!("{e:#}"));
            }
        }
    }
    Ok(fig)
}
