//! Generated policies for the property test, as the JSON their
//! converters take: what a generated policy is, and how it becomes IR.
//! The generators are in `tartan_policies` and `kube_policies`.

use k8s_openapi::api::networking::v1::NetworkPolicy as KubePolicy;
use serde_json::{Value, json};
use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};

use crate::ir::{self, Policy};

#[derive(Debug, Clone)]
pub(super) enum Spec {
    /// A Kubernetes NetworkPolicy in namespace `ns<n>`.
    Kube(usize, Value),
    /// A Tartan NetworkPolicy in namespace `ns<n>`.
    Tartan(usize, Value),
    Global(Value),
}

pub(super) fn build_policy(spec: &Spec, name: &str, namespaces: usize) -> Policy {
    let meta = |ns: &usize| json!({"name": name, "namespace": format!("ns{}", ns % namespaces)});
    match spec {
        Spec::Kube(ns, s) => {
            let np: KubePolicy =
                serde_json::from_value(json!({"metadata": meta(ns), "spec": s})).unwrap();
            let model = crate::k8s::from_network_policy(&np)
                .unwrap_or_else(|e| panic!("generated {s}: {e}"));
            ir::from_kubernetes(&model)
        }
        Spec::Tartan(ns, s) => {
            let np: NetworkPolicy = serde_json::from_value(json!({
                "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
                "metadata": meta(ns), "spec": s
            }))
            .unwrap_or_else(|e| panic!("generated {s}: {e}"));
            crate::tartan::from_network_policy(&np).unwrap_or_else(|e| panic!("generated {s}: {e}"))
        }
        Spec::Global(s) => {
            let g: GlobalNetworkPolicy = serde_json::from_value(json!({
                "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
                "metadata": {"name": name}, "spec": s
            }))
            .unwrap_or_else(|e| panic!("generated {s}: {e}"));
            crate::tartan::from_global_network_policy(&g)
                .unwrap_or_else(|e| panic!("generated {s}: {e}"))
        }
    }
}

pub(super) fn strs(items: &[&'static str]) -> Vec<&'static str> {
    items.to_vec()
}
