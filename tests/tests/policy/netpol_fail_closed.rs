//! Fail closed (issue 25, acceptance 3), on a lab cluster (namespaces x, y,
//! z; pods a, b, c in each): a Kubernetes NetworkPolicy written straight
//! into etcd with a boolean where a string goes isolates the pods of its
//! namespace in both directions; felix's metric and `tartanctl check` show
//! it; a readable version put in its place is enforced exactly as written,
//! and the metric and the check are clean again. Likewise an unreadable
//! GlobalNetworkSet, for the policy whose rule could pick it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use tartan_lab::cni::tartan_bin_dir;
use tartan_lab::netpol::{NAMESPACE_NAME_LABEL, NetpolCluster, Protocol, Reachability};

use Protocol::Tcp;

const KEY: &str = "/tartan/k8s/networkpolicies/x/fail-closed";
const KIND: &str = "NetworkPolicy.networking.k8s.io";

fn policy(spec: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "fail-closed", "namespace": "x"},
        "spec": spec,
    }))
    .expect("JSON")
}

/// GET /metrics from felix on node `i` (127.0.0.1:9099 in its namespace).
fn metrics(c: &NetpolCluster, i: usize) -> String {
    tartan_tests::felix_http_get(&c.lab.underlay.node(i).netns, "/metrics")
}

/// The value of `tartan_felix_unreadable_objects` for `kind` on node `i`.
fn gauge_of(c: &NetpolCluster, i: usize, kind: &str) -> Option<i64> {
    let label = format!("kind=\"{kind}\"");
    metrics(c, i)
        .lines()
        .find(|l| l.starts_with("tartan_felix_unreadable_objects{") && l.contains(&label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
}

/// Waits until every node's gauge for Kubernetes NetworkPolicies reads
/// `want`.
fn gauges_become(c: &NetpolCluster, want: i64) -> Result<()> {
    kind_gauges_become(c, KIND, want)
}

/// Waits until every node's gauge for `kind` reads `want`.
fn kind_gauges_become(c: &NetpolCluster, kind: &str, want: i64) -> Result<()> {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<i64>> = (0..3).map(|i| gauge_of(c, i, kind)).collect();
        if seen.iter().all(|v| *v == Some(want)) {
            return Ok(());
        }
        if start.elapsed() > Duration::from_secs(20) {
            bail!(
                "{kind} gauges {seen:?}, want {want} on each node:\n{}",
                metrics(c, 0)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `tartanctl check` against the lab's etcd: (succeeded, stdout, stderr).
fn check(c: &NetpolCluster) -> Result<(bool, String, String)> {
    let bin = tartan_bin_dir().join("tartanctl");
    let out = std::process::Command::new(&bin)
        .args(["--datastore", &c.lab.etcd.datastore_spec(), "check"])
        .env_remove("TARTAN_DATASTORE")
        .output()
        .with_context(|| format!("run {} (build it: cargo build --bins)", bin.display()))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// How often felix on each node logged the unreadable object at ERROR.
fn error_lines(c: &NetpolCluster) -> Vec<usize> {
    (0..3)
        .map(|i| {
            c.daemons(i)
                .map(|(_, felix)| {
                    felix
                        .log()
                        .lines()
                        .filter(|l| {
                            l.contains("ERROR")
                                && l.contains("unreadable object")
                                && l.contains("fail-closed")
                        })
                        .count()
                })
                .unwrap_or(0)
        })
        .collect()
}

#[test]
fn an_unreadable_network_policy_isolates_its_namespace_until_replaced() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = Instant::now();
    let c = NetpolCluster::start().unwrap();
    // Before: every pod reaches every pod (start waited for TCP/80).
    c.expect(81, Tcp, &Reachability::all(true)).unwrap();
    gauges_become(&c, 0).unwrap();
    let (ok, out, err) = check(&c).unwrap();
    assert!(ok && out.starts_with("ok:"), "{out}{err}");

    // Written straight into etcd: the write path would refuse it.
    let bad = policy(json!({
        "podSelector": {"matchLabels": {"role": true}},
        "policyTypes": ["Ingress"],
    }));
    c.lab.etcd.put_raw(KEY, &bad).unwrap();
    let t_bad = Instant::now();
    // x is isolated both ways: no pod of another namespace reaches x, and
    // no pod of x reaches out (nor does one of x reach another of x).
    let mut isolated = Reachability::all(true);
    isolated
        .expect_to_namespace("x", false)
        .expect_from_namespace("x", false);
    c.expect(80, Tcp, &isolated).unwrap();
    c.expect(81, Tcp, &isolated).unwrap();
    eprintln!("isolated after {:?}", t_bad.elapsed());
    gauges_become(&c, 1).unwrap();
    let (ok, out, err) = check(&c).unwrap();
    assert!(!ok, "check passes with an unreadable policy:\n{out}{err}");
    let row = out
        .lines()
        .find(|l| l.contains("fail-closed"))
        .unwrap_or_else(|| panic!("check does not list it:\n{out}"));
    eprintln!("tartanctl check:\n{out}{err}");
    for want in [
        "NetworkPolicy.networking.k8s.io",
        " x ",
        "spec.podSelector.matchLabels[role]",
    ] {
        assert!(row.contains(want), "{want:?} in {row}");
    }
    // Logged once per felix, not on every resync (each second here).
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(error_lines(&c), vec![1, 1, 1], "{}", c.felix_logs(30));
    c.expect(80, Tcp, &isolated).unwrap();

    // A readable version in its place: x accepts TCP/80 from y only, and
    // (an Ingress policy) sends wherever it likes.
    let good = policy(json!({
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "y"}}}],
            "ports": [{"port": 80, "protocol": "TCP"}],
        }],
    }));
    c.lab.etcd.put_raw(KEY, &good).unwrap();
    let mut on80 = Reachability::all(true);
    on80.expect_to_namespace("x", false)
        .expect_namespaces("y", "x", true);
    c.expect(80, Tcp, &on80).unwrap();
    let mut on81 = Reachability::all(true);
    on81.expect_to_namespace("x", false);
    c.expect(81, Tcp, &on81).unwrap();
    gauges_become(&c, 0).unwrap();
    let (ok, out, err) = check(&c).unwrap();
    assert!(ok && out.starts_with("ok:"), "{out}{err}");
    eprintln!("done after {:?}", t0.elapsed());
}

