use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;

use crate::Selector;
use crate::k8s::{from_network_policy, label_selector};
use crate::model::{Namespaces, Peer, PortMatch, PortSel, Protocol};

fn np(spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "x"},
        "spec": spec
    }))
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn default_deny_ingress_and_the_policy_types_defaults() {
    let p = from_network_policy(&np(json!({"podSelector": {}}))).unwrap();
    assert_eq!(p.name, "x/p");
    assert_eq!(p.ingress, Some(vec![]), "ingress governed, nothing allowed");
    assert_eq!(p.egress, None);
    assert_eq!(
        p.applies_to,
        Peer::Pods {
            namespaces: Namespaces::Named("x".into()),
            pods: Selector::All
        }
    );
    // Egress rules present: egress governed too; an empty list is not.
    let p = from_network_policy(&np(json!({"podSelector": {}, "egress": [{}]}))).unwrap();
    assert!(p.ingress.is_some() && p.egress.as_ref().unwrap().len() == 1);
    let p = from_network_policy(&np(json!({"podSelector": {}, "egress": []}))).unwrap();
    assert_eq!(p.egress, None);
    // Explicit types: default-deny-all, and egress only (ingress rules
    // then govern nothing).
    let p = from_network_policy(&np(
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    ))
    .unwrap();
    assert_eq!((p.ingress, p.egress), (Some(vec![]), Some(vec![])));
    let p = from_network_policy(&np(json!({
        "podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}]
    })))
    .unwrap();
    assert_eq!((p.ingress, p.egress), (None, Some(vec![])));
}

#[test]
fn peers_pod_namespace_both_and_ip_blocks() {
    let p = from_network_policy(&np(json!({
        "podSelector": {"matchLabels": {"pod": "a"}},
        "ingress": [{"from": [
            {"podSelector": {"matchLabels": {"pod": "b"}}},
            {"namespaceSelector": {"matchLabels": {"ns": "y"}}},
            {"podSelector": {"matchLabels": {"pod": "c"}},
             "namespaceSelector": {"matchLabels": {"ns": "z"}}},
            {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}}
        ]}]
    })))
    .unwrap();
    let eq = |k: &str, v: &str| Selector::Eq(k.into(), v.into());
    let rules = p.ingress.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].peers,
        [
            Peer::Pods {
                namespaces: Namespaces::Named("x".into()),
                pods: eq("pod", "b")
            },
            Peer::Pods {
                namespaces: Namespaces::Selected(eq("ns", "y")),
                pods: Selector::All
            },
            Peer::Pods {
                namespaces: Namespaces::Selected(eq("ns", "z")),
                pods: eq("pod", "c")
            },
            Peer::Net {
                cidr: "10.0.0.0/16".parse().unwrap(),
                except: vec!["10.0.1.0/24".parse().unwrap()]
            }
        ]
    );
    assert!(rules[0].ports.is_empty(), "no ports: every port");
}

#[test]
fn ports_default_to_tcp_and_take_names_numbers_and_ranges() {
    let p = from_network_policy(&np(json!({
        "podSelector": {},
        "ingress": [{"ports": [
            {"port": 80},
            {"protocol": "UDP", "port": "dns"},
            {"protocol": "SCTP", "port": 9000, "endPort": 9010},
            {"protocol": "UDP"}
        ]}]
    })))
    .unwrap();
    assert_eq!(
        p.ingress.unwrap()[0].ports,
        [
            PortMatch {
                protocol: Protocol::Tcp,
                ports: PortSel::Range(80, 80)
            },
            PortMatch {
                protocol: Protocol::Udp,
                ports: PortSel::Named("dns".into())
            },
            PortMatch {
                protocol: Protocol::Sctp,
                ports: PortSel::Range(9000, 9010)
            },
            PortMatch {
                protocol: Protocol::Udp,
                ports: PortSel::Any
            },
        ]
    );
}

#[test]
fn every_problem_is_reported_with_its_field_and_nothing_half_converted() {
    let e = from_network_policy(&np(json!({
        "podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]},
        "policyTypes": ["Sideways"],
        "ingress": [{
            "from": [
                {"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.1.0.0/24"]}},
                {"ipBlock": {"cidr": "10.0.0.0/33"}},
                {"ipBlock": {"cidr": "10.0.0.0/16"}, "podSelector": {}},
                {}
            ],
            "ports": [
                {"port": "http", "endPort": 90},
                {"port": 90, "endPort": 80},
                {"protocol": "ICMP"},
                {"port": 0}
            ]
        }]
    })))
    .unwrap_err();
    let fields: Vec<&str> = e.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "spec.podSelector",
            "spec.policyTypes[0]",
            "spec.ingress[0].from[0].ipBlock.except[0]",
            "spec.ingress[0].from[1].ipBlock.cidr",
            "spec.ingress[0].from[2]",
            "spec.ingress[0].from[3]",
            "spec.ingress[0].ports[0].endPort",
            "spec.ingress[0].ports[1].endPort",
            "spec.ingress[0].ports[2].protocol",
            "spec.ingress[0].ports[3].port",
        ],
        "{e}"
    );
    assert!(e.to_string().starts_with("NetworkPolicy x/p: "), "{e}");
}

#[test]
fn label_selectors_mean_what_kubernetes_means() {
    let s: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
    let sel = label_selector(&s).unwrap();
    let base = [("app", "web"), ("tier", "a"), ("team", "t")];
    assert!(
        sel.matches(&labels(&base)),
        "NotIn holds when the key is missing"
    );
    let mut more = base.to_vec();
    more.push(("env", "dev"));
    assert!(sel.matches(&labels(&more)));
    more.push(("legacy", ""));
    assert!(!sel.matches(&labels(&more)), "DoesNotExist");
    let mut prod = base.to_vec();
    prod.push(("env", "prod"));
    assert!(!sel.matches(&labels(&prod)));
    assert!(!sel.matches(&labels(&[("app", "web"), ("tier", "c"), ("team", "t")])));
    assert_eq!(label_selector(&Default::default()).unwrap(), Selector::All);
    let bad: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(json!({"matchExpressions": [{"key": "k", "operator": "In"}]}))
            .unwrap();
    assert!(
        label_selector(&bad)
            .unwrap_err()
            .contains("at least one value")
    );
}

/// A pod selector with tens of thousands of terms (a NetworkPolicy fits
/// that many in the API server's size limit) must not overflow the stack of
/// the agent that matches, prints and drops it. Run on a 2 MiB stack, a
/// tokio worker's default; a chain as deep as its terms overflowed it.
#[test]
fn a_selector_with_fifty_thousand_terms_stays_shallow() {
    let worker = std::thread::Builder::new().stack_size(2 << 20);
    let done = worker
        .spawn(|| {
            let expressions: Vec<_> = (0..50_000)
                .map(|i| json!({"key": format!("k{i}"), "operator": "Exists"}))
                .collect();
            let s: LabelSelector =
                serde_json::from_value(json!({"matchExpressions": expressions})).unwrap();
            let sel = label_selector(&s).unwrap();
            let all: BTreeMap<String, String> = (0..50_000)
                .map(|i| (format!("k{i}"), String::new()))
                .collect();
            assert!(sel.matches(&all));
            assert!(!sel.matches(&labels(&[("k0", "")])));
            assert!(sel.to_string().len() > 50_000);
            drop(sel);
        })
        .unwrap()
        .join();
    assert!(done.is_ok());
}
