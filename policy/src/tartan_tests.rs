use serde_json::json;
use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};

use crate::Selector;
use crate::ir::{Addrs, Cond, Side, Source};
use crate::model::{Action, Namespaces};
use crate::tartan::{from_global_network_policy, from_network_policy};

fn tnp(spec: serde_json::Value) -> NetworkPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": "x"}, "spec": spec
    }))
    .unwrap()
}

fn gnp(spec: serde_json::Value) -> GlobalNetworkPolicy {
    serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "g"}, "spec": spec
    }))
    .unwrap()
}

#[test]
fn every_bad_selector_is_reported_with_its_field_and_column() {
    let e = from_network_policy(&tnp(json!({
        "selector": "app == ",
        "ingress": [{"action": "Allow", "source": {"selector": "has(a", "notSelector": "b in {'x'}"}}]
    })))
    .unwrap_err();
    let fields: Vec<&str> = e.problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(fields, ["spec.selector", "spec.ingress[0].source.selector"]);
    assert!(
        e.problems.iter().all(|p| p.message.contains("column")),
        "{e}"
    );
    assert!(e.to_string().starts_with("NetworkPolicy tnp:x/p"), "{e}");
}

#[test]
fn selector_scopes_of_namespaced_and_global_policies() {
    let rule = json!({"action": "Deny", "source": {"selector": "role == 'db'", "notSelector": "tier == 'x'"}});
    let p = from_network_policy(&tnp(json!({"ingress": [rule.clone()]}))).unwrap();
    assert_eq!(p.source, Source::Namespaced("x".into(), "p".into()));
    assert_eq!(
        p.order,
        f64::INFINITY,
        "no order: after every ordered policy"
    );
    // In a NetworkPolicy both stay in its namespace; the second is negated.
    let scopes: Vec<(Namespaces, bool)> = source_scopes(&p)
        .into_iter()
        .map(|(ns, _, negate)| (ns, negate))
        .collect();
    assert_eq!(
        scopes,
        [
            (Namespaces::Named("x".into()), false),
            (Namespaces::Named("x".into()), true)
        ]
    );
    // In a GlobalNetworkPolicy a selector alone means every namespace.
    let g = from_global_network_policy(&gnp(json!({"order": 5, "ingress": [rule]}))).unwrap();
    assert_eq!(g.order, 5.0);
    assert!(g.ingress.as_ref().unwrap()[0].conds.iter().any(|c| matches!(c,
        Cond::Addr { addrs: Addrs::Endpoints(s), negate: false, .. } if s.namespaces == Namespaces::Selected(crate::tartan::everywhere()))));
    assert_eq!(g.applies_to.namespaces, Namespaces::Selected(Selector::All));
}

