//! The Services benchmark's Markdown results.

use std::fmt::Write as _;
use std::time::Duration;

use tartan_felix::services::render::TABLE;

use super::figures::*;
use super::objects::*;
use super::options::*;
use crate::benchkit::{median_f, ms, paired_ratio};
use crate::bgpload::Environment;
use crate::storebench::quantile;

pub(super) fn row(md: &mut String, n: usize, what: &str, steps: &[Step], goal: &str) {
    let pick = |f: fn(&Step) -> Duration| -> Vec<Duration> { steps.iter().map(f).collect() };
    let total = pick(Step::total);
    let bytes = {
        let mut b: Vec<usize> = steps.iter().map(|s| s.bytes).collect();
        b.sort();
        b.get(b.len() / 2).copied().unwrap_or(0)
    };
    let _ = writeln!(
        md,
        "| {n} | {what} | {} | {} | {} | {} | {} | **{}** | {} | {} | {goal} |",
        steps.len(),
        human_bytes(bytes),
        ms(quantile(&pick(|s| s.index), 0.5)),
        ms(quantile(&pick(|s| s.render), 0.5)),
        ms(quantile(&pick(|s| s.nft), 0.5)),
        ms(quantile(&total, 0.5)),
        ms(quantile(&total, 0.9)),
        ms(quantile(&total, 1.0)),
    );
}

pub(super) fn human_bytes(b: usize) -> String {
    if b >= 1_000_000 {
        format!("{:.1} MB", b as f64 / 1e6)
    } else if b >= 1_000 {
        format!("{:.1} kB", b as f64 / 1e3)
    } else {
        format!("{b} B")
    }
}

pub(super) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

