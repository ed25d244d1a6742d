//! What changes between two compiles: elements only when a pod is
//! relabelled, one run set when a policy changes, sets leaving with the
//! policies that used them, selector sets kept in their namespaces.

use super::*;

#[test]
fn a_relabelled_pod_into_an_existing_profile_changes_elements_only() {
    let p = kube(json!({"podSelector": {"matchLabels": {"pod": "a"}}}));
    let mut eps = endpoints();
    let before = compile(std::slice::from_ref(&p), &eps, &[], &namespaces());
    eps[1].labels = labels(&[("pod", "a")]).into();
    let after = compile([&p], &eps, &[], &namespaces());
    assert_eq!(before.chains, after.chains);
    let d = render::diff(&before, &after).unwrap().to_json();
    let cmds = d["nftables"].as_array().unwrap();
    assert_eq!(cmds.len(), 2, "{d}");
    assert!(
        cmds.iter()
            .all(|c| c.pointer("/add/element").is_some() || c.pointer("/delete/element").is_some()),
        "{d}"
    );
    assert!(render::diff(&after, &after).is_none());
}

#[test]
fn a_changed_policy_changes_only_its_run_set() {
    let p1 = kube(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 80}]}]}));
    let p2 = kube(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 81}]}]}));
    let before = compile([&p1], &endpoints(), &[], &namespaces());
    let after = compile(std::slice::from_ref(&p2), &endpoints(), &[], &namespaces());
    assert_eq!(before.chains, after.chains);
    let d = render::diff(&before, &after).unwrap().to_json();
    let text = d.to_string();
    let cmds = d["nftables"].as_array().unwrap();
    // The old box leaves before the new one comes (no overlap in the
    // interval set).
    assert_eq!(cmds.len(), 2, "{text}");
    assert!(cmds[0].pointer("/delete/element").is_some(), "{text}");
    assert!(cmds[1].pointer("/add/element").is_some(), "{text}");
    assert!(text.contains("81"), "{text}");
}

#[test]
fn policies_no_longer_used_leave_with_their_sets() {
    let p = kube(
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
    );
    let before = compile([&p], &endpoints(), &[], &namespaces());
    let after = compile([], &endpoints(), &[], &namespaces());
    let d = render::diff(&before, &after).unwrap().to_json();
    let text = d.to_string();
    for (name, _) in before.chains.iter() {
        assert!(
            text.contains(&format!("\"name\":\"{name}\"")),
            "{name} not removed: {text}"
        );
    }
    for name in before.sets.keys() {
        assert!(text.contains(name.as_str()), "{name} not removed: {text}");
    }
}

#[test]
fn a_policy_applies_only_in_its_own_namespace_and_selector_sets_stay_in_theirs() {
    let mk = |ns: &str, name: &str| {
        let np: KubePolicy = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": {"podSelector": {"matchLabels": {"pod": "a"}},
                     "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "a"}}}]}]}
        }))
        .unwrap();
        ir::from_kubernetes(&crate::k8s::from_network_policy(&np).unwrap())
    };
    let (px, py) = (mk("x", "p"), mk("y", "p"));
    let mut eps = endpoints();
    eps.push(ep("y", "a", "10.0.1.2", Some("tarya")));
    let rs = compile([&py, &px], &eps, &[], &namespaces());
    assert_ne!(rs.to_endpoint["tarxa"], rs.to_endpoint["tarya"]);
    assert_eq!(rs.to_endpoint["tarxb"], OPEN_CHAIN);
    // Each profile's run holds its own namespace's pods a.
    let run_of = |iface: &str| {
        let q = &rs.chains[&rs.to_endpoint[iface]];
        let text = serde_json::to_string(&**q).unwrap();
        let (_, def) = rs
            .sets
            .iter()
            .find(|(n, _)| text.contains(&format!("@{n}")))
            .unwrap();
        def.elements
            .iter()
            .map(|e| match e {
                Element::Span { addrs, .. } => format!("{}-{}", addrs.0, addrs.1),
                other => panic!("{other:?}"),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run_of("tarxa"), ["10.0.0.1-10.0.0.1"]);
    // Neighbouring addresses join into one range.
    assert_eq!(run_of("tarya"), ["10.0.1.1-10.0.1.2"]);
}
