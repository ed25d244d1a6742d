//! Runs the built `tartanctl` against a real etcd (Debian's etcd-server on
//! loopback): apply, get in every format, re-apply, label, delete, and the
//! ways a command must fail — clearly, with nothing half-written.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use tartan_lab::etcd::EtcdCluster;

mod support;

use support::{Ctl, tartanctl};

/// The rows of a table after its header, split into cells.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

fn header(table: &str) -> Vec<String> {
    rows(table).into_iter().next().unwrap_or_default()
}

const ALL: &str = "\
apiVersion: tartan.dev/v1
kind: IPPool
metadata:
  name: pool-a
spec:
  cidr: 10.244.0.0/16
  blockSize: 26
  ipipMode: CrossSubnet
  vxlanMode: Never
  natOutgoing: true
  nodeSelector: all()
---
apiVersion: tartan.dev/v1
kind: BGPConfiguration
metadata:
  name: default
spec:
  asNumber: 64512
  nodeToNodeMeshEnabled: true
  listenPort: 179
---
apiVersion: tartan.dev/v1
kind: BGPPeer
metadata:
  name: tor-a
spec:
  node: node-a
  peerIP: 192.0.2.1
  asNumber: 65001
---
apiVersion: tartan.dev/v1
kind: NetworkPolicy
metadata:
  name: allow-web
  namespace: team
spec:
  order: 100
  selector: app == 'web'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: TCP
    destination: {ports: [80]}
---
apiVersion: tartan.dev/v1
kind: GlobalNetworkPolicy
metadata:
  name: deny-all
spec:
  order: 1000
  selector: all()
  types: [Ingress]
  ingress:
  - action: Deny
";

fn pool(name: &str, cidr: &str, block_size: u32) -> String {
    format!(
        "apiVersion: tartan.dev/v1\nkind: IPPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  blockSize: {block_size}\n"
    )
}

