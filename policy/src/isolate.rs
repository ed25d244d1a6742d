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
//!
//! A network set that cannot be read leaves unknown the addresses of
//! every selector that might pick it: each readable policy with such a
//! selector ([`reaching_unreadable_sets`]) is enforced as [`deny_in_place`]:
//! in its own place in the order, it drops every packet that reaches it.
//! An isolation at order 1000 would not do: a deny list at order 10 over
//! a set would be gone, and a policy between 10 and 1000 (or a Kubernetes
//! policy beside the isolation) would allow what it denied.
//!
//! A ServiceAccount that cannot be read leaves unknown the `pcsa.` labels
//! of its pods (they carry none meanwhile): each readable policy with a
//! selector over those labels (its `serviceAccountSelector`, a rule's
//! `serviceAccounts.selector`) whose scope takes in the account's
//! namespace ([`reaching_unreadable_service_accounts`]) is enforced as
//! [`deny_in_place`], and the account's pods are isolated
//! ([`service_account_isolation`]): a policy that would have applied to
//! them cannot be skipped by their missing labels.

use std::collections::BTreeSet;

use crate::Selector;
use crate::compile::{NamespaceLabels, scope_takes_in};
use crate::ir::{EndpointSel, KUBERNETES_ORDER, Policy, Rule, Source};
use crate::model::{Action, Namespaces};

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
            net_sets: false,
        },
        ingress: Some(vec![]),
        egress: Some(vec![]),
    }
}

/// The isolation of the pods running as the unreadable ServiceAccount
/// `name` of `namespace`: as [`isolation`], over those pods only.
pub fn service_account_isolation(namespace: &str, name: &str) -> Policy {
    let mut p = isolation("ServiceAccount", Some(namespace), name);
    p.applies_to.pods = Selector::Eq(
        crate::tartan::SERVICE_ACCOUNT_LABEL.to_string(),
        name.to_string(),
    );
    p
}

/// The policies with a selector over service account labels (keys with
/// the `pcsa.` prefix), where they apply or in a rule, in a namespace
/// scope that takes in one of `namespaces_unreadable`: the namespaces of
/// the ServiceAccounts that cannot be read.
pub fn reaching_unreadable_service_accounts<'a>(
    policies: impl IntoIterator<Item = &'a Policy>,
    namespaces_unreadable: &[&str],
    namespaces: &NamespaceLabels,
) -> BTreeSet<Source> {
    let mut out = BTreeSet::new();
    if namespaces_unreadable.is_empty() {
        return out;
    }
    for p in policies {
        let reaches = std::iter::once(&p.applies_to)
            .chain(p.rule_selectors())
            .any(|sel| {
                sel.pods.mentions_key_prefix(crate::tartan::SA_LABEL_PREFIX)
                    && namespaces_unreadable
                        .iter()
                        .any(|ns| scope_takes_in(&sel.namespaces, Some(ns), namespaces))
            });
        if reaches {
            out.insert(p.source.clone());
        }
    }
    out
}

/// What stands for the readable policy `p` while a network set one of its
/// rules could pick cannot be read: `p` in its own place in the order,
/// selecting the same endpoints, governing both directions, with one rule
/// that drops everything. Whatever earlier policies decide (an Allow, a
/// Pass) they still decide, as they would with the set readable; nothing
/// that reaches `p` goes further.
pub fn deny_in_place(p: &Policy) -> Policy {
    let deny = || {
        Some(vec![Rule {
            action: Action::Deny,
            conds: vec![],
        }])
    };
    Policy {
        source: p.source.clone(),
        order: p.order,
        applies_to: p.applies_to.clone(),
        ingress: deny(),
        egress: deny(),
    }
}

/// [`deny_in_place`] for a policy that selects by service account labels
/// while the ServiceAccounts `accounts` (namespace, name) cannot be read:
/// where what `p` applies to is chosen by those labels, it also applies
/// to the pods running as those accounts in its scope. They carry none of
/// the labels meanwhile, and would otherwise slip past the deny to what a
/// later policy allows.
pub fn deny_in_place_for_accounts(
    p: &Policy,
    accounts: &[(&str, &str)],
    namespaces: &NamespaceLabels,
) -> Policy {
    let mut d = deny_in_place(p);
    if !p
        .applies_to
        .pods
        .mentions_key_prefix(crate::tartan::SA_LABEL_PREFIX)
    {
        return d;
    }
    for (ns, name) in accounts {
        if !scope_takes_in(&p.applies_to.namespaces, Some(ns), namespaces) {
            continue;
        }
        let theirs = Selector::And(
            Box::new(Selector::Eq(
                crate::tartan::NAMESPACE_LABEL.to_string(),
                ns.to_string(),
            )),
            Box::new(Selector::Eq(
                crate::tartan::SERVICE_ACCOUNT_LABEL.to_string(),
                name.to_string(),
            )),
        );
        let pods = std::mem::replace(&mut d.applies_to.pods, Selector::All);
        d.applies_to.pods = Selector::Or(Box::new(pods), Box::new(theirs));
    }
    d
}

