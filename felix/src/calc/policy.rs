//! Policy: from the watched policies, namespaces, pods and endpoints to the
//! nftables ruleset this node needs. Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use tartan_api::Kind;
use tartan_api::resources::WorkloadEndpointSpec;
use tartan_policy::compile::{self, Endpoint, NamedPort, Ruleset};
use tartan_policy::ir::Policy;
use tartan_policy::isolate;

use super::state::State;

pub use super::state::Converted;

/// Fail closed: the isolation standing for each policy that could not be
/// read, from its key (`namespace/name`, `/name` for a global one).
pub fn isolations(state: &State) -> Vec<Policy> {
    let kinds = [
        (Kind::KubeNetworkPolicy, &state.kube_policies),
        (Kind::NetworkPolicy, &state.tartan_policies),
        (Kind::GlobalNetworkPolicy, &state.global_policies),
    ];
    let mut out = Vec::new();
    for (kind, map) in kinds {
        for (key, _) in map.iter().filter(|(_, p)| p.is_err()) {
            let (ns, name) = key.split_once('/').unwrap_or(("", key));
            let ns = (!ns.is_empty()).then_some(ns);
            out.push(isolate::isolation(&kind.to_string(), ns, name));
        }
    }
    out
}

fn protocol_number(p: &str) -> Option<u8> {
    match p.to_ascii_uppercase().as_str() {
        "TCP" => Some(6),
        "UDP" => Some(17),
        "SCTP" => Some(132),
        _ => None,
    }
}

fn endpoint(node: &str, key: &str, w: &WorkloadEndpointSpec, state: &State) -> Endpoint {
    let namespace = key.split('/').next().unwrap_or("").to_string();
    // The Pod's labels are the truth (a relabelled pod); the endpoint's
    // copy, written at ADD, serves until the Pod is seen.
    let labels = state
        .pod_labels
        .get(&format!("{namespace}/{}", w.pod))
        .or_else(|| state.endpoint_labels.get(key))
        .cloned()
        .unwrap_or_default();
    Endpoint {
        namespace,
        labels,
        addrs: w
            .ip_networks
            .iter()
            .filter_map(|n| n.parse::<IpNet>().ok())
            .map(|n| n.addr())
            .collect::<Vec<IpAddr>>(),
        ports: w
            .ports
            .iter()
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone(),
                    protocol: protocol_number(&p.protocol)?,
                    port: p.port,
                })
            })
            .collect(),
        interface: (w.node == node).then(|| w.interface_name.clone()),
    }
}

/// The ruleset for `node`.
pub fn desired(node: &str, state: &State) -> Ruleset {
    desired_cached(node, state, &mut compile::CompileCache::default())
}