#[test]
fn apply_get_label_and_delete() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let all = ctl.file("all.yaml", ALL);

    let r = ctl.run(&["apply", "-f", &all]);
    assert_eq!(
        r.out(),
        "ippool.tartan.dev/pool-a created\n\
         bgpconfiguration.tartan.dev/default created\n\
         bgppeer.tartan.dev/tor-a created\n\
         networkpolicy.tartan.dev/allow-web created\n\
         globalnetworkpolicy.tartan.dev/deny-all created\n"
    );

    // Tables, with each kind's columns.
    let t = ctl.run(&["get", "ippools"]).out().to_string();
    assert_eq!(
        header(&t),
        [
            "NAME",
            "CIDR",
            "BLOCKSIZE",
            "IPIP",
            "VXLAN",
            "NAT",
            "DISABLED",
            "AGE"
        ]
    );
    let row = &rows(&t)[1];
    assert_eq!(
        row[..7],
        [
            "pool-a",
            "10.244.0.0/16",
            "26",
            "CrossSubnet",
            "Never",
            "true",
            "-"
        ]
    );
    assert!(
        row[7].ends_with('s') || row[7].ends_with('m'),
        "age {row:?}"
    );
    let t = ctl.run(&["get", "ippool", "-o", "wide"]).out().to_string();
    assert!(header(&t).contains(&"NODESELECTOR".to_string()), "{t}");
    assert!(t.contains("all()"), "{t}");

    let t = ctl.run(&["get", "bgpconfig"]).out().to_string();
    assert_eq!(header(&t), ["NAME", "ASN", "MESH", "PORT", "AGE"]);
    assert_eq!(rows(&t)[1][..4], ["default", "64512", "true", "179"]);

    let t = ctl.run(&["get", "BGPPeer", "tor-a"]).out().to_string();
    assert_eq!(header(&t), ["NAME", "NODE", "PEERIP", "ASN", "AGE"]);
    assert_eq!(rows(&t)[1][..4], ["tor-a", "node-a", "192.0.2.1", "65001"]);

    let t = ctl.run(&["get", "gnp"]).out().to_string();
    assert_eq!(header(&t), ["NAME", "ORDER", "SELECTOR", "AGE"]);
    assert_eq!(rows(&t)[1][..3], ["deny-all", "1000", "all()"]);

    // Namespaced: not in `default`, found with -n and -A.
    let r = ctl.run(&["get", "networkpolicies"]);
    assert_eq!(r.out(), "");
    assert!(
        r.stderr
            .contains("No resources found in namespace \"default\""),
        "{}",
        r.stderr
    );
    let t = ctl.run(&["-n", "team", "get", "tnp"]).out().to_string();
    assert_eq!(header(&t), ["NAME", "ORDER", "SELECTOR", "AGE"]);
    assert_eq!(rows(&t)[1][..3], ["allow-web", "100", "app == 'web'"]);
    let t = ctl.run(&["get", "networkpolicy", "-A"]).out().to_string();
    assert_eq!(header(&t)[..2], ["NAMESPACE", "NAME"]);
    assert_eq!(rows(&t)[1][..2], ["team", "allow-web"]);
    let t = ctl
        .run(&["get", "networkpolicy", "-A", "-o", "wide"])
        .out()
        .to_string();
    assert!(header(&t).contains(&"INGRESS".to_string()), "{t}");

    // YAML and JSON read back as the objects.
    let one = ctl.yaml(&["get", "pool", "pool-a"]);
    assert_eq!(one["kind"], "IPPool");
    assert_eq!(one["spec"]["cidr"], "10.244.0.0/16");
    assert_eq!(one["spec"]["blockSize"], 26);
    assert!(one["metadata"]["uid"].is_string());
    assert!(one["metadata"]["resourceVersion"].is_string());
    assert!(one["metadata"]["creationTimestamp"].is_string());
    let one = ctl.json(&["-n", "team", "get", "networkpolicy", "allow-web"]);
    assert_eq!(one["metadata"]["namespace"], "team");
    assert_eq!(one["spec"]["ingress"][0]["destination"]["ports"][0], 80);
    let list = ctl.json(&["get", "bgppeers"]);
    assert_eq!(list["kind"], "List");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["items"][0]["spec"]["peerIP"], "192.0.2.1");
    let list = ctl.yaml(&["get", "gnp", "deny-all", "deny-all"]);
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    let list = ctl.yaml(&["get", "bgpconfigurations"]);
    assert_eq!(list["items"][0]["spec"]["asNumber"], 64512);

    // Applying the same file again changes nothing.
    let again = ctl.run(&["apply", "-f", &all]).out().to_string();
    assert_eq!(again.matches(" unchanged\n").count(), 5, "{again}");
    let rv_before = ctl.json(&["get", "pool", "pool-a"])["metadata"]["resourceVersion"].clone();
    assert_eq!(
        ctl.json(&["get", "pool", "pool-a"])["metadata"]["resourceVersion"],
        rv_before
    );

    // A change is configured in place: same uid, new resourceVersion
    // (a pool's CIDR and block size cannot change; its NAT can).
    let uid = ctl.json(&["get", "pool", "pool-a"])["metadata"]["uid"].clone();
    let changed = ctl.file(
        "changed.yaml",
        &ALL.replace("natOutgoing: true", "natOutgoing: false"),
    );
    let r = ctl.run(&["apply", "-f", &changed]).out().to_string();
    assert!(r.contains("ippool.tartan.dev/pool-a configured\n"), "{r}");
    assert_eq!(r.matches(" unchanged\n").count(), 4, "{r}");
    let now = ctl.json(&["get", "pool", "pool-a"]);
    assert_eq!(now["spec"]["natOutgoing"], false);
    assert_eq!(now["metadata"]["uid"], uid);
    assert_ne!(now["metadata"]["resourceVersion"], rv_before);

    // Labels: add, refuse to overwrite, overwrite, remove.
    let r = ctl.run(&["label", "pool", "pool-a", "env=dev", "tier=edge"]);
    assert_eq!(r.out(), "ippool.tartan.dev/pool-a labeled\n");
    let labels = |ctl: &Ctl| ctl.json(&["get", "pool", "pool-a"])["metadata"]["labels"].clone();
    assert_eq!(
        labels(&ctl),
        serde_json::json!({"env": "dev", "tier": "edge"})
    );
    let r = ctl.run(&["label", "pool", "pool-a", "env=prod"]);
    assert!(
        r.err().contains("already has the value \"dev\""),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("--overwrite"), "{}", r.stderr);
    assert_eq!(labels(&ctl)["env"], "dev");
    ctl.run(&["label", "pool", "pool-a", "env=prod", "--overwrite"])
        .out();
    assert_eq!(labels(&ctl)["env"], "prod");
    ctl.run(&["label", "pool", "pool-a", "tier-"]).out();
    assert_eq!(labels(&ctl), serde_json::json!({"env": "prod"}));
    // Selecting by label; re-applying a file without labels keeps them.
    let t = ctl
        .run(&["get", "pools", "-l", "env=prod"])
        .out()
        .to_string();
    assert_eq!(rows(&t).len(), 2, "{t}");
    let r = ctl.run(&["get", "pools", "-l", "env=dev"]);
    assert_eq!(r.out(), "");
    let r = ctl.run(&["apply", "-f", &changed]).out().to_string();
    assert_eq!(r.matches(" unchanged\n").count(), 5, "{r}");
    assert_eq!(labels(&ctl), serde_json::json!({"env": "prod"}));
    let r = ctl.run(&["label", "pool", "missing", "a=b"]);
    assert!(
        r.err().contains("IPPool \"missing\" not found"),
        "{}",
        r.stderr
    );

    // Delete by name, then by file (the rest), then nothing is left.
    let r = ctl.run(&["delete", "bgppeer", "tor-a"]);
    assert_eq!(r.out(), "bgppeer.tartan.dev/tor-a deleted\n");
    assert!(ctl.names("bgppeers").is_empty());
    let r = ctl.run(&["delete", "-f", &all]);
    assert!(
        r.err().contains("BGPPeer \"tor-a\" not found"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "2 of 5 deleted (ippool.tartan.dev/pool-a, bgpconfiguration.tartan.dev/default)"
        ),
        "{}",
        r.stderr
    );
    let r = ctl.run(&["delete", "-f", &all, "--ignore-not-found"]);
    assert_eq!(
        r.out(),
        "networkpolicy.tartan.dev/allow-web deleted
globalnetworkpolicy.tartan.dev/deny-all deleted
"
    );
    for kind in [
        "ippools",
        "bgpconfigurations",
        "bgppeers",
        "networkpolicies",
        "gnp",
    ] {
        assert!(ctl.names(kind).is_empty(), "{kind} left");
    }
}

