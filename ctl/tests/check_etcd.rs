//! `tartanctl check` against a real etcd: objects written straight into
//! etcd, past the write path's checks, are listed with kind, namespace,
//! name and the field at fault, and the command fails until readable
//! versions replace them.

use tartan_lab::etcd::EtcdCluster;

mod support;

use support::Ctl;

const BAD_POLICY: &str = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
 "metadata":{"name":"bad","namespace":"team"},
 "spec":{"podSelector":{"matchLabels":{"role":true}},"policyTypes":["Ingress"]}}"#;
const GOOD_POLICY: &str = r#"{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy",
 "metadata":{"name":"bad","namespace":"team"},
 "spec":{"podSelector":{"matchLabels":{"role":"db"}},"policyTypes":["Ingress"]}}"#;
// Labels that are not strings: felix cannot read the account, so the
// policies selecting by its labels drop in place (docs/policy.md).
const BAD_ACCOUNT: &str = r#"{"apiVersion":"v1","kind":"ServiceAccount",
 "metadata":{"name":"robot","namespace":"team","labels":{"tier":7}}}"#;
const GOOD_ACCOUNT: &str = r#"{"apiVersion":"v1","kind":"ServiceAccount",
 "metadata":{"name":"robot","namespace":"team","labels":{"tier":"7"}}}"#;
const GOOD_POOL: &str = r#"{"apiVersion":"tartan.dev/v1","kind":"IPPool",
 "metadata":{"name":"garbled"},"spec":{"cidr":"10.9.0.0/16"}}"#;

#[test]
fn check_lists_unreadable_objects_and_passes_once_they_are_replaced() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let r = ctl.run(&["check"]);
    assert!(r.out().starts_with("ok: all 0 objects"), "{}", r.stdout);

    let pool = ctl.file(
        "pool.yaml",
        "apiVersion: tartan.dev/v1\nkind: IPPool\nmetadata: {name: fine}\nspec: {cidr: 10.8.0.0/16}\n",
    );
    ctl.run(&["apply", "-f", &pool]).out();
    // The write path refuses the bad policy ...
    let bad = ctl.file("bad.json", BAD_POLICY);
    let r = ctl.run(&["apply", "-f", &bad]);
    assert!(r.err().contains("matchLabels"), "{}", r.stderr);
    // ... so it goes straight into etcd, with a value that is not JSON.
    etcd.put_raw(
        "/tartan/k8s/networkpolicies/team/bad",
        BAD_POLICY.as_bytes(),
    )
    .expect("put");
    etcd.put_raw("/tartan/ippools/garbled", b"{not json")
        .expect("put");
    etcd.put_raw(
        "/tartan/k8s/serviceaccounts/team/robot",
        BAD_ACCOUNT.as_bytes(),
    )
    .expect("put");

    let r = ctl.run(&["check"]);
    r.err();
    let rows: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(rows.len(), 4, "a header and three rows:\n{}", r.stdout);
    let policy = rows
        .iter()
        .find(|l| l.contains("NetworkPolicy.networking.k8s.io"))
        .unwrap_or_else(|| panic!("no policy row:\n{}", r.stdout));
    for want in [
        "team",
        "bad",
        "spec.podSelector.matchLabels[role]",
        "boolean",
    ] {
        assert!(policy.contains(want), "{want} in {policy}");
    }
    let pool_row = rows
        .iter()
        .find(|l| l.starts_with("IPPool"))
        .unwrap_or_else(|| panic!("no pool row:\n{}", r.stdout));
    assert!(
        pool_row.contains("garbled") && pool_row.contains("not JSON"),
        "{pool_row}"
    );
    let account = rows
        .iter()
        .find(|l| l.starts_with("ServiceAccount"))
        .unwrap_or_else(|| panic!("no account row:\n{}", r.stdout));
    for want in ["team", "robot", "metadata.labels[tier]"] {
        assert!(account.contains(want), "{want} in {account}");
    }
    assert!(
        !r.stdout.contains("fine"),
        "the readable pool is not listed"
    );
    assert!(r.stderr.contains("3 unreadable object(s)"), "{}", r.stderr);

    let r = ctl.run(&["check", "-o", "json"]);
    let found: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON");
    let found = found.as_array().expect("a list");
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found.iter().any(|f| {
        f["kind"] == "NetworkPolicy.networking.k8s.io"
            && f["namespace"] == "team"
            && f["name"] == "bad"
            && f["reason"]
                .as_str()
                .unwrap_or("")
                .contains("spec.podSelector.matchLabels[role]")
    }));
    assert!(!r.ok);

    // The unreadable objects are still named by `get`, not hidden.
    let names = ctl.names("ippools");
    assert!(names.contains(&"garbled".to_string()), "{names:?}");

    etcd.put_raw(
        "/tartan/k8s/networkpolicies/team/bad",
        GOOD_POLICY.as_bytes(),
    )
    .expect("put");
    etcd.put_raw(
        "/tartan/k8s/serviceaccounts/team/robot",
        GOOD_ACCOUNT.as_bytes(),
    )
    .expect("put");
    let r = ctl.run(&["check"]);
    assert_eq!(r.stdout.lines().count(), 2, "one left:\n{}", r.stdout);
    assert!(
        r.stdout.contains("garbled") && !r.stdout.contains("team"),
        "{}",
        r.stdout
    );
    etcd.put_raw("/tartan/ippools/garbled", GOOD_POOL.as_bytes())
        .expect("put");
    let r = ctl.run(&["check"]);
    assert!(r.out().starts_with("ok: all 4 objects"), "{}", r.stdout);
}