/// The policies that have a rule condition (in either direction, negated
/// or not) whose selector picks network sets in a namespace scope that
/// takes in one of the `unreadable` network sets: each given by its
/// namespace, `None` for a GlobalNetworkSet. The sets' labels cannot be
/// read, so whether the selector matches them is not asked.
pub fn reaching_unreadable_sets<'a>(
    policies: impl IntoIterator<Item = &'a Policy>,
    unreadable: &[Option<&str>],
    namespaces: &NamespaceLabels,
) -> BTreeSet<Source> {
    let mut out = BTreeSet::new();
    if unreadable.is_empty() {
        return out;
    }
    for p in policies {
        let reaches = p.rule_selectors().any(|sel| {
            sel.net_sets
                && unreadable
                    .iter()
                    .any(|ns| scope_takes_in(&sel.namespaces, *ns, namespaces))
        });
        if reaches {
            out.insert(p.source.clone());
        }
    }
    out
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
        let rs = compile::compile([&p], &eps, &[], &BTreeMap::new());
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
        let rs = compile::compile([&p], &eps, &[], &BTreeMap::new());
        for i in ["tara", "tarb"] {
            assert_ne!(rs.to_endpoint[i], OPEN_CHAIN, "{i}");
            assert_ne!(rs.from_endpoint[i], OPEN_CHAIN, "{i}");
        }
    }

    fn tartan(namespace: Option<&str>, name: &str, spec: serde_json::Value) -> Policy {
        use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};
        let mut meta = serde_json::json!({"name": name});
        match namespace {
            Some(ns) => {
                meta["namespace"] = ns.into();
                let np: NetworkPolicy = serde_json::from_value(serde_json::json!({
                    "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
                    "metadata": meta, "spec": spec
                }))
                .unwrap();
                crate::tartan::from_network_policy(&np).unwrap()
            }
            None => {
                let g: GlobalNetworkPolicy = serde_json::from_value(serde_json::json!({
                    "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
                    "metadata": meta, "spec": spec
                }))
                .unwrap();
                crate::tartan::from_global_network_policy(&g).unwrap()
            }
        }
    }

    #[test]
    fn policies_whose_selectors_may_pick_an_unreadable_set_are_found() {
        use serde_json::json;
        let rule =
            |end: serde_json::Value| json!({"egress": [{"action": "Allow", "destination": end}]});
        let ns_x = tartan(Some("x"), "sel", rule(json!({"selector": "app == 'a'"})));
        let ns_y = tartan(Some("y"), "sel", rule(json!({"selector": "app == 'a'"})));
        // Negated, in ingress: it reaches too.
        let not_x = tartan(
            Some("x"),
            "not",
            json!({"ingress": [{"action": "Deny", "source": {"notSelector": "app == 'b'"}}]}),
        );
        let prod = tartan(
            Some("y"),
            "prod",
            rule(json!({"namespaceSelector": "env == 'prod'"})),
        );
        let glob = tartan(
            Some("y"),
            "glob",
            rule(json!({"namespaceSelector": "global()"})),
        );
        let gnp = tartan(None, "g", rule(json!({"selector": "app == 'a'"})));
        let nets = tartan(None, "nets", rule(json!({"nets": ["10.0.0.0/8"]})));
        // A policy's own selector never picks a network set.
        let applies = tartan(
            Some("x"),
            "applies",
            json!({"selector": "all()", "ingress": []}),
        );
        let kube = crate::ir::from_kubernetes(
            &crate::k8s::from_network_policy(
                &serde_json::from_value(json!({
                    "metadata": {"name": "k", "namespace": "x"},
                    "spec": {"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}
                }))
                .unwrap(),
            )
            .unwrap(),
        );
        let all = [
            &ns_x, &ns_y, &not_x, &prod, &glob, &gnp, &nets, &applies, &kube,
        ];
        let namespaces: NamespaceLabels = [(
            "x".to_string(),
            [("env".to_string(), "prod".to_string())].into(),
        )]
        .into();
        let names = |unreadable: &[Option<&str>]| -> Vec<String> {
            reaching_unreadable_sets(all, unreadable, &namespaces)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            names(&[Some("x")]),
            ["tnp:x/not", "tnp:x/sel", "tnp:y/prod", "gnp:g"]
        );
        // y is not seen: only its name label; no selector of env.
        assert_eq!(names(&[Some("y")]), ["tnp:y/sel", "gnp:g"]);
        assert_eq!(names(&[None]), ["tnp:y/glob", "gnp:g"]);
        assert_eq!(names(&[Some("z"), None]), ["tnp:y/glob", "gnp:g"]);
        assert!(names(&[]).is_empty());
    }
}
