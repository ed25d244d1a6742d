//! Where felix's memory goes with many Services: the service proxy's
//! pure path (decode, index, the periodic check, what a whole-table write
//! builds) under a counting allocator ([`crate::heapcount`]), stage by
//! stage. Run by `tartan-bench-heap`, which installs the allocator.

use anyhow::Result;
use tartan_api::store::typed::to_dynamic;
use tartan_felix::dataplane::services::ServiceProxy;
use tartan_felix::services::{decode, elements, render};
use tartan_nft::backend::netlink::stream::Stream;

use super::objects::{NODE, k8s_service, k8s_slice, service_key, slice_key};
use crate::heapcount::{now, peak, reset_peak};

/// One stage: bytes kept after it, and its peak, both above what was
/// allocated before it.
pub struct Stage {
    pub name: &'static str,
    pub kept: isize,
    pub peak: usize,
}

fn stage<T>(out: &mut Vec<Stage>, name: &'static str, f: impl FnOnce() -> T) -> T {
    let before = now();
    reset_peak();
    let r = f();
    out.push(Stage {
        name,
        kept: now() as isize - before as isize,
        peak: peak() - before,
    });
    r
}

/// `n` Services with `per` endpoints each, through the stages.
pub fn profile(n: usize, per: usize) -> Result<Vec<Stage>> {
    let mut out = Vec::new();
    let mut proxy = ServiceProxy::new(NODE);
    stage(
        &mut out,
        "decode Services and slices into the index",
        || {
            for i in 0..n {
                let s = to_dynamic(&k8s_service(i)?)?;
                proxy.index.set_service(&service_key(i), decode::service(s));
                let e = to_dynamic(&k8s_slice(i, per)?)?;
                proxy.index.set_slice(&slice_key(i), decode::slice(e, NODE));
            }
            anyhow::Ok(())
        },
    )?;
    stage(
        &mut out,
        "index update (every Service's part and the table)",
        || {
            proxy.index.update();
        },
    );
    stage(&mut out, "periodic check (pure part)", || {
        proxy.index.consistent()
    });
    let streamed = |first: tartan_nft::Transaction| {
        let json = first.to_json().to_string().len();
        let mut s = Stream::new(1);
        elements::write(proxy.index.table(), &mut s);
        (json, s.finish().0.len())
    };
    stage(
        &mut out,
        "whole write, no table in the kernel: skeleton JSON + element batch",
        || streamed(render::skeleton(proxy.index.table())),
    );
    stage(
        &mut out,
        "whole write over the kernel's table: in-place JSON + element batch",
        || streamed(render::in_place(proxy.index.table(), &|_| true)),
    );
    stage(
        &mut out,
        "(fallback, and before) the whole table as one nft JSON transaction",
        || {
            render::full(proxy.index.table())
                .to_json()
                .to_string()
                .len()
        },
    );
    Ok(out)
}

/// The stages as a Markdown table.
pub fn markdown(n: usize, per: usize, stages: &[Stage]) -> String {
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let mut s = format!(
        "| stage ({n} Services × {per} endpoints) | kept after (MiB) | peak above the start (MiB) |\n|---|---|---|\n"
    );
    for st in stages {
        s.push_str(&format!(
            "| {} | {:.1} | {:.1} |\n",
            st.name,
            mib(st.kept as f64),
            mib(st.peak as f64)
        ));
    }
    s
}
