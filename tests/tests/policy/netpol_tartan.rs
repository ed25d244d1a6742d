//! Tartan's own policies (`tartan.dev/v1` NetworkPolicy and
//! GlobalNetworkPolicy) on the netpol cluster (namespaces x, y, z; pods
//! a, b, c; servers on 80 and 81), alone and together with Kubernetes
//! NetworkPolicies. The semantics these cases rely on (docs/policy.md):
//!
//! - policies apply in ascending `order`, Kubernetes NetworkPolicies
//!   standing at order 1000; the first rule that matches decides;
//! - `Pass` skips the rest of its policy and every later Tartan policy;
//!   Kubernetes NetworkPolicies still apply, and with none selecting the
//!   pod the packet is allowed;
//! - `Log` writes a kernel log record with the prefix `tartan ` and goes
//!   on with the next rule;
//! - a pod some policy selects in a direction is default-deny in it.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tartan_lab::netpol::probe::probe;
use tartan_lab::netpol::{Case, NetpolCluster, Protocol, network_set};
use tartan_tests::netpol::{all, apply_global, apply_k8s, apply_tartan, expect_on, grid};

use Protocol::{Tcp, Udp};

/// A Tartan selector for the namespace `ns`.
fn in_ns(ns: &str) -> String {
    format!("kubernetes.io/metadata.name == '{ns}'")
}

/// The GlobalNetworkPolicy `name` at `order` on every pod of x, for
/// ingress, with `rules`.
fn into_x(c: &NetpolCluster, name: &str, order: u32, rules: Value) -> Result<()> {
    apply_global(
        c,
        name,
        json!({"order": order, "selector": "all()", "namespaceSelector": in_ns("x"),
               "types": ["Ingress"], "ingress": rules}),
    )
}

/// Two conflicting policies on x: allow from y (order 10) and deny all
/// (order 20); the lower order wins. With the allow moved to order 30
/// the deny comes first and nothing gets into x.
fn lower_order_wins(c: &NetpolCluster) -> Result<()> {
    let allow_y = |order: u32| {
        apply_tartan(
            c,
            "x",
            "allow-y",
            json!({"order": order, "selector": "all()", "types": ["Ingress"],
                   "ingress": [{"action": "Allow", "source": {"namespaceSelector": in_ns("y")}}]}),
        )
    };
    allow_y(10)?;
    apply_tartan(
        c,
        "x",
        "deny-all",
        json!({"order": 20, "selector": "all()", "types": ["Ingress"],
               "ingress": [{"action": "Deny"}]}),
    )?;
    let only_y = grid(|w| {
        w.expect_to_namespace("x", false)
            .expect_namespaces("y", "x", true)
    });
    c.expect(80, Tcp, &only_y)?;
    allow_y(30)?;
    c.expect(80, Tcp, &grid(|w| w.expect_to_namespace("x", false)))
}

/// A Kubernetes policy lets y into x; a Tartan Deny at order 100 (before
/// the Kubernetes policy's 1000) keeps y out of x/a.
fn tartan_deny_overrides_k8s_allow(c: &NetpolCluster) -> Result<()> {
    apply_k8s(
        c,
        "x",
        "x-from-y",
        json!({"podSelector": {}, "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}},
        ]}]}),
    )?;
    apply_tartan(
        c,
        "x",
        "deny-y-to-a",
        json!({"order": 100, "selector": "pod == 'a'", "types": ["Ingress"],
               "ingress": [{"action": "Deny", "source": {"namespaceSelector": in_ns("y")}}]}),
    )?;
    let want = grid(|w| {
        w.expect_to_namespace("x", false)
            .expect_namespaces("y", "x", true)
            .expect_namespace_to("y", "x/a", false)
    });
    c.expect(80, Tcp, &want)
}

