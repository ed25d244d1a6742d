//! The compiler's tests, by topic; this file holds the fixtures they
//! share (a small cluster of endpoints in namespaces x and y, policies
//! from their JSON, snapshot files).

mod cache;
mod changes;
mod guards;
mod hosts;
mod net_sets;
mod tables;

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::networking::v1::NetworkPolicy as KubePolicy;
use serde_json::json;
use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};

use super::render;
use super::*;
use crate::ir::{self, Policy};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ep(ns: &str, pod: &str, ip: &str, iface: Option<&str>) -> Endpoint {
    Endpoint {
        namespace: ns.into(),
        labels: labels(&[("pod", pod)]).into(),
        addrs: vec![ip.parse().unwrap()],
        ports: [NamedPort {
            name: "serve-80-tcp".into(),
            protocol: 6,
            port: 80,
        }]
        .into(),
        interface: iface.map(String::from),
    }
}

/// x/a and x/b on this node, y/a elsewhere.
fn endpoints() -> Vec<Endpoint> {
    vec![
        ep("x", "a", "10.0.0.1", Some("tarxa")),
        ep("x", "b", "10.0.0.2", Some("tarxb")),
        ep("y", "a", "10.0.1.1", None),
    ]
}

fn namespaces() -> NamespaceLabels {
    ["x", "y"]
        .iter()
        .map(|n| (n.to_string(), labels(&[(NAMESPACE_NAME_LABEL, n)])))
        .collect()
}

fn kube(spec: serde_json::Value) -> Policy {
    let np: KubePolicy = serde_json::from_value(json!({
        "metadata": {"name": "allow", "namespace": "x"}, "spec": spec
    }))
    .unwrap();
    ir::from_kubernetes(&crate::k8s::from_network_policy(&np).unwrap())
}

fn tartan_ns(spec: serde_json::Value) -> Policy {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny", "namespace": "x"}, "spec": spec
    }))
    .unwrap();
    crate::tartan::from_network_policy(&np).unwrap()
}

fn global(name: &str, spec: serde_json::Value) -> Policy {
    let g: GlobalNetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    crate::tartan::from_global_network_policy(&g).unwrap()
}

/// The `nftables` crate holds a fib expression's flags in a HashSet, so
/// their order in the JSON changes from run to run (nft reads them as a
/// set): sorted here so that the comparison does not.
fn sort_fib_flags(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(flags)) =
                m.get_mut("fib").and_then(|f| f.get_mut("flags"))
            {
                flags.sort_by_key(|f| f.to_string());
            }
            m.values_mut().for_each(sort_fib_flags);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(sort_fib_flags),
        _ => {}
    }
}

/// Compare with the file in `policy/tests/snapshots/`; `UPDATE_SNAPSHOTS=1`
/// writes it instead.
fn snapshot(name: &str, value: &serde_json::Value) {
    let mut value = value.clone();
    sort_fib_flags(&mut value);
    let value = &value;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {path:?}; run with UPDATE_SNAPSHOTS=1"));
    assert!(
        want == text,
        "{name}: the compiled output changed; if that is meant, run with UPDATE_SNAPSHOTS=1 and review the diff\n{text}"
    );
}

/// Prod-hardening policies: each a Log on UDP `log_port`, a Deny on TCP
/// 22, a Deny from a network.
fn hardening(i: u16, log_port: u16) -> Policy {
    global(
        &format!("harden-{i}"),
        json!({"order": 100 + i, "ingress": [
            {"action": "Log", "protocol": "UDP", "destination": {"ports": [log_port]}},
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [22]}},
            {"action": "Deny", "source": {"nets": [format!("192.0.2.{i}/32")]}}
        ]}),
    )
}
