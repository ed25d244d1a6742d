//! The generated cluster as felix on `node-1` would hold it: namespaces,
//! pods (some local) and all the policies, from the options' seed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use anyhow::{Context, Result, bail};
use serde_json::json;
use tartan_api::resources::{EndpointPort, WorkloadEndpointSpec};
use tartan_felix::calc::policy::desired;
use tartan_felix::calc::state::{Labels, State};
use tartan_policy::compile::hash;

use super::model::*;
use super::options::*;
use super::policies::*;

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
    let mut state = State::for_node(&node);
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
        let spec = WorkloadEndpointSpec {
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
        };
        state
            .endpoints
            .set(&format!("{key}-eth0"), Some((spec, l.clone())));
        state.endpoints.set_pod(&key, Some(l));
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
        let was: Labels = state
            .endpoints
            .pod_labels(&key)
            .map(|l| (**l).clone())
            .context("a local pod's labels")?;
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
            s.endpoints.set_pod(&key, Some(l.clone()));
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
        local_pods: state.endpoints.local().count(),
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