const NETWORK_SETS: &str = "\
apiVersion: tartan.dev/v1
kind: NetworkSet
metadata:
  name: partners
  namespace: team
  labels: {role: partner}
spec:
  nets: [198.51.100.0/28, 203.0.113.7, '2001:db8:1::/48']
---
apiVersion: tartan.dev/v1
kind: GlobalNetworkSet
metadata:
  name: blocked
  labels: {list: blocked}
spec:
  nets: [192.0.2.0/24]
---
apiVersion: tartan.dev/v1
kind: NetworkPolicy
metadata:
  name: to-partners
  namespace: team
spec:
  types: [Egress]
  egress:
  - action: Allow
    destination: {selector: role == 'partner'}
  - action: Deny
    destination: {namespaceSelector: global(), selector: list == 'blocked'}
";

#[test]
fn network_sets_apply_get_and_delete() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let sets = ctl.file("sets.yaml", NETWORK_SETS);
    let r = ctl.run(&["apply", "-f", &sets]);
    assert_eq!(
        r.out(),
        "networkset.tartan.dev/partners created\n\
         globalnetworkset.tartan.dev/blocked created\n\
         networkpolicy.tartan.dev/to-partners created\n"
    );

    let r = ctl.run(&["get", "networksets"]);
    assert_eq!(r.out(), "");
    let t = ctl
        .run(&["get", "networksets", "-n", "team"])
        .out()
        .to_string();
    assert_eq!(header(&t), ["NAME", "NETS", "AGE"]);
    assert_eq!(
        rows(&t)[1][..2],
        ["partners", "198.51.100.0/28,203.0.113.7,2001:db8:1::/48"]
    );
    let t = ctl
        .run(&["get", "netset", "-A", "-o", "wide"])
        .out()
        .to_string();
    assert_eq!(
        header(&t),
        ["NAMESPACE", "NAME", "NETS", "COUNT", "AGE", "LABELS"]
    );
    assert_eq!(rows(&t)[1][..2], ["team", "partners"]);
    assert_eq!(rows(&t)[1][3], "3");
    assert_eq!(rows(&t)[1][5], "role=partner");
    for kind in ["globalnetworksets", "gns", "GlobalNetworkSet"] {
        let t = ctl.run(&["get", kind]).out().to_string();
        assert_eq!(header(&t), ["NAME", "NETS", "AGE"], "{kind}");
        assert_eq!(rows(&t)[1][..2], ["blocked", "192.0.2.0/24"], "{kind}");
    }
    let one = ctl.yaml(&["-n", "team", "get", "netsets", "partners"]);
    assert_eq!(one["kind"], "NetworkSet");
    assert_eq!(one["spec"]["nets"][2], "2001:db8:1::/48");
    let t = ctl
        .run(&["get", "gns", "-l", "list=blocked"])
        .out()
        .to_string();
    assert_eq!(rows(&t).len(), 2, "{t}");

    // Changed nets are configured; bad ones, and global() outside a
    // rule's namespaceSelector, are refused with the field named.
    let more = ctl.file(
        "more.yaml",
        &NETWORK_SETS.replace("[192.0.2.0/24]", "[192.0.2.0/24, 198.18.0.0/15]"),
    );
    let r = ctl.run(&["apply", "-f", &more]).out().to_string();
    assert!(
        r.contains("globalnetworkset.tartan.dev/blocked configured\n"),
        "{r}"
    );
    assert_eq!(r.matches(" unchanged\n").count(), 2, "{r}");
    let bad = ctl.file(
        "bad.yaml",
        &NETWORK_SETS
            .replace("203.0.113.7", "203.0.113.7/24")
            .replace("types: [Egress]", "selector: global()\n  types: [Egress]"),
    );
    let r = ctl.run(&["apply", "-f", &bad]);
    let e = r.err();
    assert!(
        e.contains("spec.nets[1]: \"203.0.113.7/24\" has host bits set"),
        "{e}"
    );
    assert!(
        e.contains(
            "spec.selector: \"global()\": global() is only allowed in a rule's namespaceSelector"
        ),
        "{e}"
    );
    assert!(e.contains("nothing was written"), "{e}");
    assert_eq!(
        ctl.json(&["get", "gns", "blocked"])["spec"]["nets"][1],
        "198.18.0.0/15"
    );

    let r = ctl.run(&["-n", "team", "delete", "netset", "partners"]);
    assert_eq!(r.out(), "networkset.tartan.dev/partners deleted\n");
    let r = ctl.run(&["delete", "-f", &sets, "--ignore-not-found"]);
    assert_eq!(
        r.out(),
        "globalnetworkset.tartan.dev/blocked deleted\n\
         networkpolicy.tartan.dev/to-partners deleted\n"
    );
    assert!(ctl.names("globalnetworksets").is_empty());
    assert!(ctl.names("netsets").is_empty());
}

