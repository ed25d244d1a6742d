//! The policies of the generated cluster, drawn one by one: Kubernetes
//! NetworkPolicies, Tartan NetworkPolicies and GlobalNetworkPolicies, and
//! the bench policies the measured connection walks.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use serde_json::{Value, json};
use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};
use tartan_felix::calc::policy::Converted;
use tartan_felix::calc::state::Labels;

use super::model::*;

pub(super) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn kube(v: Value) -> Converted {
    let np: k8s_openapi::api::networking::v1::NetworkPolicy =
        serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::k8s::from_network_policy(&np)
        .map(|m| tartan_policy::ir::from_kubernetes(&m))
        .map_err(|e| e.to_string())
}

pub(super) fn tartan(v: Value) -> Converted {
    let np: NetworkPolicy = serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::tartan::from_network_policy(&np).map_err(|e| e.to_string())
}

pub(super) fn global(v: Value) -> Converted {
    let g: GlobalNetworkPolicy = serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::tartan::from_global_network_policy(&g).map_err(|e| e.to_string())
}

pub(super) fn knp(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

pub(super) fn peer(rng: &mut Rng, ns: &Ns, all: &[Ns]) -> Value {
    match rng.below(10) {
        0..=3 => json!({"podSelector": {"matchLabels": {"app": rng.pick(&ns.apps)}}}),
        4 => json!({"namespaceSelector": {"matchLabels": {"purpose": "monitoring"}},
                    "podSelector": {"matchLabels": {"app": "prometheus"}}}),
        5 => {
            let other = rng.pick(all);
            json!({"namespaceSelector": {"matchLabels": {"team": other.labels["team"]}}})
        }
        6 => json!({"namespaceSelector": {"matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "staging"]}]},
                    "podSelector": {"matchLabels": {"tier": "frontend"}}}),
        7 => json!({"ipBlock": {"cidr": "172.16.0.0/12",
                    "except": [format!("172.16.{}.0/24", rng.below(256))]}}),
        8 => json!({"ipBlock": {"cidr": format!("192.168.{}.0/24", rng.below(256))}}),
        _ => json!({"podSelector": {"matchLabels": {"tier": "frontend"}}}),
    }
}

pub(super) fn port(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 | 1 => json!({"protocol": "TCP", "port": 8080}),
        2 => json!({"port": "http"}),
        3 => json!({"port": "metrics"}),
        4 => json!({"protocol": "TCP", "port": 443}),
        5 => json!({"protocol": "UDP", "port": 53}),
        6 => json!({"protocol": "TCP", "port": 30000, "endPort": 32767}),
        _ => json!({"port": "grpc"}),
    }
}

pub(super) fn kube_random(rng: &mut Rng, k: usize, ns: &Ns, all: &[Ns]) -> Value {
    let app = rng.pick(&ns.apps).clone();
    if rng.below(12) == 0 {
        return knp(
            &ns.name,
            &format!("default-deny-{k}"),
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        );
    }
    let mut selector = json!({"matchLabels": {"app": app}});
    if rng.chance(30) {
        selector["matchExpressions"] =
            json!([{"key": "version", "operator": "In", "values": ["v1", "v2"]}]);
    }
    let ingress: Vec<Value> = (0..1 + rng.below(3))
        .map(|_| {
            let from: Vec<Value> = (0..1 + rng.below(2)).map(|_| peer(rng, ns, all)).collect();
            let ports: Vec<Value> = (0..rng.below(3)).map(|_| port(rng)).collect();
            let mut r = json!({"from": from});
            if !ports.is_empty() {
                r["ports"] = json!(ports);
            }
            r
        })
        .collect();
    let mut spec = json!({"podSelector": selector, "ingress": ingress});
    if rng.chance(30) {
        spec["policyTypes"] = json!(["Ingress", "Egress"]);
        spec["egress"] = json!([
            {"to": [{"namespaceSelector": {"matchLabels": {"purpose": "dns"}}}],
             "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
            {"to": [{"podSelector": {"matchLabels": {"app": "db"}}}],
             "ports": [{"protocol": "TCP", "port": 5432}]},
            {"to": [{"ipBlock": {"cidr": "0.0.0.0/0",
                     "except": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]}}],
             "ports": [{"protocol": "TCP", "port": 443}]}
        ]);
    }
    knp(&ns.name, &format!("{app}-{k}"), spec)
}

pub(super) fn tartan_random(rng: &mut Rng, k: usize, ns: &Ns) -> Value {
    let app = rng.pick(&ns.apps).clone();
    let other = rng.pick(&ns.apps).clone();
    let mut ingress = vec![
        json!({"action": "Log", "protocol": "TCP", "destination": {"ports": [22]}}),
        json!({"action": "Deny", "source": {"nets": [format!("192.0.2.{}/32", rng.below(256))]}}),
        json!({"action": "Allow", "protocol": "TCP",
               "source": {"selector": format!("app == '{other}'")},
               "destination": {"ports": ["http", 8443]}}),
    ];
    if rng.chance(40) {
        ingress.push(json!({"action": "Allow", "protocol": "TCP",
            "source": {"namespaceSelector": "purpose == 'monitoring'"},
            "destination": {"ports": ["metrics"]}}));
    }
    let mut spec = json!({"selector": format!("app == '{app}'"), "ingress": ingress});
    if rng.chance(70) {
        spec["order"] = json!(400 + rng.below(100));
    }
    if rng.chance(30) {
        spec["egress"] = json!([
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [25]}},
            {"action": "Allow", "destination": {"selector": format!("app == '{other}'"),
                                                  "notSelector": "tier == 'data'"}}
        ]);
    }
    json!({"apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns.name, "name": format!("t-{app}-{k}")}, "spec": spec})
}

pub(super) fn global_policy(rng: &mut Rng, i: usize) -> Value {
    let bad = |rng: &mut Rng| {
        vec![
            format!("198.51.100.{}/32", rng.below(256)),
            format!("203.0.113.{}/32", rng.below(256)),
        ]
    };
    let (name, spec) = if i == 0 {
        // The cluster's baseline: what no team allowed passes on to the
        // Kubernetes policies.
        (
            "baseline".to_string(),
            json!({"order": 900, "selector": "all()",
                "ingress": [
                    {"action": "Log", "protocol": "UDP", "destination": {"ports": [514]}},
                    {"action": "Deny", "source": {"nets": bad(rng)}},
                    {"action": "Pass"}],
                "egress": [
                    {"action": "Deny", "destination": {"nets": bad(rng)}},
                    {"action": "Pass"}]}),
        )
    } else {
        match i % 4 {
            0 => (
                format!("deny-list-{i}"),
                json!({"order": 100 + i, "selector": "all()",
                    "ingress": [{"action": "Deny", "source": {"nets": bad(rng)}}],
                    "egress": [{"action": "Deny", "destination": {"nets": bad(rng)}}]}),
            ),
            1 => (
                format!("data-guard-{i}"),
                json!({"order": 200 + i, "selector": "tier == 'data'",
                    "ingress": [
                        {"action": "Log", "protocol": "TCP", "destination": {"ports": [5432, 6379]},
                         "source": {"namespaceSelector": "env == 'dev'"}},
                        {"action": "Deny", "source": {"namespaceSelector": "env == 'dev'"}}]}),
            ),
            2 => (
                format!("prod-hardening-{i}"),
                json!({"order": 300 + i, "selector": "has(app)",
                    "namespaceSelector": "env == 'prod'",
                    "ingress": [
                        {"action": "Log", "protocol": "UDP", "destination": {"ports": [161]}},
                        {"action": "Deny", "protocol": "TCP", "destination": {"ports": [22, 23]}},
                        {"action": "Deny", "source": {"nets": bad(rng)}}]}),
            ),
            _ => (
                format!("quarantine-{i}"),
                json!({"order": 50 + i, "selector": "quarantine == 'true'",
                    "types": ["Ingress", "Egress"]}),
            ),
        }
    };
    json!({"apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
           "metadata": {"name": name}, "spec": spec})
}

/// The bench namespace's Kubernetes policies selecting the server: rules
/// that do not match the client, and in the last one (by name) a final
/// rule that allows it, to the server's named port `http`.
pub(super) fn bench_policy(index: usize, last: bool, with_final: bool) -> Value {
    let mut ingress = vec![
        json!({"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
               "ports": [{"protocol": "TCP", "port": 8080}]}),
        json!({"from": [{"namespaceSelector": {"matchLabels": {"purpose": "monitoring"}}}],
               "ports": [{"port": "metrics"}]}),
        json!({"from": [{"ipBlock": {"cidr": "172.16.0.0/12",
                                     "except": [format!("172.16.{index}.0/24")]}}],
               "ports": [{"protocol": "TCP", "port": 443}]}),
        json!({"from": [{"podSelector": {"matchLabels": {"app": "cart"}}},
                        {"namespaceSelector": {"matchLabels": {"team": "payments"}}}],
               "ports": [{"port": "http"}, {"protocol": "TCP", "port": 9000 + index}]}),
    ];
    if last && with_final {
        ingress.push(
            json!({"from": [{"podSelector": {"matchLabels": {"app": "loadgen"}}}],
                            "ports": [{"port": "http"}]}),
        );
    }
    knp(
        BENCH_NS,
        &format!("bench-allow-{index:02}"),
        json!({"podSelector": {"matchLabels": {"app": "api"}}, "ingress": ingress}),
    )
}

pub(super) fn bench_tartan(i: usize) -> Value {
    let spec = if i == 0 {
        json!({"order": 500, "selector": "app == 'api'", "ingress": [
            {"action": "Deny", "source": {"nets": ["192.0.2.0/24"]}},
            {"action": "Log", "protocol": "UDP", "destination": {"ports": [53]}}]})
    } else {
        json!({"order": 600, "selector": "app == 'api'", "ingress": [
            {"action": "Deny", "protocol": "TCP",
             "source": {"selector": "app == 'cache'"}, "destination": {"ports": [8080]}}]})
    };
    json!({"apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": BENCH_NS, "name": format!("bench-guard-{i}")},
           "spec": spec})
}

pub(super) fn insert(
    map: &mut BTreeMap<String, Converted>,
    key: String,
    c: Converted,
) -> Result<()> {
    if let Err(e) = &c {
        bail!("generated policy {key} does not convert: {e}");
    }
    map.insert(key, c);
    Ok(())
}