/// An unreadable GlobalNetworkSet (written straight into etcd with a
/// network that has host bits) cannot be read for its labels or its
/// networks: the NetworkPolicy of x whose rule could pick it (its
/// namespaceSelector takes in `global()`) drops, in its place, every
/// packet that reaches it: x's pods, the only ones it applies to, are cut
/// off both ways; the gauge and `tartanctl check` show it; a readable
/// version in its place is enforced as written.
#[test]
fn an_unreadable_global_network_set_isolates_the_policies_that_could_pick_it() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let c = NetpolCluster::start().unwrap();
    let set = |nets: Vec<String>| {
        serde_json::to_vec(&json!({
            "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkSet",
            "metadata": {"name": "partners", "labels": {"role": "partner"}},
            "spec": {"nets": nets},
        }))
        .expect("JSON")
    };
    const SET_KEY: &str = "/tartan/globalnetworksets/partners";
    let ya = format!("{}/32", c.ip("y/a").unwrap());
    c.lab.etcd.put_raw(SET_KEY, &set(vec![ya])).unwrap();
    c.apply_tartan_policy(json!({
        "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "partners", "namespace": "x"},
        "spec": {"selector": "all()", "types": ["Ingress"], "ingress": [{"action": "Allow",
            "source": {"selector": "role == 'partner'", "namespaceSelector": "global()"}}]},
    }))
    .unwrap();
    let mut only_ya = Reachability::all(true);
    only_ya
        .expect_to_namespace("x", false)
        .expect_to_namespace_from("y/a", "x", true);
    c.expect(80, Tcp, &only_ya).unwrap();

    c.lab
        .etcd
        .put_raw(SET_KEY, &set(vec!["10.0.0.1/8".into()]))
        .unwrap();
    let mut isolated = Reachability::all(true);
    isolated
        .expect_to_namespace("x", false)
        .expect_from_namespace("x", false);
    c.expect(80, Tcp, &isolated).unwrap();
    kind_gauges_become(&c, "GlobalNetworkSet", 1).unwrap();
    let (ok, out, err) = check(&c).unwrap();
    assert!(!ok, "check passes with an unreadable set:\n{out}{err}");
    let row = out
        .lines()
        .find(|l| l.contains("partners"))
        .unwrap_or_else(|| panic!("check does not list it:\n{out}"));
    assert!(
        row.contains("GlobalNetworkSet") && row.contains("spec.nets"),
        "{row}"
    );

    let zb = format!("{}/32", c.ip("z/b").unwrap());
    c.lab.etcd.put_raw(SET_KEY, &set(vec![zb])).unwrap();
    let mut only_zb = Reachability::all(true);
    only_zb
        .expect_to_namespace("x", false)
        .expect_to_namespace_from("z/b", "x", true);
    c.expect(80, Tcp, &only_zb).unwrap();
    kind_gauges_become(&c, "GlobalNetworkSet", 0).unwrap();
    let (ok, out, err) = check(&c).unwrap();
    assert!(ok && out.starts_with("ok:"), "{out}{err}");
}
