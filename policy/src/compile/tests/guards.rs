//! Stretches of Log and Deny rules behind one guard per shape, and what
//! ends a stretch or stays inline.

use super::*;

fn rule_texts(rs: &Ruleset, chain: &str) -> Vec<String> {
    rs.chains[chain]
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect()
}

/// The chain a rule's `jump`/`goto` goes to.
fn target_of(rule: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(rule).unwrap();
    let last = v.as_array().unwrap().last().unwrap().clone();
    for k in ["jump", "goto"] {
        if let Some(t) = last.pointer(&format!("/{k}/target")) {
            return t.as_str().unwrap().to_string();
        }
    }
    panic!("no jump or goto: {rule}")
}

#[test]
fn a_stretch_of_log_and_deny_rules_sits_behind_one_guard_per_shape() {
    let mut policies: Vec<Policy> = (1..=4).map(|i| hardening(i, 160 + i)).collect();
    policies.push(kube(
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
    ));
    let rs = compile(policies.iter(), &endpoints(), &[], &namespaces());
    let q = rs.to_endpoint["tarxa"].clone();
    let rules = rule_texts(&rs, &q);
    // The profile: a jump to the guard chain, the Kubernetes run, drop.
    assert_eq!(rules.len(), 3, "{rules:#?}");
    let guard = target_of(&rules[0]);
    assert!(
        rules[0].contains("\"jump\"") && guard.starts_with('g'),
        "{rules:#?}"
    );
    // The guard: one lookup per shape (portless for the networks, ported
    // for the Log and TCP 22 rules), each a goto into the stretch.
    let g = rule_texts(&rs, &guard);
    assert_eq!(g.len(), 2, "{g:#?}");
    let body = target_of(&g[0]);
    assert!(body.starts_with('x'), "{g:#?}");
    assert!(
        g.iter()
            .all(|r| r.contains("\"goto\"") && target_of(r) == body)
    );
    // The stretch holds every rule in order: 4 logs and each policy's
    // deny run (a Log between policies keeps their runs apart).
    let x = rule_texts(&rs, &body);
    let logs = x.iter().filter(|r| r.contains("\"log\"")).count();
    assert_eq!(logs, 4, "{x:#?}");
    assert!(x.iter().all(|r| !r.contains("\"accept\"")), "{x:#?}");
    // No drop at its end: a packet that no rule decides returns to the
    // profile after the jump.
    assert_ne!(x.last().unwrap(), "[{\"drop\":null}]");
    // The guard sets hold the union of the stretch's boxes.
    let set_of = |r: &str| {
        let name = rs
            .sets
            .keys()
            .find(|n| r.contains(&format!("\"@{n}\"")))
            .unwrap();
        rs.sets[name].elements.clone()
    };
    let (portless, ported) = if g[0].contains("\"th\"") {
        (set_of(&g[1]), set_of(&g[0]))
    } else {
        (set_of(&g[0]), set_of(&g[1]))
    };
    let nets: BTreeSet<String> = portless
        .iter()
        .map(|e| match e {
            Element::Span { addrs, protos, .. } => {
                assert_eq!(*protos, (0, 255));
                format!("{}-{}", addrs.0, addrs.1)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(nets, BTreeSet::from(["192.0.2.1-192.0.2.4".to_string()]));
    let ports: BTreeSet<(u8, (u16, u16))> = ported
        .iter()
        .map(|e| match e {
            Element::Span {
                protos,
                ports: Some(p),
                ..
            } => (protos.0, *p),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ports, BTreeSet::from([(6, (22, 22)), (17, (161, 164))]));
    // Both local pods have the same policies: they share the profile,
    // and the stretch's chains are named after its rules alone.
    assert_eq!(rs.to_endpoint["tarxb"], q);
}

#[test]
fn a_rule_matching_everything_ends_a_stretch_and_short_ones_stay_inline() {
    let mut policies: Vec<Policy> = (1..=5).map(|i| hardening(i, 161)).collect();
    // A catch-all Log between them: it would make the guard match every
    // packet, so it splits the stretch in two.
    policies.push(global(
        "log-all",
        json!({"order": 102, "ingress": [{"action": "Log"}]}),
    ));
    let rs = compile(policies.iter(), &endpoints(), &[], &namespaces());
    let q = rs.to_endpoint["tarxa"].clone();
    let rules = rule_texts(&rs, &q);
    let pos_log_all = rules
        .iter()
        .position(|r| r.contains("\"log\"") && !r.contains("\"@"))
        .unwrap_or_else(|| panic!("{rules:#?}"));
    // harden-1 and -2 (orders 101, 102; at 102 "harden-2" sorts before
    // "log-all") form the first stretch, harden-3 to -5 the second.
    let jumps: Vec<usize> = rules
        .iter()
        .enumerate()
        .filter(|(_, r)| r.contains("\"jump\""))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(jumps.len(), 2, "{rules:#?}");
    assert!(
        jumps[0] < pos_log_all && pos_log_all < jumps[1],
        "{rules:#?}"
    );
    // One policy alone (Log, one deny run per shape: 3 rules, against 2
    // guard lookups) is not worth a guard.
    let rs = compile([&hardening(1, 161)], &endpoints(), &[], &namespaces());
    let rules = rule_texts(&rs, &rs.to_endpoint["tarxa"]);
    assert!(rules.iter().all(|r| !r.contains("\"jump\"")), "{rules:#?}");
    assert_eq!(rules.len(), 4, "{rules:#?}");
}
