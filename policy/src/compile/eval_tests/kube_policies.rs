//! Generated Kubernetes NetworkPolicies: pod and namespace selectors,
//! peers, ports and policy types.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::compile::NAMESPACE_NAME_LABEL;

use super::clusters::pick;
use super::policies::{Spec, strs};

fn kube_pods() -> impl Strategy<Value = Value> {
    pick(vec![
        json!({}),
        json!({"matchLabels": {"app": "a"}}),
        json!({"matchLabels": {"app": "b"}}),
        json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
        json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]}),
        json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}),
    ])
}

fn kube_namespaces() -> impl Strategy<Value = Value> {
    pick(vec![
        json!({}),
        json!({"matchLabels": {"env": "prod"}}),
        json!({"matchLabels": {NAMESPACE_NAME_LABEL: "ns1"}}),
        json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}),
    ])
}

fn kube_peer() -> impl Strategy<Value = Value> {
    prop_oneof![
        kube_pods().prop_map(|p| json!({"podSelector": p})),
        kube_namespaces().prop_map(|n| json!({"namespaceSelector": n})),
        (kube_pods(), kube_namespaces())
            .prop_map(|(p, n)| json!({"podSelector": p, "namespaceSelector": n})),
        pick(vec![
            json!({"cidr": "10.0.0.0/16", "except": ["10.0.1.0/24"]}),
            json!({"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}),
            json!({"cidr": "192.0.2.0/24", "except": ["192.0.2.8/29"]}),
            json!({"cidr": "10.0.0.0/24"}),
            json!({"cidr": "10.0.0.0/8", "except": ["10.0.0.2/32", "10.0.1.0/25"]}),
            json!({"cidr": "fd00::/64", "except": ["fd00::2/128"]}),
        ])
        .prop_map(|b| json!({"ipBlock": b})),
    ]
}

fn kube_port() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.6, pick(strs(&["TCP", "UDP", "SCTP"]))),
        prop_oneof![
            1 => Just(None),
            3 => pick(vec![22u16, 53, 80, 161, 8080]).prop_map(|n| Some(json!(n))),
            2 => pick(strs(&["http", "dns", "metrics"])).prop_map(|n| Some(json!(n))),
        ],
        prop::option::weighted(0.3, pick(vec![0u16, 5, 1000])),
    )
        .prop_map(|(proto, port, end)| {
            let mut o = json!({});
            if let Some(p) = proto {
                o["protocol"] = json!(p);
            }
            if let Some(port) = port {
                if let (Some(n), Some(e)) = (port.as_u64(), end) {
                    o["endPort"] = json!(n + u64::from(e));
                }
                o["port"] = port;
            }
            o
        })
}

type KubeRule = (Option<Vec<Value>>, Option<Vec<Value>>);

fn kube_rule() -> impl Strategy<Value = KubeRule> {
    (
        prop::option::weighted(0.7, prop::collection::vec(kube_peer(), 1..=2)),
        prop::option::weighted(0.6, prop::collection::vec(kube_port(), 1..=2)),
    )
}

pub(super) fn kube_spec() -> impl Strategy<Value = Spec> {
    (
        0..3usize,
        kube_pods(),
        pick(vec![
            None,
            Some(strs(&["Ingress"])),
            Some(strs(&["Egress"])),
            Some(strs(&["Ingress", "Egress"])),
        ]),
        prop::option::weighted(0.8, prop::collection::vec(kube_rule(), 0..=3)),
        prop::option::weighted(0.5, prop::collection::vec(kube_rule(), 0..=3)),
    )
        .prop_map(|(ns, pods, types, ingress, egress)| {
            let mut s = json!({"podSelector": pods});
            if let Some(t) = types {
                s["policyTypes"] = json!(t);
            }
            let rules = |rs: Vec<KubeRule>, peers: &str| -> Value {
                rs.into_iter()
                    .map(|(p, q)| {
                        let mut r = json!({});
                        if let Some(p) = p {
                            r[peers] = json!(p);
                        }
                        if let Some(q) = q {
                            r["ports"] = json!(q);
                        }
                        r
                    })
                    .collect()
            };
            if let Some(rs) = ingress {
                s["ingress"] = rules(rs, "from");
            }
            if let Some(rs) = egress {
                s["egress"] = rules(rs, "to");
            }
            Spec::Kube(ns, s)
        })
}