/// GlobalNetworkPolicies on x's pods: order 10 passes traffic from y,
/// order 20 denies all ingress. y skips the deny and, with no Kubernetes
/// policy selecting x's pods, is allowed; x and z are denied. Then a
/// Kubernetes policy in x admitting only y/b: passed traffic still meets
/// it, so y/a and y/c are kept out.
fn pass_skips_to_kubernetes_policies(c: &NetpolCluster) -> Result<()> {
    let from_y = json!({"namespaceSelector": in_ns("y")});
    into_x(
        c,
        "pass-y-into-x",
        10,
        json!([{"action": "Pass", "source": from_y}]),
    )?;
    into_x(c, "deny-into-x", 20, json!([{"action": "Deny"}]))?;
    let only_y = grid(|w| {
        w.expect_to_namespace("x", false)
            .expect_namespaces("y", "x", true)
    });
    expect_on(c, &[(80, Tcp), (81, Udp)], &only_y)?;
    apply_k8s(
        c,
        "x",
        "x-from-y-b",
        json!({"podSelector": {}, "ingress": [{"from": [{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}},
            "podSelector": {"matchLabels": {"pod": "b"}},
        }]}]}),
    )?;
    let only_yb = grid(|w| {
        w.expect_to_namespace("x", false)
            .expect_to_namespace_from("y/b", "x", true)
    });
    c.expect(80, Tcp, &only_yb)
}

/// One GlobalNetworkPolicy denies ingress to pod a of every namespace.
fn global_policy_across_namespaces(c: &NetpolCluster) -> Result<()> {
    apply_global(
        c,
        "deny-into-a",
        json!({"selector": "pod == 'a'", "types": ["Ingress"],
               "ingress": [{"action": "Deny"}]}),
    )?;
    let want = grid(|w| {
        w.expect_to("x/a", false)
            .expect_to("y/a", false)
            .expect_to("z/a", false)
    });
    expect_on(c, &[(80, Tcp), (81, Udp)], &want)
}

/// The kernel log (`dmesg`) after the last line containing `marker`.
fn kernel_log_after(marker: &str) -> Result<String> {
    let out = std::process::Command::new("dmesg")
        .output()
        .context("run dmesg")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.contains(marker))
        .map(|i| i + 1)
        .unwrap_or(lines.len());
    Ok(lines[start..].join("\n"))
}

/// Records from the nodes' namespaces reach the kernel log only with
/// this (felix sets it too); nothing restores it.
fn log_from_every_netns() {
    let sysctl = "/proc/sys/net/netfilter/nf_log_all_netns";
    if let Err(e) = std::fs::write(sysctl, "1") {
        eprintln!("could not set {sysctl}: {e} (felix may have)");
    }
}

