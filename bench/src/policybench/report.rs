//! The policy benchmark's Markdown results.

use std::fmt::Write as _;
use std::time::Duration;

use tartan_felix::calc::state::Labels;

use super::figures::*;
use super::latency::*;
use super::model::*;
use super::options::*;
use crate::benchkit::{median_f, ms, paired_ratio};
use crate::bgpload::Environment;
use crate::storebench::quantile;

/// The median of `v` (0 when empty).
pub(super) fn quantile_usize(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

pub(super) fn row(md: &mut String, what: &str, steps: &[Step], goal: &str) {
    let pick = |f: fn(&Step) -> Duration| -> Vec<Duration> { steps.iter().map(f).collect() };
    let total = pick(Step::total);
    let _ = writeln!(
        md,
        "| {what} | {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} | {goal} |",
        steps.len(),
        quantile_usize(steps.iter().map(|s| s.commands).collect()),
        steps.iter().filter(|s| s.via_nft).count(),
        ms(quantile(&pick(|s| s.compile), 0.5)),
        ms(quantile(&pick(|s| s.apply), 0.5)),
        ms(quantile(&pick(|s| s.render), 0.5)),
        ms(quantile(&pick(Step::nft), 0.5)),
        ms(quantile(&total, 0.5)),
        ms(quantile(&total, 0.9)),
        ms(quantile(&total, 1.0)),
    );
}

pub(super) fn relabel_text(l: &[Labels; 2]) -> String {
    l[1].iter()
        .filter(|(k, v)| l[0].get(*k) != Some(*v))
        .map(|(k, v)| format!("{k} `{}` → `{v}`", l[0].get(k).map_or("", String::as_str)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn render_markdown(
    env: &Environment,
    o: &PolicyBenchOptions,
    syn: &Synthetic,
    f: &Figures,
) -> String {
    let mut md = String::from("# Policy benchmark: sync, change, relabel, connection latency\n\n");
    md.push_str(&env.render());
    let z = &f.size;
    let _ = writeln!(
        md,
        "\n## The cluster\n\nGenerated from seed {} (`bench/src/policybench/`): {} namespaces, {} pods (IPv4 only, 2 to 3 named ports each), {} policies: {} Kubernetes NetworkPolicies (podSelector by app, sometimes with a matchExpression; 1 to 3 ingress rules from podSelector / namespaceSelector / both / ipBlock with except, ports by number, range and name; 30% with egress to DNS, the database and the Internet minus private ranges; some default-deny), {} Tartan NetworkPolicies (orders 400 to 499 or none; Log, Deny, Allow with selectors and named ports) and {} GlobalNetworkPolicies (deny lists, data-tier and prod hardening with Log and Deny, a baseline at order 900 ending in Pass). The benchmarked node holds {} of the pods (one in {}, drawn, plus the client and the server); every pod feeds the address sets. Felix's view of it (`calc::state::State`) is compiled by `calc::policy::desired` and written by `dataplane::policy::PolicyDriver` (the `nft` binary, JSON on stdin) in a fresh network namespace.\n",
        o.seed,
        syn.namespaces,
        syn.pods,
        syn.kube + syn.tartan + syn.global,
        syn.kube,
        syn.tartan,
        syn.global,
        syn.local_pods,
        o.local_every,
    );
    let _ = writeln!(
        md,
        "The node's table `inet tartan`: {} chains ({} profiles, 5 fixed, the rest chains a Pass goes to), {} rules, {} named sets ({} of them run sets) with {} elements, {} verdict-map elements; the whole-table transaction is {:.1} MB of JSON. Peak RSS of the largest child process (the full-sync `nft`): {} MiB.\n",
        z.chains,
        z.profiles,
        z.rules,
        z.sets,
        z.run_sets,
        z.set_elements,
        z.map_elements,
        z.full_json_bytes as f64 / 1e6,
        f.nft_peak_rss_kib / 1024,
    );
    let _ = writeln!(
        md,
        "## Sync and changes\n\n{} runs. Each run deletes the table, then times: the full sync (compile + the first whole-table write, a new driver); `{}` changed (its first ingress rule's ports become TCP 8443) and changed back; pod `{}` relabelled ({}, which moves it to another profile) and back: each compile + difference write. *commands* counts the batch's commands (objects added, deleted or flushed); *by `nft`* how many samples' writes went through the `nft` program rather than netlink. *compile* is felix's `desired_cached()` (pure; its cache of rendered policies, built profiles and run-set elements kept across the run's compiles, as felix keeps it, and empty for the full sync); *apply* is `PolicyDriver::apply` (render to JSON, serialise, write: over netlink when every command is one felix encodes itself, else through nft); *render* is `render::full`/`render::diff` + serialisation timed apart (pure), and *nft* is apply − render. Percentiles over all samples; the last four rows split the changes by direction (there, back).\n",
        o.runs,
        syn.change_key,
        syn.relabel_key,
        relabel_text(&syn.relabel),
    );
    let _ = writeln!(
        md,
        "| operation | samples | commands (median) | of them by `nft` | compile (median) | apply (median) | of it render | of it nft | total (median) | p90 | max | goal |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    row(&mut md, "full sync", &f.full, "< 2 s");
    row(&mut md, "one policy changed", &f.change, "< 20 ms");
    row(&mut md, "one pod relabelled", &f.relabel, "< 20 ms");
    // Each run's samples alternate: there, then back.
    let half = |v: &[Step], back: usize| -> Vec<Step> {
        v.iter().skip(back).step_by(2).copied().collect()
    };
    for (what, steps) in [
        ("policy changed", &f.change),
        ("pod relabelled", &f.relabel),
    ] {
        for (dir, k) in [("there", 0), ("back", 1)] {
            row(&mut md, &format!("{what}, {dir}"), &half(steps, k), "");
        }
    }
    let _ = writeln!(
        md,
        "\nThe periodic drift check (`apply(…, check = true)` with nothing to write: `nft -j list table` and a comparison of chain, rule and element counts): median {}, max {}.\n",
        ms(quantile(&f.check, 0.5)),
        ms(quantile(&f.check, 1.0)),
    );
    if !f.latency_policy.is_empty() {
        let p = &f.path;
        let runs = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let ratio = paired_ratio(&f.latency_policy, &f.latency_empty);
        let _ = writeln!(
            md,
            "## Connection latency\n\nTwo pods of namespace `{BENCH_NS}` behind the node namespace, wired as the CNI plugin wires them (veth `tarbcli`/`tarbsrv`, /32 routes, gateway 169.254.1.1 as a permanent neighbour, proxy ARP on the host end). The client ({}) opens a fresh TCP connection to the server ({}:{SERVER_PORT}), sends one byte and reads it back, then resets the connection. With the ruleset, the SYN leaves the client through its egress profile ({} rules) and reaches the server through profile `{}`, standing for 30 policies: {} rules, {} of them run-set lookups besides the guards; {} guarded stretches of {} rules in all behind {} guard lookups (the SYN is in none of the stretches' boxes, so it tests the guards and skips the stretches); the profile's Pass goes to its Kubernetes chain ({} rules, {} lookups), where the Allow run holding the last Kubernetes policy's final rule (`bench-allow-…`, from app=loadgen to the named port `http`) allows it ({}); only the SYN walks them, the rest of the connection is `established`. Empty: the same pods, the table compiled with no policy (both interfaces dispatch to `open`).\n\nA second server ({OPEN_SERVER_ADDR}, `{OPEN_SERVER_IFACE}`, always dispatched to `open` by an extra map element) answers beside it: each run makes {} connections to each server, interleaved one by one (after {} unmeasured), so the two medians of a run saw the same machine. The client and both servers are pinned to one CPU (the last), so every connection takes the same path through the scheduler. Each round runs the ruleset and the empty table back to back (ruleset first in even rounds), each written by the driver as a difference before its run; a ratio is the median of the per-round ratios.\n",
            syn.client.addr,
            syn.server.addr,
            p.client_egress_rules,
            p.profile,
            p.profile_rules,
            p.lookups,
            p.stretches,
            p.stretch_rules,
            p.guard_lookups,
            p.pass_rules,
            p.pass_lookups,
            f.enforced,
            o.connections,
            o.connections.min(100),
        );
        let _ = writeln!(
            md,
            "| table | server | connect + first byte (median of run medians) | run medians (µs) |"
        );
        let _ = writeln!(md, "|---|---|---|---|");
        let n = syn.kube + syn.tartan + syn.global;
        for (t, srv, v) in [
            (
                format!("{n} policies"),
                "walks the chains",
                &f.latency_policy,
            ),
            (
                format!("{n} policies"),
                "open, interleaved",
                &f.latency_policy_open,
            ),
            ("empty".to_string(), "open", &f.latency_empty),
            (
                "empty".to_string(),
                "open, interleaved",
                &f.latency_empty_open,
            ),
        ] {
            let _ = writeln!(md, "| {t} | {srv} | {:.1} µs | {} |", median_f(v), runs(v));
        }
        let _ = writeln!(
            md,
            "\nRuleset / empty table (same server, back-to-back runs): **{ratio:.3}** (goal ≤ 1.05). Walking the receiver's chains / open in the same table (interleaved, the steadier figure; the client's egress chains are walked in both): **{:.3}**; the same pair of servers with the empty table (control, no policy on either): {:.3}. The writes between the two tables (differences adding or removing the whole policy part) took {} median, {} max.\n",
            paired_ratio(&f.latency_policy, &f.latency_policy_open),
            paired_ratio(&f.latency_empty, &f.latency_empty_open),
            ms(quantile(&f.swaps, 0.5)),
            ms(quantile(&f.swaps, 1.0)),
        );
    }
    let _ = writeln!(
        md,
        "Goals (issue 6, point 5): 2,000 policies over 500 pods — full sync < 2 s, one policy change < 20 ms, one pod relabelled < 20 ms; connection latency with the ruleset within 5% of an empty one."
    );
    md
}
