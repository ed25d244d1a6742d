//! The scale benchmark's Markdown: one row per cluster size, and the
//! ratios the goals are stated in.

use std::fmt::Write as _;

use super::figures::{Figures, SizeFigures};
use super::machine::share;
use super::options::ScaleBenchOptions;
use crate::bgpload::Environment;
use crate::storebench::quantile;

fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

/// The goals' ratios of the largest of the sizes measured (`ok`, in
/// order): memory against the smallest size of at least 100 nodes below
/// it (the goal's base; none when the run has no such size), CNI ADD
/// against the smallest size. `None` with fewer than two sizes.
fn ratios(ok: &[&SizeFigures]) -> Option<String> {
    let (&first, &last) = (ok.first()?, ok.last()?);
    if ok.len() < 2 {
        return None;
    }
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            f64::NAN
        } else {
            a as f64 / b as f64
        }
    };
    let q = |v: &[std::time::Duration], p| quantile(v, p).as_secs_f64();
    let memory = match ok.iter().find(|s| s.nodes >= 100 && s.nodes < last.nodes) {
        Some(base) => format!(
            "{} nodes against {}: resident memory bgpd ×{:.2}, felix ×{:.2} (goal < 2).",
            last.nodes,
            base.nodes,
            ratio(last.rss_kib[0], base.rss_kib[0]),
            ratio(last.rss_kib[1], base.rss_kib[1]),
        ),
        None => format!(
            "No size of 100 nodes or more below {} to hold its memory against.",
            last.nodes
        ),
    };
    Some(format!(
        "{memory} Against {} nodes: CNI ADD p50 ×{:.2}, p99 ×{:.2} (goal ≤ 1.5). Heartbeat CPU (with heartbeats minus without) bgpd {} and felix {} at {} nodes.",
        first.nodes,
        q(&last.adds, 0.5) / q(&first.adds, 0.5),
        q(&last.adds, 0.99) / q(&first.adds, 0.99),
        pct(last.cpu_beats[0] - last.cpu_idle[0]),
        pct(last.cpu_beats[1] - last.cpu_idle[1]),
        last.nodes,
    ))
}