const HOST_ENDPOINT: &str = "\
apiVersion: tartan.dev/v1
kind: HostEndpoint
metadata:
  name: node-a-eth0
  labels: {role: worker}
spec:
  node: node-a
  interfaceName: eth0
  expectedIPs: [192.0.2.10]
  ports:
  - {name: admin, protocol: TCP, port: 8443}
";

#[test]
fn host_endpoints_apply_get_check_and_delete() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let f = ctl.file("hep.yaml", HOST_ENDPOINT);
    let r = ctl.run(&["apply", "-f", &f]);
    assert_eq!(r.out(), "hostendpoint.tartan.dev/node-a-eth0 created\n");
    for kind in ["hostendpoints", "hep", "heps", "HostEndpoint"] {
        let t = ctl.run(&["get", kind, "-o", "wide"]).out().to_string();
        assert_eq!(
            header(&t),
            [
                "NAME",
                "NODE",
                "INTERFACE",
                "EXPECTEDIPS",
                "PORTS",
                "AGE",
                "LABELS"
            ],
            "{kind}"
        );
        assert_eq!(
            rows(&t)[1][..5],
            ["node-a-eth0", "node-a", "eth0", "192.0.2.10", "1"],
            "{kind}"
        );
    }
    assert_eq!(
        ctl.yaml(&["get", "hep", "node-a-eth0"])["spec"]["ports"][0]["port"],
        8443
    );
    let r = ctl.run(&["check"]);
    assert!(!r.out().contains("HostEndpoint"), "{}", r.out());
    let bad = ctl.file(
        "bad.yaml",
        &HOST_ENDPOINT
            .replace("interfaceName: eth0", "interfaceName: 'eth0:1'")
            .replace("  ports:", "  profiles: [kns.default]\n  ports:"),
    );
    let e = ctl.run(&["apply", "-f", &bad]).err().to_string();
    assert!(
        e.contains("spec.interfaceName: \"eth0:1\" is not an interface name"),
        "{e}"
    );
    assert!(
        e.contains("spec.profiles: profiles: Tartan has no Profile kind"),
        "{e}"
    );
    assert!(e.contains("nothing was written"), "{e}");
    let r = ctl.run(&["delete", "hep", "node-a-eth0"]);
    assert_eq!(r.out(), "hostendpoint.tartan.dev/node-a-eth0 deleted\n");
    assert!(ctl.names("hostendpoints").is_empty());
}

