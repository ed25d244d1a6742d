//! Policy: from the watched policies, namespaces, pods and endpoints to the
//! nftables ruleset this node needs. Pure.

use std::collections::{BTreeMap, BTreeSet};

use tartan_api::Kind;
use tartan_policy::compile::{self, NetSet, Ruleset};
use tartan_policy::ir::{Policy, Source};
use tartan_policy::isolate;

use super::labels;
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
            let (ns, name) = split_key(key);
            out.push(isolate::isolation(&kind.to_string(), ns, name));
        }
    }
    out
}

/// `namespace/name` (`/name` for what is in no namespace) as its parts.
fn split_key(key: &str) -> (Option<&str>, &str) {
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    ((!ns.is_empty()).then_some(ns), name)
}

/// Fail closed on network sets: the readable policies with a rule that
/// could pick a network set felix cannot read (its labels unknown, any
/// rule whose scope takes in its namespace could), each enforced as
/// [`isolate::deny_in_place`]. Empty while every set reads.
fn reaching_unreadable_sets(
    state: &State,
    namespaces: &compile::NamespaceLabels,
) -> BTreeSet<Source> {
    let mut unreadable: Vec<Option<&str>> = state
        .net_sets
        .iter()
        .filter(|(_, s)| s.is_err())
        .map(|(k, _)| split_key(k).0)
        .collect();
    // An unreadable HostEndpoint's labels and addresses are unknown: a
    // rule that could pick a GlobalNetworkSet could pick it.
    if state.host_endpoints.values().any(|h| h.is_err()) {
        unreadable.push(None);
    }
    isolate::reaching_unreadable_sets(readable(state), &unreadable, namespaces)
}

/// Fail closed on ServiceAccounts: the readable policies that select by
/// service account labels where a ServiceAccount felix cannot read is
/// (enforced as [`isolate::deny_in_place`]), and the isolations of that
/// account's pods (when any policy does). Empty while every account reads.
fn unreadable_service_accounts<'a>(
    state: &'a State,
    namespaces: &compile::NamespaceLabels,
) -> (BTreeSet<Source>, Vec<Policy>, Vec<(&'a str, &'a str)>) {
    let mut reaching = BTreeSet::new();
    let mut isolations = Vec::new();
    let mut accounts = Vec::new();
    for (key, _) in state.service_accounts.iter().filter(|(_, s)| s.is_err()) {
        let (ns, name) = split_key(key);
        let Some(ns) = ns else { continue };
        let r = isolate::reaching_unreadable_service_accounts(readable(state), &[ns], namespaces);
        if !r.is_empty() {
            isolations.push(isolate::service_account_isolation(ns, name));
            accounts.push((ns, name));
            reaching.extend(r);
        }
    }
    (reaching, isolations, accounts)
}

/// Every policy felix could read.
fn readable(state: &State) -> impl Iterator<Item = &Policy> {
    state
        .kube_policies
        .values()
        .chain(state.tartan_policies.values())
        .chain(state.global_policies.values())
        .filter_map(|p| p.as_ref().ok())
}

/// The network sets felix could read (shared, not copied), and every
/// readable host endpoint's addresses as a GlobalNetworkSet.
fn net_sets(state: &State) -> Vec<NetSet> {
    state
        .net_sets
        .values()
        .filter_map(|s| s.as_ref().ok().cloned())
        .chain(super::hosts::as_net_sets(state))
        .collect()
}

/// The ruleset for `node` (the node `state` was made for: see
/// [`State::for_node`]).
pub fn desired(node: &str, state: &State) -> Ruleset {
    desired_cached(node, state, &mut compile::CompileCache::default())
}

/// [`desired`], reusing unchanged policy chains from `cache`.
pub fn desired_cached(node: &str, state: &State, cache: &mut compile::CompileCache) -> Ruleset {
    let namespaces = namespace_labels(state);
    let mut reaching = reaching_unreadable_sets(state, &namespaces);
    let (by_sa, sa_isolations, accounts) = unreadable_service_accounts(state, &namespaces);
    reaching.extend(by_sa);
    // Also over the pods of the unreadable accounts where a policy applies
    // by their labels (a superset of what the sets alone would need).
    let denies: Vec<Policy> = readable(state)
        .filter(|p| reaching.contains(&p.source))
        .map(|p| isolate::deny_in_place_for_accounts(p, &accounts, &namespaces))
        .collect();
    let mut isolations = isolations(state);
    isolations.extend(sa_isolations);
    let policies = readable(state)
        .filter(|p| !reaching.contains(&p.source))
        .chain(denies.iter())
        .chain(isolations.iter());
    // `state.endpoints` keeps them ready (this node's, the node it was
    // made for, with their interface): borrowed, not copied.
    let endpoints = state.endpoints.for_compile();
    let families = state.endpoints.families();
    let sets = net_sets(state);
    let hosts = super::hosts::for_node(node, state);
    compile::compile_with_hosts(
        cache,
        policies,
        &endpoints,
        &sets,
        families,
        &namespaces,
        &hosts,
    )
}

