//! Fail closed: a policy that cannot be read (it does not decode, or it
//! does not convert) stands as an isolation of what it would have
//! governed, in both directions, until a readable version replaces it.
//!
//! The isolation is a policy that allows nothing: it selects every pod of
//! the policy's namespace (every pod, for a GlobalNetworkPolicy), governs
//! ingress and egress, and has no rules. As with any policy, the other
//! policies that select those pods still allow what they allow. It is
//! evaluated among the Kubernetes NetworkPolicies (order 1000), so that a
//! Tartan policy's Pass cannot skip it.

use crate::Selector;
use crate::ir::{EndpointSel, KUBERNETES_ORDER, Policy, Source};
use crate::model::Namespaces;

/// The isolation standing for the unreadable policy `name` of kind `what`
/// (its `kind:`, for the logs and chain comments) in `namespace`, or
/// cluster-wide for `None`.
pub fn isolation(what: &str, namespace: Option<&str>, name: &str) -> Policy {
    let (namespaces, id) = match namespace {
        Some(ns) => (Namespaces::Named(ns.to_string()), format!("{ns}/{name}")),
        None => (Namespaces::Selected(Selector::All), name.to_string()),
    };
    Policy {
        source: Source::Unreadable(what.to_string(), id),
        order: KUBERNETES_ORDER,
        applies_to: EndpointSel {
            namespaces,
            pods: Selector::All,
        },
        ingress: Some(vec![]),
        egress: Some(vec![]),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::compile::{self, Endpoint, OPEN_CHAIN};

    fn pod(ns: &str, iface: &str, addr: &str) -> Endpoint {
        Endpoint {
            namespace: ns.into(),
            labels: std::sync::Arc::new([("app".to_string(), iface.to_string())].into()),
            addrs: vec![addr.parse().unwrap()],
            ports: [].into(),
            interface: Some(iface.into()),
        }
    }

    #[test]
    fn a_namespaced_isolation_closes_its_namespace_both_ways_and_no_other() {
        let p = isolation("NetworkPolicy", Some("x"), "bad");
        assert_eq!(p.source.to_string(), "unreadable:NetworkPolicy:x/bad");
        assert!(p.source.is_kubernetes(), "a Pass cannot skip it");
        assert_eq!(
            (p.ingress.as_deref(), p.egress.as_deref()),
            (Some(&[][..]), Some(&[][..]))
        );
        let eps = [pod("x", "tara", "10.0.0.1"), pod("y", "tarb", "10.0.0.2")];
        let rs = compile::compile([&p], &eps, &BTreeMap::new());
        assert_ne!(
            rs.to_endpoint["tara"], OPEN_CHAIN,
            "x is isolated (ingress)"
        );
        assert_ne!(
            rs.from_endpoint["tara"], OPEN_CHAIN,
            "x is isolated (egress)"
        );
        assert_eq!(rs.to_endpoint["tarb"], OPEN_CHAIN, "y is not");
        assert_eq!(rs.from_endpoint["tarb"], OPEN_CHAIN, "y is not");
    }

    #[test]
    fn a_global_isolation_closes_every_pod() {
        let p = isolation("GlobalNetworkPolicy", None, "g");
        assert_eq!(p.source.to_string(), "unreadable:GlobalNetworkPolicy:g");
        let eps = [pod("x", "tara", "10.0.0.1"), pod("y", "tarb", "10.0.0.2")];
        let rs = compile::compile([&p], &eps, &BTreeMap::new());
        for i in ["tara", "tarb"] {
            assert_ne!(rs.to_endpoint[i], OPEN_CHAIN, "{i}");
            assert_ne!(rs.from_endpoint[i], OPEN_CHAIN, "{i}");
        }
    }
}
