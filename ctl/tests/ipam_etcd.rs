//! `tartanctl ipam show/check/release` against a real etcd holding
//! allocations made by Tartan's IPAM on two nodes.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

use tartan_api::resources::{IpPool, IpPoolSpec, WorkloadEndpoint, WorkloadEndpointSpec};
use tartan_api::store::connect;
use tartan_api::store::typed::TypedStore;
use tartan_cni::ipam::{Ipam, IpamConfig};
use tartan_lab::etcd::EtcdCluster;

fn ctl(datastore: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tartanctl"))
        .env_remove("TARTAN_DATASTORE")
        .arg("--datastore")
        .arg(datastore)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wep(pod: &str, container: &str, node: &str, ip: &str) -> WorkloadEndpoint {
    let mut w = WorkloadEndpoint::new(
        &format!("{pod}.eth0"),
        WorkloadEndpointSpec {
            node: node.into(),
            pod: pod.into(),
            container_id: container.into(),
            endpoint: "eth0".into(),
            interface_name: "tar0123456789a".into(),
            mac: None,
            ip_networks: vec![format!("{ip}/32")],
            ports: vec![],
        },
    );
    w.metadata.namespace = Some("default".into());
    w
}

#[test]
fn show_check_and_release() {
    let etcd = EtcdCluster::single().unwrap();
    let spec = etcd.datastore_spec();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(connect(&spec, None)).unwrap();
    rt.block_on(store.create_typed(&IpPool::new("default", IpPoolSpec::new("10.60.0.0/16"))))
        .unwrap();
    let n1 = Ipam::new(store.clone(), IpamConfig::new("node-1"));
    let n2 = Ipam::new(store.clone(), IpamConfig::new("node-2"));
    let a = rt.block_on(n1.assign("net.a", &BTreeMap::new())).unwrap()[0].addr();
    let b = rt.block_on(n1.assign("net.b", &BTreeMap::new())).unwrap()[0].addr();
    let c = rt.block_on(n2.assign("net.c", &BTreeMap::new())).unwrap()[0].addr();
    // Pods a and c exist; b's pod is gone (a leak); d has no allocation.
    for w in [
        wep("pa", "a", "node-1", &a.to_string()),
        wep("pc", "c", "node-2", &c.to_string()),
        wep("pd", "d", "node-2", "10.60.9.9"),
    ] {
        rt.block_on(store.create_typed(&w)).unwrap();
    }

    let (ok, out, err) = ctl(&spec, &["ipam", "show"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("POOL"), "{out}");
    assert!(
        lines[1].starts_with("default") && lines[1].contains("10.60.0.0/16"),
        "{out}"
    );
    assert!(
        lines[1].split_whitespace().nth(3) == Some("3"),
        "in use: {out}"
    );
    assert!(
        out.contains("10.60.0.0/26") && out.contains("node-1"),
        "{out}"
    );
    assert!(
        out.contains("10.60.0.64/26") && out.contains("node-2"),
        "{out}"
    );
    let per_node: Vec<Vec<&str>> = out
        .lines()
        .skip_while(|l| !l.starts_with("NODE"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        per_node,
        [
            vec!["node-1", "1", "2", "64"],
            vec!["node-2", "1", "1", "64"]
        ]
    );
    let (ok, json, _) = ctl(&spec, &["ipam", "show", "-o", "json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["inUse"], 3);
    assert_eq!(v[0]["blocks"].as_array().unwrap().len(), 2);

    let (ok, out, err) = ctl(&spec, &["ipam", "check"]);
    assert!(!ok, "check must fail when it finds problems");
    assert!(err.contains("2 problem(s) found"), "{err}");
    assert!(
        out.contains(&format!("{b}: allocated to net.b but no pod uses it")),
        "{out}"
    );
    assert!(
        out.contains("10.60.9.9: used by pod default/pd (container d) but not allocated to it"),
        "{out}"
    );

    let (ok, out, err) = ctl(&spec, &["ipam", "release", "--ip", &b.to_string()]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("released {b} (held by net.b)"));
    let (ok, _, err) = ctl(&spec, &["ipam", "release", "--ip", &b.to_string()]);
    assert!(!ok && err.contains("is not allocated"), "{err}");
    let (ok, _, err) = ctl(&spec, &["ipam", "release", "--ip", "not-an-ip"]);
    assert!(!ok && err.contains("not an IP address"), "{err}");
    rt.block_on(store.delete_typed::<WorkloadEndpoint>(Some("default"), "pd.eth0", None))
        .unwrap();
    let (ok, out, err) = ctl(&spec, &["ipam", "check"]);
    assert!(ok, "{out}{err}");
    assert!(
        out.starts_with("ok: 2 allocations in 2 blocks, 2 pod interfaces"),
        "{out}"
    );

    let (ok, out, err) = ctl(&spec, &["ipam", "release", "--handle", "net.c"]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), format!("released {c} (held by net.c)"));
    let (ok, _, err) = ctl(&spec, &["ipam", "release"]);
    assert!(
        !ok && err.contains("exactly one of --ip and --handle"),
        "{err}"
    );
}