/// Writes a unique line to the kernel log, and returns it.
fn kernel_log_marker() -> Result<String> {
    let marker = format!(
        "netpol-log-marker-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .and_then(|mut k| k.write_all(marker.as_bytes()))
        .context("write a marker to /dev/kmsg")?;
    Ok(marker)
}

/// Three hardening GlobalNetworkPolicies on x, each a Log on TCP 80, a
/// Deny on TCP 81 and a Deny from a network (the third: y/b's address),
/// then an Allow for the rest (order 900). The three are one stretch of
/// rules behind a guard lookup (docs/policy.md): into x, TCP 81 is
/// closed, y/b is kept out, the rest gets in; one SYN from z/a to x/a
/// is logged once by each policy, never twice.
fn guarded_log_and_deny_stretch(c: &NetpolCluster) -> Result<()> {
    log_from_every_netns();
    let yb = c.ip("y/b")?;
    for i in 1..=3 {
        let net = if i == 3 {
            format!("{yb}/32")
        } else {
            format!("192.0.2.{i}/32")
        };
        into_x(
            c,
            &format!("harden-{i}"),
            10 + i,
            json!([
                {"action": "Log", "protocol": "TCP", "destination": {"ports": [80]}},
                {"action": "Deny", "protocol": "TCP", "destination": {"ports": [81]}},
                {"action": "Deny", "source": {"nets": [net]}}]),
        )?;
    }
    into_x(c, "allow-rest", 900, json!([{"action": "Allow"}]))?;
    let but_yb = grid(|w| w.expect_to_namespace_from("y/b", "x", false));
    expect_on(c, &[(80, Tcp), (81, Udp)], &but_yb)?;
    c.expect(81, Tcp, &grid(|w| w.expect_to_namespace("x", false)))?;

    let marker = kernel_log_marker()?;
    let client = c.pod("z/a").context("no z/a")?;
    let (src, dst) = (c.ip("z/a")?, c.ip("x/a")?);
    if !probe(client.netns(), dst, 80, Tcp)? {
        bail!("z/a does not reach x/a on TCP 80");
    }
    let ours = |log: &str, i: u32| {
        log.lines()
            .filter(|l| {
                l.contains(&format!("tartan gnp:harden-{i} in: "))
                    && l.contains(&format!("SRC={src} DST={dst} "))
                    && l.contains("DPT=80 ")
            })
            .count()
    };
    let start = Instant::now();
    loop {
        let log = kernel_log_after(&marker)?;
        let counts: Vec<usize> = (1..=3).map(|i| ours(&log, i)).collect();
        if counts.iter().any(|&n| n > 1) {
            bail!("a SYN logged more than once by one policy: {counts:?}\n{log}");
        }
        if counts == [1, 1, 1] {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(10) {
            bail!(
                "records per policy after 10 s: {counts:?}, want one each; the log after the \
                 marker:\n{log}\n{}",
                c.felix_logs(15)
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Ingress to x/a logged then allowed (order 10), ahead of a Kubernetes
/// deny-ingress on all of x (order 1000): x/a stays reachable (Log goes
/// on to the Allow), x/b and x/c are closed, and a probe of x/a leaves a
/// kernel log record with the prefix `tartan ` and x/a's address.
fn log_then_allow(c: &NetpolCluster) -> Result<()> {
    log_from_every_netns();
    apply_k8s(
        c,
        "x",
        "deny-ingress",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    )?;
    apply_tartan(
        c,
        "x",
        "log-then-allow",
        json!({"order": 10, "selector": "pod == 'a'", "types": ["Ingress"],
               "ingress": [{"action": "Log"}, {"action": "Allow"}]}),
    )?;
    c.expect(
        80,
        Tcp,
        &grid(|w| w.expect_to("x/b", false).expect_to("x/c", false)),
    )?;

    let marker = kernel_log_marker()?;
    let client = c.pod("y/b").context("no y/b")?;
    let server = c.ip("x/a")?;
    let dst = format!("DST={server} ");
    let start = Instant::now();
    loop {
        if !probe(client.netns(), server, 80, Tcp)? {
            bail!("y/b does not reach x/a on TCP 80");
        }
        let log = kernel_log_after(&marker)?;
        if log
            .lines()
            .any(|l| l.contains("tartan ") && l.contains(&dst))
        {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(10) {
            bail!(
                "no kernel log record with `tartan ` and `{dst}` after the marker in 10 s; \
                 the log after it:\n{log}\n{}",
                c.felix_logs(15)
            );
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A Tartan policy spec at order 10 allowing ingress into every pod of
/// its scope from `source` only.
fn allowed_in_from(source: Value) -> Value {
    json!({"order": 10, "selector": "all()", "types": ["Ingress"],
           "ingress": [{"action": "Allow", "source": source}]})
}

/// Every pod reaches every other, but into namespace x only the pods
/// `ids` do.
fn only_into_x(ids: &[&str]) -> tartan_lab::netpol::Reachability {
    grid(|w| {
        let w = w.expect_to_namespace("x", false);
        for id in ids {
            w.expect_to_namespace_from(id, "x", true);
        }
        w
    })
}

/// Network sets picked by rule selectors, into x: a GlobalNetworkSet
/// holding y/a's address, a NetworkSet of x holding z/b's, one of y
/// holding z/c's, all labelled `role: partner`.
/// - A NetworkPolicy of x allowing `role == 'partner'` lets in z/b only
///   (its own namespace's set);
/// - with `namespaceSelector: global()`, y/a only (the global set);
/// - a GlobalNetworkPolicy allowing the same: all three;
/// - the global set changed to z/a's address: z/a, z/b, z/c.
fn network_sets_picked_by_rule_selectors(c: &NetpolCluster) -> Result<()> {
    let partner = json!({"role": "partner"});
    let host = |id: &str| -> Result<Vec<String>> { Ok(vec![format!("{}/32", c.ip(id)?)]) };
    c.apply_network_set(network_set(
        None,
        "partners",
        partner.clone(),
        &host("y/a")?,
    ))?;
    c.apply_network_set(network_set(
        Some("x"),
        "friends",
        partner.clone(),
        &host("z/b")?,
    ))?;
    c.apply_network_set(network_set(
        Some("y"),
        "others",
        partner.clone(),
        &host("z/c")?,
    ))?;
    apply_tartan(
        c,
        "x",
        "partners",
        allowed_in_from(json!({"selector": "role == 'partner'"})),
    )?;
    c.expect(80, Tcp, &only_into_x(&["z/b"]))
        .context("NetworkPolicy: its namespace's set")?;
    apply_tartan(
        c,
        "x",
        "partners",
        allowed_in_from(json!({"selector": "role == 'partner'", "namespaceSelector": "global()"})),
    )?;
    c.expect(80, Tcp, &only_into_x(&["y/a"]))
        .context("NetworkPolicy with namespaceSelector global(): the global set")?;
    c.delete_tartan_policy("x", "partners")?;
    let mut global = allowed_in_from(json!({"selector": "role == 'partner'"}));
    global["namespaceSelector"] = json!(in_ns("x"));
    apply_global(c, "partners", global)?;
    c.expect(80, Tcp, &only_into_x(&["y/a", "z/b", "z/c"]))
        .context("GlobalNetworkPolicy: every set")?;
    c.apply_network_set(network_set(None, "partners", partner, &host("z/a")?))?;
    c.expect(80, Tcp, &only_into_x(&["z/a", "z/b", "z/c"]))
        .context("the global set's networks changed")
}

/// Service accounts, as Calico matches them: every pod `a` runs as
/// `sa-a` (`b` as `sa-b`), whose labels say `team: blue` in x and y and
/// `team: red` in z until relabelled. A rule's `serviceAccounts` by name
/// (the policy's namespace) and by the accounts' labels (every namespace),
/// a policy's `serviceAccountSelector`, and an account relabelled.
fn service_accounts_by_name_and_by_labels(c: &NetpolCluster) -> Result<()> {
    for ns in ["x", "y", "z"] {
        let team = if ns == "z" { "red" } else { "blue" };
        c.apply_service_account(ns, "sa-a", json!({"team": team}))?;
        c.apply_service_account(ns, "sa-b", json!({}))?;
    }
    apply_tartan(
        c,
        "x",
        "by-account",
        allowed_in_from(json!({"serviceAccounts": {"names": ["sa-a"]}})),
    )?;
    c.expect(80, Tcp, &only_into_x(&["x/a"]))
        .context("by name: the policy's namespace")?;
    apply_tartan(
        c,
        "x",
        "by-account",
        allowed_in_from(json!({"namespaceSelector": "all()",
                    "serviceAccounts": {"selector": "team == 'blue'"}})),
    )?;
    c.expect(80, Tcp, &only_into_x(&["x/a", "y/a"]))
        .context("by the accounts' labels, every namespace")?;
    c.delete_tartan_policy("x", "by-account")?;
    apply_global(
        c,
        "deny-into-blue",
        json!({"selector": "all()", "serviceAccountSelector": "team == 'blue'",
               "types": ["Ingress"], "ingress": [{"action": "Deny"}]}),
    )?;
    c.expect(
        80,
        Tcp,
        &grid(|w| w.expect_to("x/a", false).expect_to("y/a", false)),
    )
    .context("serviceAccountSelector: what the policy applies to")?;
    c.apply_service_account("z", "sa-a", json!({"team": "blue"}))?;
    c.expect(
        80,
        Tcp,
        &grid(|w| {
            w.expect_to("x/a", false)
                .expect_to("y/a", false)
                .expect_to("z/a", false)
        }),
    )
    .context("an account relabelled: its pods follow")
}

const CASES: &[Case] = &[
    ("lower order wins", lower_order_wins),
    (
        "a Tartan Deny at order 100 overrides a Kubernetes allow",
        tartan_deny_overrides_k8s_allow,
    ),
    (
        "Pass skips to the Kubernetes policies",
        pass_skips_to_kubernetes_policies,
    ),
    (
        "a GlobalNetworkPolicy across namespaces",
        global_policy_across_namespaces,
    ),
    ("Log, then Allow", log_then_allow),
    (
        "network sets picked by rule selectors",
        network_sets_picked_by_rule_selectors,
    ),
    (
        "service accounts by name and by their labels",
        service_accounts_by_name_and_by_labels,
    ),
    (
        "a stretch of Log and Deny rules behind its guard",
        guarded_log_and_deny_stretch,
    ),
];

#[test]
fn tartan_policy_truth_tables() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let c = NetpolCluster::start().unwrap();
    c.expect(80, Tcp, &all())
        .unwrap_or_else(|e| panic!("baseline: {e:#}"));
    if let Err(report) = c.run_cases(CASES) {
        panic!("{report}");
    }
}
