//! CNI benchmark: ADD and DEL latency one call at a time, and the wall
//! time of many ADDs at once on one node, for `tartan` (etcd-backed IPAM)
//! and, side by side in the same run, Debian's `ptp` with `host-local`
//! IPAM (a veth and a /32 like Tartan's, with addresses kept in local
//! files). The plugins are started from a thread inside the node's
//! namespace, as a runtime on that node would start them.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::bgpload::Environment;
use crate::storebench::quantile;
use tartan_lab::cni::{Call, Runtime};
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::Netns;

pub struct CniBenchOptions {
    /// Sequential ADD+DEL pairs timed per plugin.
    pub sequential: usize,
    /// ADDs started at once.
    pub parallel: usize,
    /// Repetitions of the parallel run (median reported).
    pub parallel_runs: usize,
}

#[derive(Debug, Default)]
pub struct PluginFigures {
    pub name: String,
    pub add: Vec<Duration>,
    pub del: Vec<Duration>,
    pub parallel: Vec<Duration>,
}

/// Run `f` on a thread that has entered `ns`.
fn in_netns<T: Send>(ns: &Netns, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter_current_thread()?;
            f()
        })
        .join()
        .map_err(|_| anyhow::anyhow!("benchmark thread panicked"))?
    })
}

fn measure(
    lab: &CniLab,
    name: &str,
    conflist: Value,
    o: &CniBenchOptions,
    log: &mut impl FnMut(&str),
) -> Result<PluginFigures> {
    let node = &lab.underlay.node(0).netns;
    let rt = Runtime::new(conflist);
    let mut fig = PluginFigures {
        name: name.to_string(),
        ..Default::default()
    };
    // Sequential: pods made first, not timed.
    let pods: Vec<(Netns, Call)> = (0..o.sequential)
        .map(|k| lab.pod("bench", &format!("s{k}")))
        .collect::<Result<_>>()?;
    let (add, del) = in_netns(node, || {
        let mut add = Vec::new();
        let mut del = Vec::new();
        for (_, call) in &pods {
            let t = Instant::now();
            let r = rt.add(call)?;
            add.push(t.elapsed());
            let t = Instant::now();
            rt.del(call, Some(&r))?;
            del.push(t.elapsed());
        }
        Ok((add, del))
    })?;
    drop(pods);
    fig.add = add;
    fig.del = del;
    log(&format!(
        "{name}: sequential ADD p50 {:?}, DEL p50 {:?}",
        quantile(&fig.add, 0.5),
        quantile(&fig.del, 0.5)
    ));
    for run in 0..o.parallel_runs {
        let pods: Vec<(Netns, Call)> = (0..o.parallel)
            .map(|k| lab.pod("bench", &format!("p{run}-{k}")))
            .collect::<Result<_>>()?;
        let (wall, results) = in_netns(node, || {
            let t = Instant::now();
            let results: Vec<Result<Value>> = std::thread::scope(|s| {
                let hs: Vec<_> = pods
                    .iter()
                    .map(|(_, call)| {
                        let rt = &rt;
                        s.spawn(move || {
                            // Children inherit this thread's namespace.
                            rt.add(call)
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Err(anyhow::anyhow!("panicked")))
                    })
                    .collect()
            });
            Ok((t.elapsed(), results))
        })?;
        let ok: Vec<Value> = results.into_iter().collect::<Result<_>>()?;
        in_netns(node, || {
            for ((_, call), r) in pods.iter().zip(&ok) {
                rt.del(call, Some(r))?;
            }
            Ok(())
        })?;
        log(&format!("{name}: {} ADDs at once: {wall:?}", o.parallel));
        fig.parallel.push(wall);
    }
    Ok(fig)
}

pub fn run(o: &CniBenchOptions, mut log: impl FnMut(&str)) -> Result<Vec<PluginFigures>> {
    let lab = CniLab::new(1)?;
    lab.add_pool("bench", "10.120.0.0/16", None)?;
    let mut out = Vec::new();
    // A cool-down of 0 so that the sequential pairs reuse addresses as a
    // busy node would; the default (10 s) would only spread them.
    let tartan = CniLab::conflist(
        "1.0.0",
        vec![{
            let mut e = lab.tartan_entry(0, json!({}));
            e["logLevel"] = json!("info");
            e
        }],
    );
    out.push(measure(&lab, "tartan (etcd IPAM)", tartan, o, &mut log)?);
    let data = lab.dir.join("host-local");
    std::fs::create_dir_all(&data).context("host-local data dir")?;
    let ptp = CniLab::conflist(
        "1.0.0",
        vec![json!({
            "type": "ptp",
            "ipam": {"type": "host-local", "subnet": "10.121.0.0/16", "dataDir": data.display().to_string()}
        })],
    );
    out.push(measure(
        &lab,
        "ptp + host-local (reference)",
        ptp,
        o,
        &mut log,
    )?);
    Ok(out)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub fn render_markdown(env: &Environment, o: &CniBenchOptions, figs: &[PluginFigures]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# CNI benchmark\n");
    let _ = writeln!(md, "{}", env.render());
    let _ = writeln!(
        md,
        "One node namespace; plugins started from a thread inside it (no `ip netns exec`). \
         {} sequential ADD+DEL pairs per plugin; {} ADDs at once, {} runs (median).\n",
        o.sequential, o.parallel, o.parallel_runs
    );
    let _ = writeln!(
        md,
        "| plugin | ADD p50 | ADD p99 | DEL p50 | DEL p99 | {} ADDs at once (median) |",
        o.parallel
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for f in figs {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            f.name,
            ms(quantile(&f.add, 0.5)),
            ms(quantile(&f.add, 0.99)),
            ms(quantile(&f.del, 0.5)),
            ms(quantile(&f.del, 0.99)),
            ms(quantile(&f.parallel, 0.5)),
        );
    }
    if let [t, r, ..] = figs {
        let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
        let _ = writeln!(
            md,
            "\nRatio tartan / reference: ADD p50 {:.2}x, parallel {:.2}x.",
            ratio(quantile(&t.add, 0.5), quantile(&r.add, 0.5)),
            ratio(quantile(&t.parallel, 0.5), quantile(&r.parallel, 0.5)),
        );
    }
    let _ = writeln!(
        md,
        "\nGoals (issue 4): ADD p50 under 10 ms; 100 parallel ADDs under 2 s."
    );
    md
}
