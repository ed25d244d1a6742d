//! Policy benchmark (issue 6, point 5): a synthetic cluster of pods,
//! namespaces and policies (Kubernetes NetworkPolicies, Tartan
//! NetworkPolicies and GlobalNetworkPolicies), compiled by felix's
//! calculation (`calc::policy::desired`) and written by felix's driver
//! (`PolicyDriver`, the `nft` binary) in a fresh network namespace:
//! - full sync: compile + first whole-table write;
//! - one policy changed: compile + difference write;
//! - one pod relabelled into another profile: compile + difference write;
//! - the periodic drift check (`apply(…, check = true)` with nothing to do);
//! - TCP connect + first byte between two pods behind the node, the
//!   receiver's ingress walking the ruleset's policy chains to the last
//!   rule of the last one, beside the same pods with no policy at all.
//!
//! The cluster is generated from a seed: the same options give the same
//! objects. Only IPv4 pod addresses.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tartan_api::resources::{
    EndpointPort, GlobalNetworkPolicy, NetworkPolicy, WorkloadEndpointSpec,
};
use tartan_felix::calc::policy::{Converted, desired, desired_cached};
use tartan_felix::calc::state::{Labels, State};
use tartan_felix::dataplane::nft::{Via, Written};
use tartan_felix::dataplane::policy::PolicyDriver;
use tartan_policy::compile::CompileCache;
use tartan_policy::compile::{Ruleset, hash, render};

use crate::benchkit::{
    children_peak_rss_kib, connections, in_ns, interleaved, median_f, median_us, ms, paired_ratio,
    serve, wake, wire_pod,
};
use crate::bgpload::Environment;
use crate::netns::Netns;
use crate::storebench::quantile;

pub struct PolicyBenchOptions {
    /// Policies in all (Kubernetes, Tartan namespaced and global).
    pub policies: usize,
    pub pods: usize,
    pub namespaces: usize,
    /// One pod in this many is on the benchmarked node.
    pub local_every: usize,
    pub runs: usize,
    /// Connections per latency run (0: no latency measurement).
    pub connections: usize,
    pub seed: u64,
}

impl Default for PolicyBenchOptions {
    fn default() -> Self {
        PolicyBenchOptions {
            policies: 2000,
            pods: 500,
            namespaces: 50,
            local_every: 10,
            runs: 9,
            connections: 2000,
            seed: 1,
        }
    }
}

// ---------------------------------------------------------------------
// The synthetic cluster.

/// splitmix64: small, deterministic, good enough to shape a cluster.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// (app, tier, http port) of ordinary workloads.
const APPS: [(&str, &str, u16); 10] = [
    ("web", "frontend", 80),
    ("orders", "backend", 8080),
    ("worker", "batch", 8080),
    ("cache", "data", 6379),
    ("db", "data", 5432),
    ("auth", "backend", 8080),
    ("search", "backend", 9200),
    ("cart", "backend", 8080),
    ("billing", "backend", 8080),
    ("notify", "backend", 8080),
];
const TEAMS: [&str; 10] = [
    "payments", "search", "catalog", "checkout", "identity", "media", "ads", "ml", "data", "infra",
];
const ENVS: [&str; 3] = ["prod", "staging", "dev"];
/// The benchmark's own namespace, with the measured client and server.
pub const BENCH_NS: &str = "bench";
const SERVER_PORT: u16 = 8080;

struct Ns {
    name: String,
    labels: Labels,
    apps: Vec<String>,
}

/// One pod as generated.
#[derive(Clone)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub addr: Ipv4Addr,
    /// The host end of its veth when it is on the benchmarked node.
    pub interface: Option<String>,
}