#[test]
fn bad_input_writes_nothing() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);

    let r = ctl.run(&["get", "frobnicators"]);
    let e = r.err();
    assert!(e.starts_with("error: unknown kind \"frobnicators\""), "{e}");
    assert!(e.contains("IPPool") && e.contains("BGPPeer"), "{e}");
    assert_eq!(e.lines().count(), 1, "one line: {e}");

    // Broken YAML in the second document: the first is not written either.
    let broken = ctl.file(
        "broken.yaml",
        &format!("{}---\napiVersion: tartan.dev/v1\nkind: IPPool\nmetadata:\n  name: [oops\nspec: {{}}\n", pool("first", "10.1.0.0/16", 26)),
    );
    let r = ctl.run(&["apply", "-f", &broken]);
    let e = r.err();
    assert!(
        e.contains("broken.yaml: document 2 (line 9): invalid YAML at line"),
        "{e}"
    );
    assert!(e.contains("nothing was written"), "{e}");
    assert!(ctl.names("pools").is_empty());

    // A valid document, then one that fails validation, then one with no
    // kind, then one of an unknown kind: all three reported, none written.
    let bad = ctl.file(
        "bad.yaml",
        &[
            pool("first", "10.1.0.0/16", 26),
            pool("second", "10.2.0.0/16", 99),
            "apiVersion: tartan.dev/v1\nmetadata: {name: third}\n".to_string(),
            "apiVersion: tartan.dev/v1\nkind: Frob\nmetadata: {name: fourth}\n".to_string(),
        ]
        .join("---\n"),
    );
    let r = ctl.run(&["apply", "-f", &bad]);
    let e = r.err();
    assert!(e.contains("document 2 (line 9)"), "{e}");
    assert!(e.contains("blockSize"), "validation names the field: {e}");
    assert!(e.contains("document 3 (line 17): kind is missing"), "{e}");
    assert!(
        e.contains("document 4 (line 20): unknown kind \"Frob\""),
        "{e}"
    );
    assert!(
        e.contains("3 of 4 documents are invalid; nothing was written"),
        "{e}"
    );
    assert!(ctl.names("pools").is_empty());

    // The same checks for create and from stdin.
    let r = ctl.run_stdin(&["create", "-f", "-"], &pool("s", "10.3.0.0/16", 99));
    assert!(r.err().contains("stdin: document 1"), "{}", r.stderr);
    assert!(ctl.names("pools").is_empty());
    let r = ctl.run_stdin(&["create", "-f", "-"], &pool("s", "10.3.0.0/16", 26));
    assert_eq!(r.out(), "ippool.tartan.dev/s created\n");

    // A JSON List is read like YAML documents.
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": "j1"},
         "spec": {"cidr": "10.4.0.0/16", "blockSize": 26}},
        {"apiVersion": "tartan.dev/v1", "kind": "IPPool", "metadata": {"name": "j2"},
         "spec": {"cidr": "10.5.0.0/16", "blockSize": 26}}
    ]});
    let f = ctl.file("list.json", &list.to_string());
    ctl.run(&["apply", "-f", &f]).out();
    assert_eq!(ctl.names("pools"), ["j1", "j2", "s"]);

    // The output of get -o yaml applies back unchanged.
    let out = ctl.run(&["get", "pools", "-o", "yaml"]).out().to_string();
    let f = ctl.file("out.yaml", &out);
    let r = ctl.run(&["apply", "-f", &f]).out().to_string();
    assert_eq!(r.matches(" unchanged\n").count(), 3, "{r}");
}