/// The namespaces' labels as policies see them: each carries
/// `kubernetes.io/metadata.name: <its name>`, whatever its stored labels
/// say, as the API server makes it: a Namespace written without the label
/// still matches a selector by its name, and one that claims another's
/// name does not. Likewise Calico's `projectcalico.org/name`
/// ([`labels`](super::labels)).
fn namespace_labels(state: &State) -> BTreeMap<String, BTreeMap<String, String>> {
    state
        .namespaces
        .iter()
        .map(|(k, v)| {
            let name = k.trim_start_matches('/').to_string();
            let labels = labels::namespace(&name, v.clone());
            (name, labels)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::calc::state::Labels;
    use tartan_api::resources::{EndpointPort, WorkloadEndpointSpec};

    /// An endpoint with one address and a named port `http` (8080/TCP).
    pub(crate) fn wep(node: &str, pod: &str, iface: &str, ip: &str) -> WorkloadEndpointSpec {
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
        let mut s = State::for_node("n1");
        let old: Labels = [("pod".into(), "old".into())].into();
        s.endpoints.set(
            "x/a.eth0",
            Some((wep("n1", "a", "tara", "10.0.0.1/32"), old.clone())),
        );
        s.endpoints.set(
            "x/b.eth0",
            Some((wep("n2", "b", "tarb", "10.0.0.2/32"), Labels::new())),
        );
        s.endpoints
            .set_pod("x/a", Some([("pod".into(), "a".into())].into()));
        let a = s.endpoints.local_endpoint("x/a.eth0").unwrap();
        assert_eq!(a.labels["pod"], "a");
        assert_eq!(a.interface.as_deref(), Some("tara"));
        assert_eq!(a.ports[0].protocol, 6);
        assert_eq!(s.endpoints.local_endpoint("x/b.eth0"), None);
        assert!(s.endpoints.labels_of("x/b.eth0").unwrap().is_empty());
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
        let mut s = State::for_node("n1");
        s.endpoints.set(
            "x/a.eth0",
            Some((wep("n1", "a", "tara", "10.0.0.1/32"), Labels::new())),
        );
        s.endpoints.set(
            "y/b.eth0",
            Some((wep("n1", "b", "tarb", "10.0.0.2/32"), Labels::new())),
        );
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

    fn tartan_np(ns: &str, name: &str, source: serde_json::Value) -> Policy {
        let p: tartan_api::resources::NetworkPolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": "all()", "types": ["Ingress"],
                     "ingress": [{"action": "Allow", "source": source}]}
        }))
        .unwrap();
        tartan_policy::tartan::from_network_policy(&p).unwrap()
    }

    fn net_set(
        ns: Option<&str>,
        labels: &[(&str, &str)],
        nets: &[&str],
    ) -> crate::calc::state::WatchedNetSet {
        Ok(NetSet {
            namespace: ns.map(Into::into),
            labels: std::sync::Arc::new(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            nets: nets.iter().map(|n| n.parse().unwrap()).collect(),
        })
    }

    /// The elements of every set of `rs`, as text.
    fn elements(rs: &Ruleset) -> String {
        format!("{:?}", rs.sets)
    }

    #[test]
    fn network_sets_feed_the_rules_that_pick_them_and_an_unreadable_one_denies_in_their_place() {
        let mut s = State::for_node("n1");
        for (key, iface, ip) in [
            ("x/a.eth0", "tara", "10.0.0.1/32"),
            ("y/b.eth0", "tarb", "10.0.0.2/32"),
        ] {
            let (ns, pod) = key.split_once('/').unwrap();
            let pod = pod.trim_end_matches(".eth0");
            let _ = ns;
            s.endpoints
                .set(key, Some((wep("n1", pod, iface, ip), Labels::new())));
        }
        // x's pods take in what the `partner` sets hold; y's take in x's
        // pods alone (a Kubernetes policy: never a set).
        s.tartan_policies.insert(
            "x/partners".into(),
            Ok(tartan_np(
                "x",
                "partners",
                serde_json::json!({"selector": "role == 'partner'"}),
            )),
        );
        s.kube_policies
            .insert("y/same".into(), Ok(allow_from_same_namespace("y", "same")));
        let without = desired("n1", &s);
        s.net_sets.insert(
            "x/p".into(),
            net_set(Some("x"), &[("role", "partner")], &["198.51.100.0/28"]),
        );
        let with = desired("n1", &s);
        assert!(
            elements(&with).contains("198.51.100.") && !elements(&without).contains("198.51.100."),
            "the set's network is in the rule's elements: {}",
            elements(&with)
        );
        // Of another namespace: not picked by x's policy.
        s.net_sets.remove("x/p");
        s.net_sets.insert(
            "y/p".into(),
            net_set(Some("y"), &[("role", "partner")], &["198.51.100.0/28"]),
        );
        assert_eq!(desired("n1", &s), without);
        // Unreadable, in y: x's policy cannot pick it, nothing changes.
        s.net_sets
            .insert("y/p".into(), Err("spec.nets[0]: bad".into()));
        assert_eq!(desired("n1", &s), without);
        // Unreadable, in x: x's policy denies everything in its place;
        // y's Kubernetes policy is untouched.
        s.net_sets
            .insert("x/q".into(), Err("spec.nets[0]: bad".into()));
        let closed = desired("n1", &s);
        let mut same = s.clone();
        same.net_sets.clear();
        let partners = s.tartan_policies["x/partners"].clone().unwrap();
        same.tartan_policies
            .insert("x/partners".into(), Ok(isolate::deny_in_place(&partners)));
        assert_eq!(closed, desired("n1", &same));
        assert_eq!(closed.to_endpoint["tarb"], without.to_endpoint["tarb"]);
        // A GlobalNetworkSet unreadable: only rules whose scope takes in
        // global() (x's policy's does not).
        s.net_sets.remove("x/q");
        s.net_sets
            .insert("/g".into(), Err("spec.nets[0]: bad".into()));
        assert_eq!(desired("n1", &s), without);
        s.tartan_policies.insert(
            "x/partners".into(),
            Ok(tartan_np(
                "x",
                "partners",
                serde_json::json!({"selector": "role == 'partner'", "namespaceSelector": "global()"}),
            )),
        );
        assert_eq!(desired("n1", &s), closed, "global(): denied in place");
        // Readable again: enforced as written.
        s.net_sets.insert(
            "/g".into(),
            net_set(None, &[("role", "partner")], &["203.0.113.0/24"]),
        );
        let open_again = desired("n1", &s);
        assert_ne!(open_again, closed);
        assert!(
            elements(&open_again).contains("203.0.113."),
            "{}",
            elements(&open_again)
        );
    }

    /// Other nodes' endpoints reach the compiler merged by likeness: the
    /// ruleset is the one compiled from them one by one.
    #[test]
    fn a_namespace_always_carries_its_own_name_label() {
        let mut state = State::default();
        let name = compile::NAMESPACE_NAME_LABEL.to_string();
        state.namespaces.insert("/plain".into(), Labels::new());
        state.namespaces.insert(
            "/evil".into(),
            Labels::from([
                (name.clone(), "kube-system".into()),
                (labels::NAME.into(), "kube-system".into()),
                ("a".into(), "b".into()),
            ]),
        );
        let ns = namespace_labels(&state);
        assert_eq!(
            ns["plain"],
            Labels::from([
                (name.clone(), "plain".into()),
                (labels::NAME.into(), "plain".into())
            ])
        );
        assert_eq!(ns["evil"][&name], "evil");
        assert_eq!(ns["evil"][labels::NAME], "evil");
        assert_eq!(ns["evil"]["a"], "b");
    }

    #[test]
    fn merged_remote_endpoints_compile_as_the_endpoints_one_by_one() {
        use std::sync::Arc;
        use tartan_policy::compile::{Endpoint, NamedPort};
        let mut s = State::for_node("n1");
        let mut one_by_one = Vec::new();
        let pods = [
            ("n1", "l1", "api", 80),
            ("n2", "w1", "web", 8080),
            ("n2", "w2", "web", 8080),
            ("n3", "w3", "web", 8080),
            ("n2", "d1", "db", 5432),
            ("n3", "d2", "db", 5432),
            ("n3", "d3", "db", 5433),
        ];
        for (i, (node, pod, app, port)) in pods.into_iter().enumerate() {
            let ip = format!("10.0.{i}.1/32");
            let mut w = wep(node, pod, &format!("tar{pod}"), &ip);
            w.ports[0].port = port;
            let labels: Labels = [("app".into(), app.into())].into();
            s.endpoints
                .set(&format!("x/{pod}.eth0"), Some((w, labels.clone())));
            one_by_one.push(Endpoint {
                namespace: "x".into(),
                labels: Arc::new(labels),
                addrs: vec![ip.parse::<ipnet::IpNet>().unwrap().addr()],
                ports: [NamedPort {
                    name: "http".into(),
                    protocol: 6,
                    port,
                }]
                .into(),
                interface: (node == "n1").then(|| format!("tar{pod}")),
            });
        }
        // A Pod relabelled: its endpoint moves to the other workload.
        s.endpoints
            .set_pod("x/w3", Some([("app".into(), "db".into())].into()));
        one_by_one[3].labels = Arc::new([("app".into(), "db".into())].into());
        let p: k8s_openapi::api::networking::v1::NetworkPolicy =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "x"},
                "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                         "ingress": [{"from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                                      "ports": [{"port": "http"}]}],
                         "egress": [{"to": [{"podSelector": {"matchLabels": {"app": "db"}}}],
                                     "ports": [{"port": "http"}]}]}
            }))
            .unwrap();
        let p = tartan_policy::ir::from_kubernetes(
            &tartan_policy::k8s::from_network_policy(&p).unwrap(),
        );
        s.kube_policies.insert("x/p".into(), Ok(p.clone()));
        assert!(s.endpoints.for_compile().len() < one_by_one.len());
        let want = compile::compile([&p], &one_by_one, &[], &Default::default());
        assert_eq!(desired("n1", &s), want);
        assert!(!want.sets.is_empty() && !want.chains.is_empty());
    }
}
