//! The difference between two rulesets as the transaction the driver
//! writes: elements only when only membership changed, the old box
//! before the new one, chains and sets no longer used removed.

use super::*;

#[test]
fn a_relabelled_pod_into_an_existing_profile_changes_elements_only() {
    let p = kube(json!({"podSelector": {"matchLabels": {"pod": "a"}}}));
    let mut eps = endpoints();
    let before = compile(std::slice::from_ref(&p), &eps, &namespaces());
    eps[1].labels = labels(&[("pod", "a")]);
    let after = compile([&p], &eps, &namespaces());
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
    let before = compile([&p1], &endpoints(), &namespaces());
    let after = compile(std::slice::from_ref(&p2), &endpoints(), &namespaces());
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
    let before = compile([&p], &endpoints(), &namespaces());
    let after = compile([], &endpoints(), &namespaces());
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