#[test]
fn conflicts_and_missing_objects() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let f = ctl.file("a.yaml", &pool("a", "10.1.0.0/16", 26));
    ctl.run(&["create", "-f", &f]).out();
    let r = ctl.run(&["create", "-f", &f]);
    assert!(
        r.err().contains("IPPool \"a\" already exists"),
        "{}",
        r.stderr
    );

    // Read, someone else writes, replace with what was read: conflict.
    let read = ctl
        .run(&["get", "pool", "a", "-o", "yaml"])
        .out()
        .to_string();
    let stale = ctl.file(
        "stale.yaml",
        &read.replace("blockSize: 26", "blockSize: 26\n  disabled: true"),
    );
    let newer = ctl.file(
        "newer.yaml",
        &format!("{}  natOutgoing: true\n", pool("a", "10.1.0.0/16", 26)),
    );
    assert_eq!(
        ctl.run(&["replace", "-f", &newer]).out(),
        "ippool.tartan.dev/a replaced\n"
    );
    let r = ctl.run(&["replace", "-f", &stale]);
    let e = r.err();
    assert!(
        e.contains("IPPool \"a\" has been changed by someone else"),
        "{e}"
    );
    assert!(e.contains("read it again") && e.contains("retry"), "{e}");
    let now = ctl.json(&["get", "pool", "a"]);
    assert_eq!(now["spec"]["natOutgoing"], true);
    assert_ne!(now["spec"]["disabled"], true);
    // apply with the stale resourceVersion is refused the same way.
    let r = ctl.run(&["apply", "-f", &stale]);
    assert!(r.err().contains("changed by someone else"), "{}", r.stderr);

    // Replacing something absent fails; so does getting or deleting it.
    let absent = ctl.file("b.yaml", &pool("b", "10.2.0.0/16", 26));
    let r = ctl.run(&["replace", "-f", &absent]);
    assert!(r.err().contains("IPPool \"b\" not found"), "{}", r.stderr);
    let r = ctl.run(&["get", "ippool", "b"]);
    assert_eq!(r.err(), "error: IPPool \"b\" not found\n");
    let r = ctl.run(&["-n", "team", "get", "tnp", "x", "-o", "yaml"]);
    assert!(
        r.err()
            .contains("NetworkPolicy \"x\" in namespace \"team\" not found"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stdout, "");
    // Found and missing together: the found one is shown, the exit fails.
    let r = ctl.run(&["get", "ippool", "a", "b"]);
    assert!(r.err().contains("IPPool \"b\" not found"));
    assert!(r.stdout.contains("\na "), "{}", r.stdout);
    let r = ctl.run(&["delete", "ippool", "b"]);
    assert_eq!(r.err(), "error: IPPool \"b\" not found\n");
    let r = ctl.run(&["delete", "ippool", "b", "--ignore-not-found"]);
    assert_eq!(r.out(), "");
}