/// What was generated, in felix's state, and the changes to time.
pub struct Synthetic {
    pub state: State,
    pub node: String,
    pub namespaces: usize,
    pub pods: usize,
    pub local_pods: usize,
    pub kube: usize,
    pub tartan: usize,
    pub global: usize,
    pub client: PodInfo,
    pub server: PodInfo,
    /// The Kubernetes policy that changes: key, and its two versions.
    pub change_key: String,
    pub change: [Converted; 2],
    /// The pod relabelled: `namespace/name`, and its two label sets.
    pub relabel_key: String,
    pub relabel: [Labels; 2],
    /// The last bench policy, and a copy without its final rule.
    pub last_bench_key: String,
    pub last_bench_cut: Converted,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn kube(v: Value) -> Converted {
    let np: k8s_openapi::api::networking::v1::NetworkPolicy =
        serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::k8s::from_network_policy(&np)
        .map(|m| tartan_policy::ir::from_kubernetes(&m))
        .map_err(|e| e.to_string())
}

fn tartan(v: Value) -> Converted {
    let np: NetworkPolicy = serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::tartan::from_network_policy(&np).map_err(|e| e.to_string())
}

fn global(v: Value) -> Converted {
    let g: GlobalNetworkPolicy = serde_json::from_value(v).map_err(|e| e.to_string())?;
    tartan_policy::tartan::from_global_network_policy(&g).map_err(|e| e.to_string())
}

fn knp(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
           "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

fn peer(rng: &mut Rng, ns: &Ns, all: &[Ns]) -> Value {
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

fn port(rng: &mut Rng) -> Value {
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

fn kube_random(rng: &mut Rng, k: usize, ns: &Ns, all: &[Ns]) -> Value {
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

fn tartan_random(rng: &mut Rng, k: usize, ns: &Ns) -> Value {
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

fn global_policy(rng: &mut Rng, i: usize) -> Value {
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
fn bench_policy(index: usize, last: bool, with_final: bool) -> Value {
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

fn bench_tartan(i: usize) -> Value {
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

fn insert(map: &mut BTreeMap<String, Converted>, key: String, c: Converted) -> Result<()> {
    if let Err(e) = &c {
        bail!("generated policy {key} does not convert: {e}");
    }
    map.insert(key, c);
    Ok(())
}

/// The cluster for `o`, as felix would hold it on `node-1`.
pub fn generate(o: &PolicyBenchOptions) -> Result<Synthetic> {
    if o.pods < 8 || o.policies < 8 {
        bail!("at least 8 pods and 8 policies");
    }
    let mut rng = Rng(o.seed);
    let n_ns = o.namespaces.min(o.pods / 3).max(4);
    let mut nss = Vec::new();
    for i in 0..n_ns {
        let (name, l, apps): (String, Labels, Vec<String>) = match i {
            0 => (
                BENCH_NS.into(),
                labels(&[("team", "bench"), ("env", "prod")]),
                APPS.iter().map(|a| a.0.to_string()).collect(),
            ),
            1 => (
                "monitoring".into(),
                labels(&[
                    ("purpose", "monitoring"),
                    ("team", "infra"),
                    ("env", "prod"),
                ]),
                vec!["prometheus".into()],
            ),
            2 => (
                "dns".into(),
                labels(&[("purpose", "dns"), ("team", "infra"), ("env", "prod")]),
                vec!["coredns".into()],
            ),
            _ => {
                let team = TEAMS[i % TEAMS.len()];
                let env = ENVS[i % ENVS.len()];
                let first = rng.below(APPS.len());
                (
                    format!("{team}-{env}-{i:02}"),
                    labels(&[("team", team), ("env", env)]),
                    (0..5)
                        .map(|k| APPS[(first + k) % APPS.len()].0.to_string())
                        .collect(),
                )
            }
        };
        let mut l = l;
        l.insert(
            tartan_policy::compile::NAMESPACE_NAME_LABEL.into(),
            name.clone(),
        );
        nss.push(Ns {
            name,
            labels: l,
            apps,
        });
    }
    let node = "node-1".to_string();
    let mut state = State::default();
    for ns in &nss {
        state
            .namespaces
            .insert(format!("/{}", ns.name), ns.labels.clone());
    }
    // Pods: contiguous per namespace; which are local is drawn.
    let mut order: Vec<usize> = (0..o.pods).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut local = vec![false; o.pods];
    for &g in order.iter().take(o.pods / o.local_every.max(1)) {
        local[g] = true;
    }
    let mut client = None;
    let mut server = None;
    let mut local_pods = Vec::new();
    for (g, &is_drawn) in local.iter().enumerate() {
        let ns_i = g * n_ns / o.pods;
        let first = (ns_i * o.pods).div_ceil(n_ns);
        let j = g - first;
        let ns = &nss[ns_i];
        let (app, tier, http) = match (ns_i, j) {
            (0, 0) => ("loadgen".to_string(), "frontend", 8080),
            (0, 1) => ("api".to_string(), "backend", SERVER_PORT),
            (1, _) => ("prometheus".to_string(), "monitoring", 9090),
            (2, _) => ("coredns".to_string(), "infra", 8080),
            _ => {
                let a = &ns.apps[(j / 2) % ns.apps.len()];
                let (_, tier, port) = APPS
                    .iter()
                    .find(|x| x.0 == a)
                    .copied()
                    .unwrap_or(("", "backend", 8080));
                (a.clone(), tier, port)
            }
        };
        let is_bench = ns_i == 0 && j < 2;
        let version = if rng.chance(80) { "v1" } else { "v2" };
        let name = format!("{app}-{}-{j}", &hash(&format!("{}/{app}", ns.name))[..5]);
        let mut l = labels(&[("app", &app), ("tier", tier), ("version", version)]);
        l.insert(
            "pod-template-hash".into(),
            hash(&format!("{}/{app}/{version}", ns.name))[..10].to_string(),
        );
        let addr = Ipv4Addr::new(10, 244, (g / 250) as u8, (g % 250 + 2) as u8);
        let is_local = is_drawn || is_bench;
        let interface = is_local.then(|| match (ns_i, j) {
            (0, 0) => "tarbcli".to_string(),
            (0, 1) => "tarbsrv".to_string(),
            _ => format!("tar{}", &hash(&format!("{}/{name}", ns.name))[..11]),
        });
        let mut ports = vec![
            EndpointPort {
                name: "http".into(),
                protocol: "TCP".into(),
                port: http,
            },
            EndpointPort {
                name: "metrics".into(),
                protocol: "TCP".into(),
                port: 9090,
            },
        ];
        if app == "orders" || app == "search" || app == "api" {
            ports.push(EndpointPort {
                name: "grpc".into(),
                protocol: "TCP".into(),
                port: 50051,
            });
        }
        let key = format!("{}/{name}", ns.name);
        state.endpoints.insert(
            format!("{key}-eth0"),
            WorkloadEndpointSpec {
                node: if is_local {
                    node.clone()
                } else {
                    format!("node-{}", 2 + g % 9)
                },
                pod: name.clone(),
                container_id: hash(&key),
                endpoint: "eth0".into(),
                interface_name: interface.clone().unwrap_or_else(|| "tarremote".into()),
                mac: None,
                ip_networks: vec![format!("{addr}/32")],
                ports,
            },
        );
        state
            .endpoint_labels
            .insert(format!("{key}-eth0"), l.clone());
        state.pod_labels.insert(key.clone(), l);
        let info = PodInfo {
            namespace: ns.name.clone(),
            name,
            addr,
            interface,
        };
        match (ns_i, j) {
            (0, 0) => client = Some(info),
            (0, 1) => server = Some(info),
            _ if is_local => local_pods.push(info),
            _ => {}
        }
    }
    let (client, server) = (
        client.context("no client pod")?,
        server.context("no server pod")?,
    );

    // Policies: 2% global, 8% Tartan namespaced, the rest Kubernetes.
    let n_global = (o.policies * 2 / 100).max(2);
    let n_tartan = (o.policies * 8 / 100).max(1);
    let n_bench = (o.policies / 250).clamp(2, 8);
    let n_kube = o
        .policies
        .checked_sub(n_global + n_tartan + n_bench)
        .context("too few policies")?;
    for i in 0..n_global {
        let v = global_policy(&mut rng, i);
        let key = format!("/{}", v["metadata"]["name"].as_str().unwrap_or(""));
        insert(&mut state.global_policies, key, global(v))?;
    }
    for i in 0..n_bench {
        let v = bench_policy(i, i + 1 == n_bench, true);
        let key = format!(
            "{BENCH_NS}/{}",
            v["metadata"]["name"].as_str().unwrap_or("")
        );
        insert(&mut state.kube_policies, key, kube(v))?;
    }
    let last_bench_key = format!("{BENCH_NS}/bench-allow-{:02}", n_bench - 1);
    let last_bench_cut = kube(bench_policy(n_bench - 1, true, false));
    for i in 0..n_tartan {
        let v = if i < 2 {
            bench_tartan(i)
        } else {
            let ns = 1 + rng.below(n_ns - 1);
            tartan_random(&mut rng, i, &nss[ns])
        };
        let key = format!(
            "{}/{}",
            v["metadata"]["namespace"].as_str().unwrap_or(""),
            v["metadata"]["name"].as_str().unwrap_or("")
        );
        insert(&mut state.tartan_policies, key, tartan(v))?;
    }
    let mut kube_json = BTreeMap::new();
    for k in 0..n_kube {
        let ns = &nss[1 + rng.below(n_ns - 1)];
        let v = kube_random(&mut rng, k, ns, &nss);
        let key = format!(
            "{}/{}",
            ns.name,
            v["metadata"]["name"].as_str().unwrap_or("")
        );
        insert(&mut state.kube_policies, key.clone(), kube(v.clone()))?;
        kube_json.insert(key, v);
    }

    // What to change: a Kubernetes policy that has a chain on this node
    // (it selects a local pod), its first rule's ports replaced; a local
    // pod whose new app label moves it to another profile.
    let rs = desired(&node, &state);
    let mut change = None;
    for (key, v) in &kube_json {
        let Some(Ok(p)) = state.kube_policies.get(key) else {
            continue;
        };
        if p.ingress.as_ref().is_some_and(|r| !r.is_empty()) {
            let mut w = v.clone();
            w["spec"]["ingress"][0]["ports"] = json!([{"protocol": "TCP", "port": 8443}]);
            // One that selects a local pod: the node's table changes.
            let mut changed = state.clone();
            changed.kube_policies.insert(key.clone(), kube(w.clone()));
            if desired(&node, &changed) != rs {
                change = Some((key.clone(), [Ok(p.clone()), kube(w)]));
                break;
            }
        }
    }
    let (change_key, change) = change.context("no Kubernetes policy selects a local pod")?;
    let mut relabel = None;
    'pods: for p in &local_pods {
        let key = format!("{}/{}", p.namespace, p.name);
        let was = state.pod_labels[&key].clone();
        let ns = nss
            .iter()
            .find(|n| n.name == p.namespace)
            .context("namespace")?;
        // Another app of its namespace first; the data tier (which a
        // global policy selects) when no app change moves it.
        let mut candidates: Vec<Labels> = ns
            .apps
            .iter()
            .filter(|a| Some(*a) != was.get("app"))
            .map(|a| {
                let mut l = was.clone();
                l.insert("app".into(), a.clone());
                l
            })
            .collect();
        if was.get("tier").map(String::as_str) != Some("data") {
            let mut l = was.clone();
            l.insert("tier".into(), "data".into());
            candidates.push(l);
        }
        for l in candidates {
            let mut s = state.clone();
            s.pod_labels.insert(key.clone(), l.clone());
            let iface = p.interface.as_deref().unwrap_or("");
            let after = desired(&node, &s);
            if after.to_endpoint.get(iface) != rs.to_endpoint.get(iface) {
                relabel = Some((key.clone(), [was.clone(), l]));
                break 'pods;
            }
        }
    }
    let (relabel_key, relabel) = relabel.context("no local pod changes profile on relabel")?;
    Ok(Synthetic {
        namespaces: n_ns,
        pods: o.pods,
        local_pods: state.endpoints.values().filter(|w| w.node == node).count(),
        kube: state.kube_policies.len(),
        tartan: state.tartan_policies.len(),
        global: state.global_policies.len(),
        state,
        node,
        client,
        server,
        change_key,
        change,
        relabel_key,
        relabel,
        last_bench_key,
        last_bench_cut,
    })
}

// ---------------------------------------------------------------------
// Measurements.

/// One timed change: felix's compile (pure), the driver's apply (render,
/// serialise, nft), and the render alone (measured apart, pure).
#[derive(Debug, Clone, Copy, Default)]
pub struct Step {
    pub compile: Duration,
    pub apply: Duration,
    pub render: Duration,
    /// The write went through the `nft` program (a command felix does
    /// not encode over netlink).
    pub via_nft: bool,
    /// Commands in the batch (objects added, deleted, flushed).
    pub commands: usize,
}

impl Step {
    pub fn total(&self) -> Duration {
        self.compile + self.apply
    }
    /// What the driver spent outside rendering: serialising and nft.
    pub fn nft(&self) -> Duration {
        self.apply.saturating_sub(self.render)
    }
}

#[derive(Debug, Default, Clone)]
pub struct Size {
    pub chains: usize,
    pub rules: usize,
    pub sets: usize,
    pub set_elements: usize,
    pub map_elements: usize,
    pub full_json_bytes: usize,
    pub profiles: usize,
    /// Interval sets standing for runs of rules.
    pub run_sets: usize,
}

/// The receiver's ingress path in the ruleset.
#[derive(Debug, Default, Clone)]
pub struct Path {
    pub profile: String,
    /// Rules of the server's ingress profile, and of them set lookups
    /// (runs, and guards written in the profile itself).
    pub profile_rules: usize,
    pub lookups: usize,
    /// The stretches behind guards: how many, their guard lookups, and
    /// the rules inside them.
    pub stretches: usize,
    pub guard_lookups: usize,
    pub stretch_rules: usize,
    /// Rules of the profile's Pass chain, and of them set lookups.
    pub pass_rules: usize,
    pub pass_lookups: usize,
    /// Rules of the client's egress profile.
    pub client_egress_rules: usize,
}

#[derive(Debug, Default)]
pub struct Figures {
    pub full: Vec<Step>,
    pub change: Vec<Step>,
    pub relabel: Vec<Step>,
    pub check: Vec<Duration>,
    pub size: Size,
    pub nft_peak_rss_kib: i64,
    pub path: Path,
    /// Per run: median connect + first byte, microseconds.
    pub latency_policy: Vec<f64>,
    pub latency_empty: Vec<f64>,
    /// The second server (dispatched to `open`), connections interleaved
    /// with the first: with the ruleset, and with the empty table.
    pub latency_policy_open: Vec<f64>,
    pub latency_empty_open: Vec<f64>,
    /// Writes that swapped the ruleset between latency runs.
    pub swaps: Vec<Duration>,
    pub enforced: String,
}

fn size_of(rs: &Ruleset) -> Size {
    Size {
        // Fixed: forward, forward_in, from_endpoint, to_endpoint, open;
        // 9 rules.
        chains: rs.chains.len() + 5,
        rules: rs.chains.values().map(|c| c.len()).sum::<usize>() + 9,
        sets: rs.sets.len(),
        set_elements: rs.sets.values().map(|s| s.elements.len()).sum(),
        map_elements: rs.to_endpoint.len() + rs.from_endpoint.len(),
        full_json_bytes: render::full(rs).to_string().len(),
        profiles: rs.chains.keys().filter(|c| c.starts_with('q')).count(),
        run_sets: rs.sets.keys().filter(|c| c.starts_with('r')).count(),
    }
}

/// A chain's rule count, and how many of its rules are run-set lookups.
fn rules_of(rs: &Ruleset, chain: &str) -> (usize, usize) {
    let Some(c) = rs.chains.get(chain) else {
        return (0, 0);
    };
    let lookups = c
        .iter()
        .filter(|r| serde_json::to_string(r).is_ok_and(|t| t.contains("\"@r")))
        .count();
    (c.len(), lookups)
}

/// The chains a chain's rules jump or go to, in order.
fn targets_of(rs: &Ruleset, chain: &str) -> Vec<String> {
    let Some(c) = rs.chains.get(chain) else {
        return Vec::new();
    };
    c.iter()
        .filter_map(|r| {
            let v = serde_json::to_value(r.last()?).ok()?;
            ["/jump/target", "/goto/target"]
                .iter()
                .find_map(|k| v.pointer(k)?.as_str().map(String::from))
        })
        .collect()
}

fn path_of(rs: &Ruleset, syn: &Synthetic) -> Path {
    let server = syn.server.interface.as_deref().unwrap_or("");
    let client = syn.client.interface.as_deref().unwrap_or("");
    let profile = rs.to_endpoint.get(server).cloned().unwrap_or_default();
    let (profile_rules, lookups) = rules_of(rs, &profile);
    let egress = rs.from_endpoint.get(client).cloned().unwrap_or_default();
    let mut path = Path {
        profile_rules,
        lookups,
        client_egress_rules: rules_of(rs, &egress).0,
        ..Path::default()
    };
    let mut stretches = BTreeSet::new();
    for t in targets_of(rs, &profile) {
        match t.chars().next() {
            Some('g') => {
                path.guard_lookups += rules_of(rs, &t).1;
                stretches.extend(targets_of(rs, &t));
            }
            Some('x') => {
                path.guard_lookups += 1;
                path.lookups -= 1;
                stretches.insert(t);
            }
            Some('k') => (path.pass_rules, path.pass_lookups) = rules_of(rs, &t),
            _ => {}
        }
    }
    path.stretches = stretches.len();
    path.stretch_rules = stretches.iter().map(|x| rules_of(rs, x).0).sum();
    path.profile = profile;
    path
}

/// The policy table has no set the packet path fills (felix passes the
/// same).
fn no_dynamic_sets(_: &str) -> bool {
    false
}

fn timed_step(
    driver: &mut PolicyDriver,
    old: Option<&Ruleset>,
    compile: impl FnOnce() -> Ruleset,
) -> Result<(Step, Ruleset)> {
    let t = Instant::now();
    let rs = compile();
    let compile = t.elapsed();
    let t = Instant::now();
    let w = driver.apply(&rs, false, &no_dynamic_sets)?;
    let apply = t.elapsed();
    match (old, w) {
        (None, Written::Full(_)) | (Some(_), Written::Difference(_)) => {}
        (_, w) => bail!("unexpected write {w:?} (the difference was refused?)"),
    }
    let t = Instant::now();
    let batch = match old {
        None => Some(render::full(&rs)),
        Some(o) => render::diff(o, &rs),
    };
    let len = batch.as_ref().map_or(0, |v| v.to_string().len());
    let render = t.elapsed();
    std::hint::black_box(len);
    let commands = batch.as_ref().map_or(0, |b| b.len());
    Ok((
        Step {
            compile,
            apply,
            render,
            via_nft: driver.last_via() == Some(Via::Nft),
            commands,
        },
        rs,
    ))
}

fn delete_table() {
    let _ = std::process::Command::new("nft")
        .args(["delete", "table", "inet", render::TABLE])
        .stderr(std::process::Stdio::null())
        .status();
}

fn sync_runs(
    node: &Netns,
    syn: &mut Synthetic,
    o: &PolicyBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let base = syn.state.clone();
    for r in 0..o.runs {
        let state = &mut syn.state;
        *state = base.clone();
        let n = &syn.node;
        let (ck, cv) = (&syn.change_key, &syn.change);
        let (rk, rv) = (&syn.relabel_key, &syn.relabel);
        let (steps, check) = in_ns(node, || {
            delete_table();
            let mut d = PolicyDriver::default();
            // felix keeps one cache across compiles; the full sync starts
            // with it empty, as felix does.
            let mut cache = CompileCache::default();
            let mut out = Vec::new();
            let (full, mut rs) = timed_step(&mut d, None, || desired_cached(n, state, &mut cache))?;
            out.push(full);
            // The policy changed, then back.
            for v in [&cv[1], &cv[0]] {
                let (s, next) = timed_step(&mut d, Some(&rs), || {
                    state.kube_policies.insert(ck.clone(), v.clone());
                    desired_cached(n, state, &mut cache)
                })?;
                out.push(s);
                rs = next;
            }
            for l in [&rv[1], &rv[0]] {
                let (s, next) = timed_step(&mut d, Some(&rs), || {
                    state.pod_labels.insert(rk.clone(), l.clone());
                    desired_cached(n, state, &mut cache)
                })?;
                out.push(s);
                rs = next;
            }
            let t = Instant::now();
            let w = d.apply(&rs, true, &no_dynamic_sets)?;
            let check = t.elapsed();
            if w != Written::Nothing {
                bail!("the drift check rewrote the table: {w:?}");
            }
            Ok((out, check))
        })?;
        if r == 0 {
            fig.nft_peak_rss_kib = children_peak_rss_kib();
        }
        log(&format!(
            "run {r}: full {:?} (compile {:?}), change {:?}, relabel {:?}, check {check:?}",
            steps[0].total(),
            steps[0].compile,
            steps[1].total(),
            steps[3].total()
        ));
        fig.full.push(steps[0]);
        fig.change.extend_from_slice(&steps[1..3]);
        fig.relabel.extend_from_slice(&steps[3..5]);
        fig.check.push(check);
    }
    syn.state = base;
    Ok(())
}

/// A pod as the CNI plugin wires it (see [`wire_pod`]).
fn wire(node: &Netns, pod: &Netns, p: &PodInfo) -> Result<()> {
    let host = p.interface.as_deref().context("pod not local")?;
    wire_pod(node, pod, host, &[p.addr])
}

/// A second server beside the measured one, always dispatched to `open`
/// (an extra verdict-map element), so that every run interleaves a
/// connection through the policy chains with one through none.
const OPEN_SERVER_IFACE: &str = "tarbopen";
const OPEN_SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 244, 255, 2);

fn latency(
    node: &Netns,
    syn: &Synthetic,
    o: &PolicyBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let a = Netns::new("tpbc")?;
    let b = Netns::new("tpbs")?;
    let b2 = Netns::new("tpbo")?;
    wire(node, &a, &syn.client)?;
    wire(node, &b, &syn.server)?;
    let open_server = PodInfo {
        namespace: BENCH_NS.into(),
        name: "open".into(),
        addr: OPEN_SERVER_ADDR,
        interface: Some(OPEN_SERVER_IFACE.into()),
    };
    wire(node, &b2, &open_server)?;
    node.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    let open = |mut rs: Ruleset| {
        for map in [&mut rs.to_endpoint, &mut rs.from_endpoint] {
            map.insert(
                OPEN_SERVER_IFACE.into(),
                tartan_policy::compile::OPEN_CHAIN.into(),
            );
        }
        rs
    };
    let with = open(desired(&syn.node, &syn.state));
    let mut bare = syn.state.clone();
    bare.kube_policies.clear();
    bare.tartan_policies.clear();
    bare.global_policies.clear();
    let empty = open(desired(&syn.node, &bare));
    let mut cut = syn.state.clone();
    cut.kube_policies
        .insert(syn.last_bench_key.clone(), syn.last_bench_cut.clone());
    let cut = open(desired(&syn.node, &cut));
    fig.path = path_of(&with, syn);
    let to = [
        SocketAddr::from((syn.server.addr, SERVER_PORT)),
        SocketAddr::from((OPEN_SERVER_ADDR, SERVER_PORT)),
    ];
    let stop = AtomicBool::new(false);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let servers: Vec<_> = [&b, &b2]
            .into_iter()
            .map(|ns| {
                let tx = ready_tx.clone();
                s.spawn(move || serve(ns, SERVER_PORT, stop, tx))
            })
            .collect();
        let r = (|| -> Result<()> {
            ready_rx.recv()??;
            ready_rx.recv()??;
            let mut d = PolicyDriver::default();
            in_ns(node, || {
                delete_table();
                Ok(d.apply(&with, false, &no_dynamic_sets)?)
            })?;
            // The ruleset decides: without the final rule of the last
            // bench policy the connection is dropped.
            in_ns(&a, || connections(to[0], 3))?;
            in_ns(node, || Ok(d.apply(&cut, false, &no_dynamic_sets)?))?;
            let dropped = in_ns(&a, || {
                Ok(TcpStream::connect_timeout(&to[0], Duration::from_millis(300)).is_err())
            })?;
            if !dropped {
                bail!("the connection went through without the rule that allows it");
            }
            fig.enforced = "checked: with the last bench policy's final rule removed, the client's connection is dropped".to_string();
            for r in 0..o.runs {
                let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
                let mut m = [[0.0; 2]; 2];
                for v in order {
                    let rs = [&with, &empty][v];
                    let t = Instant::now();
                    in_ns(node, || Ok(d.apply(rs, false, &no_dynamic_sets)?))?;
                    fig.swaps.push(t.elapsed());
                    let [x, y] = in_ns(&a, || {
                        interleaved(to, o.connections, o.connections.min(100))
                    })?;
                    m[v] = [median_us(&x), median_us(&y)];
                }
                log(&format!(
                    "latency run {r}: ruleset {:.1} µs (open server beside it {:.1} µs), empty table {:.1} µs ({:.1} µs)",
                    m[0][0], m[0][1], m[1][0], m[1][1]
                ));
                fig.latency_policy.push(m[0][0]);
                fig.latency_policy_open.push(m[0][1]);
                fig.latency_empty.push(m[1][0]);
                fig.latency_empty_open.push(m[1][1]);
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        // Wake the accept loops from inside the servers' namespaces.
        for ns in [&b, &b2] {
            wake(ns, SERVER_PORT);
        }
        for t in servers {
            let _ = t.join();
        }
        r
    })
}

pub fn run(o: &PolicyBenchOptions, mut log: impl FnMut(&str)) -> Result<(Synthetic, Figures)> {
    let t = Instant::now();
    let mut syn = generate(o)?;
    log(&format!(
        "generated {} namespaces, {} pods ({} local), {} + {} + {} policies in {:?}",
        syn.namespaces,
        syn.pods,
        syn.local_pods,
        syn.kube,
        syn.tartan,
        syn.global,
        t.elapsed()
    ));
    let mut fig = Figures {
        size: size_of(&desired(&syn.node, &syn.state)),
        ..Default::default()
    };
    let node = Netns::new("tpbn")?;
    sync_runs(&node, &mut syn, o, &mut fig, &mut log)?;
    if o.connections > 0 {
        latency(&node, &syn, o, &mut fig, &mut log)?;
    }
    in_ns(&node, || {
        delete_table();
        Ok(())
    })?;
    Ok((syn, fig))
}

// ---------------------------------------------------------------------
// Report.

/// The median of `v` (0 when empty).
fn quantile_usize(mut v: Vec<usize>) -> usize {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn row(md: &mut String, what: &str, steps: &[Step], goal: &str) {
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

fn relabel_text(l: &[Labels; 2]) -> String {
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
        "\n## The cluster\n\nGenerated from seed {} (`lab/src/policybench.rs`): {} namespaces, {} pods (IPv4 only, 2 to 3 named ports each), {} policies: {} Kubernetes NetworkPolicies (podSelector by app, sometimes with a matchExpression; 1 to 3 ingress rules from podSelector / namespaceSelector / both / ipBlock with except, ports by number, range and name; 30% with egress to DNS, the database and the Internet minus private ranges; some default-deny), {} Tartan NetworkPolicies (orders 400 to 499 or none; Log, Deny, Allow with selectors and named ports) and {} GlobalNetworkPolicies (deny lists, data-tier and prod hardening with Log and Deny, a baseline at order 900 ending in Pass). The benchmarked node holds {} of the pods (one in {}, drawn, plus the client and the server); every pod feeds the address sets. Felix's view of it (`calc::state::State`) is compiled by `calc::policy::desired` and written by `dataplane::policy::PolicyDriver` (the `nft` binary, JSON on stdin) in a fresh network namespace.\n",
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