/// [`desired`], reusing unchanged policy chains from `cache`.
pub fn desired_cached(node: &str, state: &State, cache: &mut compile::CompileCache) -> Ruleset {
    let policies = state
        .kube_policies
        .values()
        .chain(state.tartan_policies.values())
        .chain(state.global_policies.values())
        .filter_map(|p| p.as_ref().ok());
    let isolations = isolations(state);
    let policies = policies.chain(isolations.iter());
    let endpoints: Vec<Endpoint> = state
        .endpoints
        .iter()
        .map(|(k, w)| endpoint(node, k, w, state))
        .collect();
    let namespaces: BTreeMap<String, BTreeMap<String, String>> = state
        .namespaces
        .iter()
        .map(|(k, v)| (k.trim_start_matches('/').to_string(), v.clone()))
        .collect();
    compile::compile_cached(cache, policies, &endpoints, &namespaces)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::resources::EndpointPort;

    fn wep(node: &str, pod: &str, iface: &str, ip: &str) -> WorkloadEndpointSpec {
        WorkloadEndpointSpec {
            node: node.into(),
            pod: pod.into(),
            container_id: "c".into(),
            endpoint: "eth0".into(),
            interface_name: iface.into(),
            mac: None,
            ip_networks: vec![ip.into()],
            ports: vec![EndpointPort {
                name: "http".into(),
                protocol: "TCP".into(),
                port: 8080,
            }],
        }
    }

    #[test]
    fn pod_labels_win_over_the_endpoint_copy_and_only_local_pods_dispatch() {
        let mut s = State::default();
        s.endpoints
            .insert("x/a.eth0".into(), wep("n1", "a", "tara", "10.0.0.1/32"));
        s.endpoints
            .insert("x/b.eth0".into(), wep("n2", "b", "tarb", "10.0.0.2/32"));
        s.endpoint_labels
            .insert("x/a.eth0".into(), [("pod".into(), "old".into())].into());
        s.pod_labels
            .insert("x/a".into(), [("pod".into(), "a".into())].into());
        let a = endpoint("n1", "x/a.eth0", &s.endpoints["x/a.eth0"], &s);
        assert_eq!(a.labels["pod"], "a");
        assert_eq!(a.interface.as_deref(), Some("tara"));
        assert_eq!(a.ports[0].protocol, 6);
        let b = endpoint("n1", "x/b.eth0", &s.endpoints["x/b.eth0"], &s);
        assert_eq!(b.interface, None);
        assert!(b.labels.is_empty());
        // No policy: both directions of the local pod are open.
        let rs = desired("n1", &s);
        assert_eq!(rs.to_endpoint.len(), 1);
        assert_eq!(rs.to_endpoint["tara"], compile::OPEN_CHAIN);
        assert!(rs.chains.is_empty() && rs.sets.is_empty());
    }

    fn allow_from_same_namespace(ns: &str, name: &str) -> Policy {
        let p: k8s_openapi::api::networking::v1::NetworkPolicy =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                         "ingress": [{"from": [{"podSelector": {}}]}]}
            }))
            .unwrap();
        tartan_policy::ir::from_kubernetes(&tartan_policy::k8s::from_network_policy(&p).unwrap())
    }

    #[test]
    fn an_unreadable_policy_isolates_its_namespace_both_ways_and_others_still_allow() {
        let mut s = State::default();
        s.endpoints
            .insert("x/a.eth0".into(), wep("n1", "a", "tara", "10.0.0.1/32"));
        s.endpoints
            .insert("y/b.eth0".into(), wep("n1", "b", "tarb", "10.0.0.2/32"));
        let open = desired("n1", &s);
        assert_eq!(open.to_endpoint["tara"], compile::OPEN_CHAIN);
        assert_eq!(open.from_endpoint["tara"], compile::OPEN_CHAIN);
        s.kube_policies.insert(
            "x/bad".into(),
            Err("spec.podSelector.matchLabels[role]: wrong type".into()),
        );
        let closed = desired("n1", &s);
        assert_eq!(
            isolations(&s)[0].source.to_string(),
            "unreadable:NetworkPolicy.networking.k8s.io:x/bad"
        );
        assert_ne!(
            closed.to_endpoint["tara"],
            compile::OPEN_CHAIN,
            "ingress of x closed"
        );
        assert_ne!(
            closed.from_endpoint["tara"],
            compile::OPEN_CHAIN,
            "egress of x closed"
        );
        assert_eq!(
            closed.to_endpoint["tarb"],
            compile::OPEN_CHAIN,
            "y untouched"
        );
        // The isolation is a policy that allows nothing: it equals, for
        // the pods it selects, a readable policy without rules.
        let mut same = State {
            kube_policies: Default::default(),
            ..s.clone()
        };
        same.kube_policies.insert(
            "x/bad".into(),
            Ok(isolate::isolation(
                "NetworkPolicy.networking.k8s.io",
                Some("x"),
                "bad",
            )),
        );
        assert_eq!(desired("n1", &same), closed);
        // A readable policy beside it still allows what it allows: the
        // ingress chain now has its rule besides the final drop.
        s.kube_policies.insert(
            "x/allow".into(),
            Ok(allow_from_same_namespace("x", "allow")),
        );
        let both = desired("n1", &s);
        let chain = |rs: &Ruleset, i: &str| rs.chains[&rs.to_endpoint[i]].len();
        assert!(chain(&both, "tara") > chain(&closed, "tara"));
        // Global: every pod.
        s.kube_policies.clear();
        s.global_policies
            .insert("/g".into(), Err("spec.order: wrong type".into()));
        let all = desired("n1", &s);
        for i in ["tara", "tarb"] {
            assert_ne!(all.to_endpoint[i], compile::OPEN_CHAIN, "{i}");
            assert_ne!(all.from_endpoint[i], compile::OPEN_CHAIN, "{i}");
        }
        // Readable again: open again.
        s.global_policies.clear();
        assert_eq!(desired("n1", &s), open);
    }
}