#[test]
fn a_failed_write_stops_the_run_unless_told_to_go_on() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let f = ctl.file("taken.yaml", &pool("taken", "10.9.0.0/16", 26));
    ctl.run(&["create", "-f", &f]).out();

    // The second object exists already: create stops there.
    let three = ctl.file(
        "three.yaml",
        &[
            pool("one", "10.1.0.0/16", 26),
            pool("taken", "10.9.0.0/16", 26),
            pool("three", "10.3.0.0/16", 26),
        ]
        .join("---\n"),
    );
    let r = ctl.run(&["create", "-f", &three]);
    let e = r.err();
    assert!(
        e.contains("ippool.tartan.dev/taken: IPPool \"taken\" already exists"),
        "{e}"
    );
    assert!(e.contains("1 of 3 created (ippool.tartan.dev/one)"), "{e}");
    assert!(
        e.contains("not created: ippool.tartan.dev/taken, ippool.tartan.dev/three"),
        "{e}"
    );
    assert_eq!(r.stdout, "ippool.tartan.dev/one created\n");
    assert_eq!(ctl.names("pools"), ["one", "taken"]);

    // Going on: the third is written, the failure reported, exit non-zero.
    ctl.run(&["delete", "pool", "one"]).out();
    let r = ctl.run(&["create", "-f", &three, "--continue-on-error"]);
    let e = r.err();
    assert!(
        e.contains("error: ippool.tartan.dev/taken: IPPool \"taken\" already exists"),
        "{e}"
    );
    assert!(e.contains("1 of 3 failed (ippool.tartan.dev/taken)"), "{e}");
    assert_eq!(
        r.stdout,
        "ippool.tartan.dev/one created\nippool.tartan.dev/three created\n"
    );
    assert_eq!(ctl.names("pools"), ["one", "taken", "three"]);

    // apply: a stale resourceVersion in the middle document.
    let rv = ctl.json(&["get", "pool", "taken"])["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    ctl.run(&["label", "pool", "taken", "moved=on"]).out();
    let stale_taken = format!("{}  disabled: true\n", pool("taken", "10.9.0.0/16", 26)).replace(
        "  name: taken\n",
        &format!("  name: taken\n  resourceVersion: \"{rv}\"\n"),
    );
    let mixed = ctl.file(
        "mixed.yaml",
        &[
            pool("four", "10.4.0.0/16", 26),
            stale_taken,
            pool("five", "10.5.0.0/16", 26),
        ]
        .join("---\n"),
    );
    let r = ctl.run(&["apply", "-f", &mixed]);
    assert!(
        r.err()
            .contains("not applied: ippool.tartan.dev/taken, ippool.tartan.dev/five"),
        "{}",
        r.stderr
    );
    assert!(ctl.names("pools").contains(&"four".to_string()));
    assert!(!ctl.names("pools").contains(&"five".to_string()));
    let r = ctl.run(&["apply", "-f", &mixed, "--continue-on-error"]);
    assert!(r.err().contains("changed by someone else"), "{}", r.stderr);
    assert!(
        r.stdout.contains("ippool.tartan.dev/five created"),
        "{}",
        r.stdout
    );
    assert_ne!(
        ctl.json(&["get", "pool", "taken"])["spec"]["disabled"],
        true
    );
}

#[test]
fn an_unreachable_datastore_fails_within_the_timeout() {
    // A port nobody listens on.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let ctl = Ctl::new(format!("etcd://127.0.0.1:{port}"));
    for args in [
        vec!["--timeout", "3", "get", "pools"],
        vec!["--timeout", "3", "delete", "pool", "x"],
    ] {
        let start = Instant::now();
        let r = ctl.run(&args);
        let took = start.elapsed();
        assert!(took < Duration::from_secs(3 + 5), "{args:?} took {took:?}");
        let e = r.err();
        assert!(e.starts_with("error: cannot reach the datastore"), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // version still works, with a warning.
    let r = ctl.run(&["--timeout", "2", "version"]);
    assert_eq!(
        r.out(),
        format!("tartanctl {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert!(r.stderr.starts_with("warning: datastore"), "{}", r.stderr);
}

#[test]
fn completion_and_version_need_no_datastore() {
    let out = tartanctl()
        .args(["completion", "bash"])
        .output()
        .expect("run");
    let script = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        script.contains("tartanctl") && script.contains("apply"),
        "{script}"
    );
    let out = tartanctl().arg("version").output().expect("run");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("tartanctl {}\n", env!("CARGO_PKG_VERSION"))
    );
    assert!(out.stderr.is_empty());
    // Resource commands without a datastore say how to give one.
    let out = tartanctl().args(["get", "pools"]).output().expect("run");
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("--datastore") && e.contains("TARTAN_DATASTORE"),
        "{e}"
    );
}

#[test]
fn version_reports_a_reachable_datastore() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let f = ctl.file("p.yaml", &pool("p", "10.1.0.0/16", 26));
    ctl.run(&["apply", "-f", &f]).out();
    let r = ctl.run(&["version"]);
    let out = r.out();
    assert!(
        out.contains(&format!("datastore: {}", etcd.datastore_spec())),
        "{out}"
    );
    assert!(out.contains("1 IP pool"), "{out}");
}