/// The filesystems etcd's data was on, each named once in size order.
fn storage(f: &Figures) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for s in &f.sizes {
        if !s.etcd_storage.is_empty() && !seen.contains(&s.etcd_storage.as_str()) {
            seen.push(&s.etcd_storage);
        }
    }
    match seen.as_slice() {
        [] => "a filesystem not recorded".to_string(),
        [one] => format!("`{one}`"),
        many => format!(
            "{} (by size)",
            many.iter()
                .map(|t| format!("`{t}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub fn render_markdown(env: &Environment, o: &ScaleBenchOptions, f: &Figures) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# Scale: one node's cost as the cluster grows\n\n{}",
        env.render()
    );
    let _ = writeln!(
        md,
        "One real node ({} `tartan-bgpd` and `tartan-felix` with their default settings, in a network namespace) in an etcd datastore populated as an N-node cluster: N Nodes, each but the real one with a /26 block and its BlockAffinity and {} pods as WorkloadEndpoints; every Node's status posted again every {} s as kubelets do (spread evenly over the interval, {} writers), each post one etcd transaction from the value last written, as a kube-apiserver makes it from its watch cache (each writer reads its Nodes once when it starts; the table gives etcd's reads in the heartbeat window, the agents' own included, per Node update). The route-reflector topology: no node mesh, and the real node peering over iBGP with two simulated reflectors (the project's BGP generator), each carrying every other node's block (ORIGINATOR_ID the node, CLUSTER_LIST the reflector; the same NEXT_HOP from both, an address on the node's link, so that the kernel can install the route). {}{}{}\n",
        if cfg!(debug_assertions) {
            "debug-build"
        } else {
            "release"
        },
        o.pods_per_node,
        o.heartbeat.as_secs_f64(),
        4,
        if o.services > 0 {
            format!(
                "{} Services with {} endpoints each. ",
                o.services, o.endpoints
            )
        } else {
            String::new()
        },
        if o.policies > 0 {
            format!("{} NetworkPolicies over the real node's pods. ", o.policies)
        } else {
            String::new()
        },
        if o.local_pods > 1 {
            format!(
                "{} pods wired on the real node by the CNI plugin. ",
                o.local_pods
            )
        } else {
            String::new()
        },
    );
    let _ = writeln!(
        md,
        "CPU is the agents' CPU time (their own and their waited-for children's, `nft` for felix) from /proc over {:.0} s windows, as a share of one core: first with nothing changing, then with the heartbeats. Convergence: a reflector's UPDATE for a new block handed to TCP until `ip monitor route` in the node shows the route ({} blocks, one at a time, heartbeats running). CNI ADD: the `tartan` plugin on the real node, {} ADDs one at a time (each followed by its DEL), heartbeats running; CPU per ADD is the CPU time bgpd, felix and etcd spent while they ran, heartbeats included, divided by their number; beside it the whole machine's cores over the same time: the busy share of all of them (/proc/stat) and the share of the time in which some runnable task waited for one (`some` of /proc/pressure/cpu). Datastore round trips: after the ADDs, heartbeats running, for 10 s, a read of a small object and a compare-and-swap write of another by turns every 10 ms over a connection of their own; an ADD makes several in a row (from a new process), so its tail holds theirs further out than their p99. etcd keeps its data on {} (under the temporary directory, `TMPDIR` if set): a write waits for its fsync there. Memory: `VmRSS` (and `VmHWM`, the peak) at the end.\n",
        o.window.as_secs_f64(),
        o.new_blocks,
        o.adds,
        storage(f),
    );
    let _ = writeln!(
        md,
        "| nodes | pods (endpoints) | store written | routes in | bgpd CPU idle → heartbeats | felix CPU idle → heartbeats | Node updates/s (etcd reads each) | new block p50 / p99 | CNI ADD p50 / p99 | datastore read, write p50 / p99 | CPU per ADD: bgpd / felix / etcd | machine during ADDs: cores busy / some task waiting | bgpd RSS (peak) | felix RSS (peak) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for s in &f.sizes {
        if let Some(e) = &s.error {
            let _ = writeln!(
                md,
                "| {} | {} | not measured: {} ||||||||||||",
                s.nodes,
                s.workloads,
                e.lines().next().unwrap_or_default()
            );
            continue;
        }
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} s | {:.1} s | {} → {} | {} → {} | {:.0} ({:.2}) | {} / {} | {} / {} | {} / {}, {} / {} | {:.1} / {:.1} / {:.1} ms | {} / {} | {} ({}) | {} ({}) |",
            s.nodes,
            s.workloads,
            s.populate.as_secs_f64(),
            s.routes_in.as_secs_f64(),
            pct(s.cpu_idle[0]),
            pct(s.cpu_beats[0]),
            pct(s.cpu_idle[1]),
            pct(s.cpu_beats[1]),
            s.beat_rate,
            s.beat_reads,
            ms(quantile(&s.convergence, 0.5)),
            ms(quantile(&s.convergence, 0.99)),
            ms(quantile(&s.adds, 0.5)),
            ms(quantile(&s.adds, 0.99)),
            ms(quantile(&s.store_reads, 0.5)),
            ms(quantile(&s.store_reads, 0.99)),
            ms(quantile(&s.store_writes, 0.5)),
            ms(quantile(&s.store_writes, 0.99)),
            s.add_cpu[0] * 1e3,
            s.add_cpu[1] * 1e3,
            s.add_cpu[2] * 1e3,
            share(s.add_machine.busy),
            share(s.add_machine.waited),
            mib(s.rss_kib[0]),
            mib(s.hwm_kib[0]),
            mib(s.rss_kib[1]),
            mib(s.hwm_kib[1]),
        );
    }
    let ok: Vec<&SizeFigures> = f.sizes.iter().filter(|s| s.error.is_none()).collect();
    if let Some(r) = ratios(&ok) {
        let _ = writeln!(md, "\n{r}");
    }
    for s in &f.sizes {
        if s.never_quiet {
            let _ = writeln!(
                md,
                "\nAt {} nodes the agents together never fell below 2 % of a core with nothing changing (300 s after their start): the idle column is their steady cost.",
                s.nodes
            );
        }
        if s.store_failures > 0 {
            let _ = writeln!(
                md,
                "\nAt {} nodes {} of the timed datastore round trips failed (left out of the figure).",
                s.nodes, s.store_failures
            );
        }
        if s.beat_failures > 0 {
            let _ = writeln!(
                md,
                "\nAt {} nodes {} heartbeat writes failed (conflicts with the agents' own writes are read again and retried on the next beat).",
                s.nodes, s.beat_failures
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::{Figures, SizeFigures, ratios, storage};
    use std::time::Duration;

    fn on(fs: &[&str]) -> Figures {
        Figures {
            sizes: fs
                .iter()
                .map(|t| SizeFigures {
                    etcd_storage: t.to_string(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn the_report_names_each_filesystem_etcd_was_on_once() {
        assert_eq!(storage(&on(&["tmpfs", "tmpfs"])), "`tmpfs`");
        assert_eq!(
            storage(&on(&["ext4", "tmpfs", "ext4"])),
            "`ext4`, `tmpfs` (by size)"
        );
        assert_eq!(storage(&on(&[""])), "a filesystem not recorded");
    }

    fn size(nodes: usize, rss: u64, add_ms: u64) -> SizeFigures {
        SizeFigures {
            nodes,
            rss_kib: [rss, 2 * rss],
            adds: vec![Duration::from_millis(add_ms); 10],
            ..Default::default()
        }
    }

    #[test]
    fn memory_is_held_against_a_smaller_size_of_at_least_100_nodes() {
        let (a, b, c) = (size(3, 10, 10), size(100, 100, 12), size(5000, 150, 15));
        let r = ratios(&[&a, &b, &c]).unwrap();
        assert!(
            r.starts_with("5000 nodes against 100: resident memory bgpd ×1.50, felix ×1.50"),
            "{r}"
        );
        assert!(
            r.contains("Against 3 nodes: CNI ADD p50 ×1.50, p99 ×1.50"),
            "{r}"
        );
        // A quick run (3 and 5,000 nodes) has no base for memory: it does
        // not hold the largest size against itself.
        let r = ratios(&[&a, &c]).unwrap();
        assert!(
            r.starts_with("No size of 100 nodes or more below 5000"),
            "{r}"
        );
        assert!(!r.contains("×1.00"), "{r}");
        assert_eq!(ratios(&[&c]), None);
    }
}
