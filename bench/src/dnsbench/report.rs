//! The DNS benchmark's results as Markdown.

use std::fmt::Write as _;

use crate::benchkit::median_f;

use super::model::{DnsBenchOptions, DnsBenchResult, NAMESPACES, Run, SERVERS, SETS};

fn col(runs: &[Run], f: impl Fn(&Run) -> f64) -> f64 {
    median_f(&runs.iter().map(f).collect::<Vec<_>>())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub fn render_markdown(env: &str, o: &DnsBenchOptions, r: &DnsBenchResult) -> String {
    let mut m = String::from("# Cluster DNS: tartan-dns beside dnsmasq and unbound\n\n");
    m.push_str(env);
    let _ = writeln!(
        m,
        "\n{} Services (ClusterIP, in {NAMESPACES} namespaces) with {} ready endpoints each ({} endpoints), written to etcd in {:.1} s; tartan-dns had them all {:.1} s after it started. dnsmasq holds the same names in a hosts file (`--addn-hosts`, `--cache-size=10000`), unbound as `local-data` (one thread, iterator only). {} external names come from one more dnsmasq, the upstream of all three, and were asked once before measuring (answered from cache). Versions: {}.\n",
        o.services,
        o.endpoints,
        o.services * o.endpoints,
        r.fill.as_secs_f64(),
        r.load.as_secs_f64(),
        o.external,
        r.versions
            .iter()
            .map(|(k, v)| format!("{k} `{v}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        m,
        "Each cell: the median of {} rounds. *q/s*: `dnsperf -l {} -c {} -q 100` (flat out; dnsperf shares the 2 cores with the server). *p50*, *p99*: every answer's latency in a run paced at {} q/s (`-Q {} -v`). *vs dnsmasq*: tartan-dns's q/s over dnsmasq's.\n",
        o.runs, o.seconds, o.clients, o.latency_qps, o.latency_qps
    );
    for set in SETS {
        let _ = writeln!(
            m,
            "## {} names\n\n| server | q/s | p50 | p99 | answered |\n|---|---|---|---|---|",
            if set == "cluster" {
                "Cluster"
            } else {
                "Cached external"
            }
        );
        for s in SERVERS {
            let Some(runs) = r.runs.get(&(s.to_string(), set.to_string())) else {
                continue;
            };
            let _ = writeln!(
                m,
                "| {s} | {:.0} | {:.0} µs | {:.0} µs | {:.1} % |",
                col(runs, |x| x.qps),
                col(runs, |x| x.p50_us),
                col(runs, |x| x.p99_us),
                col(runs, |x| x.answered) * 100.0
            );
        }
        let q = |s: &str| {
            r.runs
                .get(&(s.to_string(), set.to_string()))
                .map_or(0.0, |v| col(v, |x| x.qps))
        };
        if q("dnsmasq") > 0.0 {
            let _ = writeln!(
                m,
                "\ntartan-dns vs dnsmasq: {:.2}× the queries per second.\n",
                q("tartan-dns") / q("dnsmasq")
            );
        }
    }
    let _ = writeln!(
        m,
        "## Memory\n\n| | resident |\n|---|---|\n| tartan-dns, loaded, before any query | {} |\n| tartan-dns, after the runs | {} |\n| tartan-dns, peak | {} |\n| dnsmasq, after the runs | {} |\n| unbound, after the runs | {} |\n\nGoal: under 64 MiB with 10,000 Services and 100,000 endpoints.",
        mib(r.tartan_loaded_kib),
        mib(r.tartan_after_kib),
        mib(r.tartan_peak_kib),
        mib(r.dnsmasq_after_kib),
        mib(r.unbound_after_kib)
    );
    m
}