/// The source scopes of the first ingress rule: (namespaces, pods, negated).
fn source_scopes(p: &crate::ir::Policy) -> Vec<(Namespaces, Selector, bool)> {
    p.ingress.as_ref().unwrap()[0]
        .conds
        .iter()
        .filter_map(|c| match c {
            Cond::Addr {
                addrs: Addrs::Endpoints(s),
                negate,
                side: Side::Source,
            } => Some((s.namespaces.clone(), s.pods.clone(), *negate)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lone_not_selector_stays_in_a_namespaced_policys_namespace() {
    // As in Calico: any selector field of a NetworkPolicy's rule, a lone
    // notSelector included, limits the end to the policy's namespace, so
    // this allows pods of x that are not bad, and nothing from elsewhere.
    let rule = json!({"action": "Allow", "source": {"notSelector": "role == 'bad'"}});
    let p = from_network_policy(&tnp(json!({"ingress": [rule.clone()]}))).unwrap();
    let bad = Selector::parse("role == 'bad'").unwrap();
    assert_eq!(
        source_scopes(&p),
        [
            (Namespaces::Named("x".into()), Selector::All, false),
            (Namespaces::Named("x".into()), bad.clone(), true),
        ]
    );
    // A GlobalNetworkPolicy has no namespace of its own: only the negation.
    let g = from_global_network_policy(&gnp(json!({"ingress": [rule]}))).unwrap();
    assert_eq!(
        source_scopes(&g),
        [(Namespaces::Selected(crate::tartan::everywhere()), bad, true)]
    );
}

#[test]
fn port_lists_mixing_numbers_and_names_split_into_alternatives() {
    let p = from_network_policy(&tnp(json!({
        "egress": [{"action": "Allow", "protocol": "TCP",
                    "destination": {"ports": [80, "8000:8080", "http"], "notPorts": [8001, "admin"]}}]
    })))
    .unwrap();
    assert!(
        p.ingress.is_none(),
        "egress rules only: types default to Egress"
    );
    let rules = p.egress.unwrap();
    assert_eq!(
        rules.len(),
        2,
        "numbers in one alternative, the name in another"
    );
    for r in &rules {
        assert_eq!(r.action, Action::Allow);
        assert!(r.conds.contains(&Cond::Protocol {
            number: 6,
            negate: false
        }));
        assert!(r.conds.contains(&Cond::Ports {
            side: Side::Destination,
            ranges: vec![(8001, 8001)],
            negate: true
        }));
        assert!(r.conds.contains(&Cond::NamedPort {
            side: Side::Destination,
            name: "admin".into(),
            negate: true
        }));
    }
    assert!(rules[0].conds.contains(&Cond::Ports {
        side: Side::Destination,
        ranges: vec![(80, 80), (8000, 8080)],
        negate: false
    }));
    assert!(rules[1].conds.contains(&Cond::NamedPort {
        side: Side::Destination,
        name: "http".into(),
        negate: false
    }));
}

#[test]
fn a_log_rule_s_port_alternatives_are_disjoint_so_it_logs_once() {
    let p = from_network_policy(&tnp(json!({
        "ingress": [{"action": "Log", "protocol": "TCP",
                     "source": {"ports": [1024, "client"]},
                     "destination": {"ports": [80, "http"]}}]
    })))
    .unwrap();
    let rules = p.ingress.unwrap();
    assert_eq!(rules.len(), 4, "two source by two destination alternatives");
    let ports = |side, ranges: Vec<(u16, u16)>, negate| Cond::Ports {
        side,
        ranges,
        negate,
    };
    let named = |side, name: &str, negate| Cond::NamedPort {
        side,
        name: name.into(),
        negate,
    };
    use Side::{Destination as D, Source as S};
    // (source 1024, destination 80) first; each later alternative rules
    // out the earlier ones of its side, so a packet to port 80 whose
    // destination numbers `http` 80 matches one alternative only.
    let want: [Vec<Cond>; 4] = [
        vec![
            ports(S, vec![(1024, 1024)], false),
            ports(D, vec![(80, 80)], false),
        ],
        vec![
            ports(S, vec![(1024, 1024)], false),
            named(D, "http", false),
            ports(D, vec![(80, 80)], true),
        ],
        vec![
            named(S, "client", false),
            ports(D, vec![(80, 80)], false),
            ports(S, vec![(1024, 1024)], true),
        ],
        vec![
            named(S, "client", false),
            named(D, "http", false),
            ports(S, vec![(1024, 1024)], true),
            ports(D, vec![(80, 80)], true),
        ],
    ];
    for (r, want) in rules.iter().zip(want) {
        assert_eq!(r.action, Action::Log);
        let tail = &r.conds[r.conds.len() - want.len()..];
        assert_eq!(tail, want.as_slice(), "{:?}", r.conds);
    }
    // Allow keeps overlapping alternatives: the first match decides.
    let allow = from_network_policy(&tnp(json!({
        "ingress": [{"action": "Allow", "protocol": "TCP",
                     "destination": {"ports": [80, "http"]}}]
    })))
    .unwrap();
    assert!(allow.ingress.unwrap().iter().all(|r| {
        r.conds
            .iter()
            .all(|c| !matches!(c, Cond::Ports { negate: true, .. }))
    }));
}

/// Every endpoint selector of a policy's rules.
fn rule_selectors(p: &crate::ir::Policy) -> Vec<&crate::ir::EndpointSel> {
    p.rule_selectors().collect()
}

#[test]
fn rule_selectors_pick_network_sets_and_applies_to_selectors_do_not() {
    let rules = json!([
        {"action": "Allow", "source": {"selector": "app == 'a'"}},
        {"action": "Deny", "source": {"notSelector": "app == 'b'"}},
        {"action": "Pass", "source": {"namespaceSelector": "global()"}}
    ]);
    let p = from_network_policy(&tnp(
        json!({"selector": "all()", "ingress": rules.clone(), "egress": rules.clone()}),
    ))
    .unwrap();
    let g = from_global_network_policy(&gnp(json!({"ingress": rules}))).unwrap();
    for pol in [&p, &g] {
        let sels = rule_selectors(pol);
        assert!(!sels.is_empty());
        assert!(sels.iter().all(|s| s.net_sets), "{sels:?}");
        assert!(!pol.applies_to.net_sets, "no interface: never selected");
    }
    // global() as a namespaceSelector: a scope that takes in the global
    // sets and no namespace.
    let glob = rule_selectors(&p)[3];
    assert_eq!(
        glob.namespaces,
        Namespaces::Selected(Selector::parse("global()").unwrap())
    );
    // A GlobalNetworkPolicy's lone selector: every namespace, and the
    // global sets (all() matches what is in no namespace).
    match &rule_selectors(&g)[0].namespaces {
        Namespaces::Selected(s) => assert!(s.matches_global()),
        other => panic!("{other:?}"),
    }
    // A Kubernetes peer picks pods only, and the same selector with and
    // without sets names two different sets.
    let k = rule_selectors(&p)[0].clone();
    let pods_only = crate::ir::EndpointSel {
        net_sets: false,
        ..k.clone()
    };
    assert_ne!(k, pods_only);
    assert_ne!(k.to_string(), pods_only.to_string());
    assert_ne!(
        crate::compile::selector_set(&k, false, false),
        crate::compile::selector_set(&pods_only, false, false)
    );
}

/// Pods labelled as felix labels them: (namespace, service account,
/// its labels or `None` when felix has not read the account).
fn sa_pod(
    ns: &str,
    sa: Option<&str>,
    sa_labels: Option<&[(&str, &str)]>,
) -> crate::compile::Endpoint {
    let mut l = std::collections::BTreeMap::new();
    if let Some(sa) = sa {
        l.insert(
            crate::tartan::SERVICE_ACCOUNT_LABEL.to_string(),
            sa.to_string(),
        );
        if let Some(own) = sa_labels {
            for (k, v) in own {
                l.insert(format!("pcsa.{k}"), v.to_string());
            }
            l.insert(crate::tartan::SA_NAME_LABEL.to_string(), sa.to_string());
        }
    }
    crate::compile::Endpoint {
        namespace: ns.into(),
        labels: std::sync::Arc::new(l),
        addrs: vec![],
        ports: [].into(),
        interface: None,
    }
}

fn sa_cluster() -> Vec<(&'static str, crate::compile::Endpoint)> {
    vec![
        (
            "x/front",
            sa_pod("x", Some("front"), Some(&[("team", "db")])),
        ),
        (
            "x/back",
            sa_pod("x", Some("back"), Some(&[("team", "web")])),
        ),
        ("x/unread", sa_pod("x", Some("db"), None)),
        ("x/none", sa_pod("x", None, None)),
        (
            "y/front",
            sa_pod("y", Some("front"), Some(&[("team", "db")])),
        ),
    ]
}

/// The pods of [`sa_cluster`] the first ingress rule's positive source
/// scope picks.
fn picked_sources(p: &crate::ir::Policy) -> Vec<&'static str> {
    let ns = crate::compile::NamespaceLabels::new();
    let sel = p.ingress.as_ref().unwrap()[0]
        .conds
        .iter()
        .find_map(|c| match c {
            Cond::Addr {
                addrs: Addrs::Endpoints(s),
                negate: false,
                ..
            } => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    sa_cluster()
        .into_iter()
        .filter(|(_, ep)| sel.matches(ep, &ns))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn a_rules_service_accounts_pick_exactly_the_pods_running_as_them() {
    let rule = |sa: serde_json::Value| json!({"ingress": [{"action": "Allow", "source": {"serviceAccounts": sa}}]});
    let np = |sa| from_network_policy(&tnp(rule(sa))).unwrap();
    let g = |sa| from_global_network_policy(&gnp(rule(sa))).unwrap();
    // Names: in the policy's namespace (NetworkPolicy), anywhere (global).
    assert_eq!(
        picked_sources(&np(json!({"names": ["front"]}))),
        ["x/front"]
    );
    assert_eq!(
        picked_sources(&g(json!({"names": ["front"]}))),
        ["x/front", "y/front"]
    );
    assert_eq!(
        picked_sources(&np(json!({"names": ["front", "db"]}))),
        ["x/front", "x/unread"]
    );
    // A selector over the account's labels.
    assert_eq!(
        picked_sources(&np(json!({"selector": "team == 'web'"}))),
        ["x/back"]
    );
    assert_eq!(
        picked_sources(&g(json!({"selector": "has(team)"}))),
        ["x/front", "x/back", "y/front"]
    );
    // Both: both must hold.
    assert_eq!(
        picked_sources(&np(
            json!({"names": ["front", "back"], "selector": "team == 'web'"})
        )),
        ["x/back"]
    );
    // And'ed to the end's selector, in its namespaceSelector's scope.
    let p = from_network_policy(&tnp(json!({"ingress": [{"action": "Allow", "source": {
        "namespaceSelector": "all()", "selector": "!has(app)", "serviceAccounts": {"names": ["front"]}}}]})))
    .unwrap();
    assert_eq!(picked_sources(&p), ["x/front", "y/front"]);
    // Network sets have no service account, whatever their labels say.
    let sel = p.rule_selectors().next().unwrap();
    assert!(!sel.net_sets);
    let plain = from_network_policy(&tnp(
        json!({"ingress": [{"action": "Allow", "source": {"selector": "all()"}}]}),
    ))
    .unwrap();
    assert!(plain.rule_selectors().next().unwrap().net_sets);
}

#[test]
fn a_service_account_selector_narrows_what_a_policy_applies_to() {
    let ns = crate::compile::NamespaceLabels::new();
    let applies = |p: &crate::ir::Policy| -> Vec<&'static str> {
        sa_cluster()
            .into_iter()
            .filter(|(_, ep)| p.applies_to.matches(ep, &ns))
            .map(|(n, _)| n)
            .collect()
    };
    let p = from_network_policy(&tnp(
        json!({"serviceAccountSelector": "team == 'db'", "ingress": [{"action": "Deny"}]}),
    ))
    .unwrap();
    assert_eq!(applies(&p), ["x/front"]);
    let p = from_network_policy(&tnp(
        json!({"selector": "all()", "serviceAccountSelector": "", "ingress": [{"action": "Deny"}]}),
    ))
    .unwrap();
    assert_eq!(applies(&p), ["x/front", "x/back", "x/unread", "x/none"]);
    let g = from_global_network_policy(&gnp(json!({"serviceAccountSelector": "projectcalico.org/name == 'front'", "ingress": [{"action": "Deny"}]}))).unwrap();
    assert_eq!(applies(&g), ["x/front", "y/front"]);
    // In a GlobalNetworkPolicy all() is "has a service account" (Calico).
    let g = from_global_network_policy(&gnp(
        json!({"serviceAccountSelector": "all()", "ingress": [{"action": "Deny"}]}),
    ))
    .unwrap();
    assert_eq!(applies(&g), ["x/front", "x/back", "x/unread", "y/front"]);
    // A bad selector names its field.
    let e = from_network_policy(&tnp(
        json!({"serviceAccountSelector": "team ==", "ingress": [{"action": "Deny"}]}),
    ))
    .unwrap_err();
    assert_eq!(e.problems[0].field, "spec.serviceAccountSelector");
    let e = from_network_policy(&tnp(json!({"ingress": [{"action": "Deny", "source": {"serviceAccounts": {"selector": "has("}}}]}))).unwrap_err();
    assert_eq!(
        e.problems[0].field,
        "spec.ingress[0].source.serviceAccounts.selector"
    );
}