pub fn render_markdown(env: &Environment, o: &ServiceBenchOptions, f: &Figures) -> String {
    let mut md = String::from(
        "# Services benchmark: full sync, endpoint changes, drift check, connection latency, felix memory\n\n",
    );
    md.push_str(&env.render());
    let per = o.endpoints;
    let _ = writeln!(
        md,
        "\n## The Services\n\nGenerated (`bench/src/servicebench/`): ClusterIP Services in 50 namespaces, ClusterIP 10.97.0.0 + i + 1, one port `http` TCP {SERVICE_PORT} → {TARGET_PORT}, one EndpointSlice each with {per} ready endpoints (10.128.0.0/16 …), spread over nodes `node-2` … `node-10`; the benchmarked node is `{NODE}`. They are fed as `ServiceInfo` / `SliceInfo` to felix's `dataplane::services::ServiceProxy` (its per-Service index `services::index::ServiceIndex`, JSON to the `nft` binary on stdin) in a fresh network namespace; the table is `ip {TABLE}`.\n"
    );
    let _ = writeln!(
        md,
        "## Full sync, one endpoint change, the periodic check\n\n{} runs per size. Each run deletes the table, makes a new proxy and times: the **full sync** (every Service and slice into the index, `update`, then `sync(false)`: the whole table in one transaction); then in the middle Service's slice **one endpoint replaced** (its 6th address becomes 10.200.0.2) and replaced back (2 samples per run); **one endpoint added** (an 11th) and **removed** again. A change goes through the proxy's own calls, as `sync(false)` makes them once the table is written: *index* is `set_slice` + `update` (pure), *render* `take_patch` + serialisation (pure), *nft* the proxy's writer applying it (a change of elements only goes to the kernel over netlink; anything else through the `nft` process). The **full sync** writes a table the kernel does not have: `nft` makes chains, rules and set declarations, then every element goes over netlink in one transaction. The **rebuild over the table** is a second, new proxy writing the whole table while the first one's is in the kernel (a felix restart, or a rebuild after a refused change): `nft` rewrites the chains and rules in place (`render::in_place`), leaving the elements serving, then one netlink transaction empties and refills every element map, so Services are served throughout. *render* is what the write rendered, timed apart after it (pure): the skeleton's (or the in-place) JSON and the elements encoded for netlink (`render::skeleton` or `render::in_place`, `elements::write`; *JSON* is the JSON's size alone); *nft* is the write minus it. Percentiles over all samples.\n",
        o.runs
    );
    let _ = writeln!(
        md,
        "| Services | operation | samples | JSON | index (median) | render (median) | nft (median) | total (median) | p90 | max | goal |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for s in &f.sizes {
        let big = s.services >= 1000;
        row(
            &mut md,
            s.services,
            "full sync",
            &s.full,
            if s.services >= 10_000 { "< 1 s" } else { "" },
        );
        row(
            &mut md,
            s.services,
            "rebuild over the table",
            &s.rebuild,
            "",
        );
        let g = if big { "< 10 ms" } else { "" };
        row(&mut md, s.services, "one endpoint replaced", &s.replace, g);
        row(&mut md, s.services, "one endpoint added", &s.add, g);
        row(&mut md, s.services, "one endpoint removed", &s.remove, g);
    }
    let _ = writeln!(
        md,
        "\nThe table per size (map elements: `frontends` + `fe_addr` + `fe_port` + `hairpin`), the periodic check (`sync(true)` with nothing changed: the kept table against one recomputed from every Service, then `nft -t -j list table` compared by chain, rule and set counts), its pure part (`index.recomputed()` and the comparison), `nft -t -j list ruleset ip` (the same chains, rules and sets without their elements, which the check's `nft -t -j list table` fetches from the kernel all the same on nft 1.0.6), the *nft floor* (a transaction that changes nothing, `add table ip tartan-svc` through `nft::run`, 3 per run: what any write costs with this table in the kernel), and the peak RSS of the largest `nft` child so far:\n"
    );
    let _ = writeln!(
        md,
        "| Services | map elements | check (median) | check max | of it pure (median) | `nft -t -j list ruleset ip` (median) | nft floor (median) | largest nft child (peak RSS) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for s in &f.sizes {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s.services,
            s.elements,
            ms(quantile(&s.check, 0.5)),
            ms(quantile(&s.check, 1.0)),
            ms(quantile(&s.check_pure, 0.5)),
            ms(quantile(&s.terse_ruleset, 0.5)),
            ms(quantile(&s.floor, 0.5)),
            mib(s.nft_peak_rss_kib.max(0) as u64),
        );
    }
    if !f.svc_small.is_empty() {
        let [a, b] = o.latency_sizes;
        let runs = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            md,
            "\n## Connection latency\n\nA client pod ({CLIENT_ADDR}, veth `{CLIENT_IFACE}`) and a server pod with {per} addresses ({} … {}, veth `{SERVER_IFACE}`, one listener on 0.0.0.0:{TARGET_PORT}) behind the node namespace, wired as the CNI plugin wires them (/32 routes, gateway 169.254.1.1 as a permanent neighbour, proxy ARP on the host end). The measured Service `{MEASURED_KEY}` ({MEASURED_IP}:{SERVICE_PORT}) has the server's {per} addresses as ready endpoints on this node; the table holds it among {a} or among {b} Services (the others synthetic as above). The client opens a fresh TCP connection to the ClusterIP, sends one byte and reads it back, then resets the connection; only the SYN meets the NAT (`frontends` lookup, the picking chain `fe_{per}`, the DNAT maps). Each run makes {} connections to the ClusterIP and, interleaved one by one, {} straight to an endpoint ({}:{TARGET_PORT}, no DNAT; the same `frontends` lookup misses), after {} unmeasured. Client and server are pinned to the last CPU. Each round writes one table and then the other (the small one first in even rounds), each a whole-table write by a new proxy; ratios are medians of per-round ratios.\n\n{}.\n",
            server_addr(0),
            server_addr(per - 1),
            o.connections,
            o.connections,
            server_addr(0),
            o.connections.min(100),
            f.enforced,
        );
        if !f.spread.is_empty() {
            let _ = writeln!(
                md,
                "Connections per endpoint (of 200, from the node's conntrack): {}.\n",
                f.spread
                    .iter()
                    .map(|(a, n)| format!("{a}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let _ = writeln!(
            md,
            "| table | to | connect + first byte (median of run medians) | run medians (µs) |"
        );
        let _ = writeln!(md, "|---|---|---|---|");
        for (t, to, v) in [
            (a, "ClusterIP", &f.svc_small),
            (a, "endpoint, interleaved", &f.direct_small),
            (b, "ClusterIP", &f.svc_large),
            (b, "endpoint, interleaved", &f.direct_large),
        ] {
            let _ = writeln!(
                md,
                "| {t} Services | {to} | {:.1} µs | {} |",
                median_f(v),
                runs(v)
            );
        }
        let _ = writeln!(
            md,
            "\n{b} / {a} Services, to the ClusterIP (back-to-back rounds): **{:.3}** (goal ≤ 1.05). The same for the connections straight to the endpoint (control: the machine between the two halves of a round): {:.3}. ClusterIP / endpoint within a round: {:.3} with {a} Services, {:.3} with {b}. The whole-table writes between rounds: {} median with {a} Services, {} with {b}.\n",
            paired_ratio(&f.svc_large, &f.svc_small),
            paired_ratio(&f.direct_large, &f.direct_small),
            paired_ratio(&f.svc_small, &f.direct_small),
            paired_ratio(&f.svc_large, &f.direct_large),
            ms(quantile(&f.swaps_small, 0.5)),
            ms(quantile(&f.swaps_large, 0.5)),
        );
    }
    if let Some(x) = &f.felix {
        let restart = match &x.restart_error {
            None => format!(
                "Restarted with the store full (table deleted first): all {} frontends written {:.2} s after the start (list of both kinds, decode, index, one whole-table write; polled every 100 ms), then, {:.0} s later, **{}** resident (peak {}).",
                x.services,
                x.cold_start.as_secs_f64(),
                o.felix_settle.as_secs_f64(),
                mib(x.restart_rss_kib),
                mib(x.restart_hwm_kib)
            ),
            Some(e) => format!(
                "The restart with the store full was not measured: {}",
                e.lines().take(3).collect::<Vec<_>>().join(" / ")
            ),
        };
        let in_place = match &x.in_place_error {
            None => format!(
                "Restarted again over the table it left in the kernel (the usual restart: the old elements serve until one netlink transaction replaces them): the whole table rewritten in place {:.2} s after the start (felix's log), then **{}** resident (peak {}).",
                x.in_place_start.as_secs_f64(),
                mib(x.in_place_rss_kib),
                mib(x.in_place_hwm_kib)
            ),
            Some(e) => format!(
                "The restart over the kernel's table was not measured: {}",
                e.lines().take(3).collect::<Vec<_>>().join(" / ")
            ),
        };
        let nft = format!(
            "`nft` runs as felix's child (not counted above); through a wrapper that reports each call's peak (`getrusage` of the real `nft`; the wrapper, a Python script, adds about 20 ms to each call), felix's {} calls over the whole measurement peaked at **{}** at most (`nft {}`).",
            x.nft_calls,
            mib(x.nft_peak_kib),
            x.nft_peak_args
        );
        let _ = writeln!(
            md,
            "## tartan-felix's memory\n\nThe real `tartan-felix` (release build, `--node {NODE}`, periodic check every 5 s) in a fresh network namespace, against a single-member etcd started in the same namespace. Resident memory (`VmRSS` of the felix process) with an empty store: **{}**. Then {} Services and {} EndpointSlices ({per} endpoints each, the objects above as Kubernetes JSON) written into etcd while felix runs (8 writers, {:.1} s); once its table holds every frontend and {:.0} s more have passed (its periodic check runs every 5 s): **{}** resident (peak `VmHWM` {}). {restart} {in_place} {nft} For scale, this benchmark process peaked at {} (it held a {}-Service proxy at a time).\n",
            mib(x.baseline_rss_kib),
            x.services,
            x.services,
            x.fill.as_secs_f64(),
            o.felix_settle.as_secs_f64(),
            mib(x.rss_kib),
            mib(x.hwm_kib),
            mib(f.bench_rss_kib),
            o.sizes
                .iter()
                .max()
                .copied()
                .unwrap_or(0)
                .max(o.latency_sizes[1]),
        );
    }
    if let Some(e) = &f.felix_error {
        let _ = writeln!(
            md,
            "## tartan-felix's memory\n\nNot measured in this run: {}\n",
            e.lines().take(6).collect::<Vec<_>>().join(" / ")
        );
    }
    let _ = writeln!(
        md,
        "Goals (issue 7, point 8): 10,000 Services × 10 endpoints — full sync < 1 s; one endpoint change at 1,000 and at 10,000 Services < 10 ms, not growing with the number of Services; connection latency to a Service at 10,000 Services within 5% of 10; felix RSS at 10,000 Services reported."
    );
    md
}
