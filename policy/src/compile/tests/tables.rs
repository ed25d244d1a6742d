//! Compiled tables for whole policy sets: open endpoints, Kubernetes and
//! ordered Tartan policies, compared with their snapshots.

use super::*;

#[test]
fn no_policy_leaves_every_local_endpoint_open() {
    let rs = compile([], &endpoints(), &[], &namespaces());
    assert!(rs.chains.is_empty() && rs.sets.is_empty());
    assert_eq!(
        rs.to_endpoint,
        BTreeMap::from([
            ("tarxa".to_string(), OPEN_CHAIN.to_string()),
            ("tarxb".to_string(), OPEN_CHAIN.to_string())
        ])
    );
    assert_eq!(rs.to_endpoint, rs.from_endpoint);
}

#[test]
fn kubernetes_allow_from_another_namespace_on_a_named_port() {
    let p = kube(json!({
        "podSelector": {"matchLabels": {"pod": "a"}},
        "ingress": [{
            "from": [{"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: "y"}}}],
            "ports": [{"port": "serve-80-tcp"}]
        }]
    }));
    let rs = compile(std::slice::from_ref(&p), &endpoints(), &[], &namespaces());
    // Only x/a is selected; x/b stays open; egress is not governed.
    let profile = &rs.to_endpoint["tarxa"];
    assert!(profile.starts_with("qi"), "{profile}");
    assert_eq!(rs.to_endpoint["tarxb"], OPEN_CHAIN);
    assert_eq!(rs.from_endpoint["tarxa"], OPEN_CHAIN);
    // The rule is one lookup in a run set: y/a's address, TCP, and x/a's
    // number for the named port; then the profile's final drop.
    let chain = &rs.chains[profile];
    assert_eq!(chain.len(), 2, "{chain:?}");
    let runs: Vec<(&String, &SetDef)> =
        rs.sets.iter().filter(|(n, _)| n.starts_with('r')).collect();
    assert_eq!(runs.len(), 1, "{:?}", rs.sets);
    assert_eq!(
        runs[0].1.kind,
        SetKind::Run {
            v6: false,
            ports: true
        }
    );
    assert_eq!(
        runs[0].1.elements.iter().collect::<Vec<_>>(),
        [&Element::Span {
            addrs: ("10.0.1.1".parse().unwrap(), "10.0.1.1".parse().unwrap()),
            protos: (6, 6),
            ports: Some((80, 80)),
        }]
    );
    // No per-selector or named-port set: the run set holds it all.
    assert_eq!(rs.sets.len(), 1);
    // With an IPv6 address somewhere, an IPv6 lookup too.
    let mut dual = endpoints();
    dual[2].addrs.push("fd00::1".parse().unwrap());
    let rs6 = compile(std::slice::from_ref(&p), &dual, &[], &namespaces());
    assert_eq!(rs6.chains[&rs6.to_endpoint["tarxa"]].len(), 3);
    let v6 = rs6
        .sets
        .values()
        .find(|d| {
            d.kind
                == SetKind::Run {
                    v6: true,
                    ports: true,
                }
        })
        .unwrap();
    assert_eq!(v6.elements.len(), 1);
    snapshot("kubernetes_named_port", &render::full(&rs).to_json());
}

#[test]
fn ordered_tartan_policies_pass_and_log() {
    let deny = tartan_ns(json!({
        "order": 100,
        "selector": "pod == 'a'",
        "ingress": [
            {"action": "Log", "protocol": "TCP", "destination": {"ports": [81]}},
            {"action": "Deny", "protocol": "TCP", "source": {"notNets": ["10.0.0.0/24"]}}
        ]
    }));
    let pass = global(
        "pass-y",
        json!({
            "order": 10,
            "ingress": [{"action": "Pass", "source": {"namespaceSelector": "kubernetes.io/metadata.name == 'y'"}}]
        }),
    );
    let k = kube(json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {}}]}]}));
    let rs = compile([&deny, &k, &pass], &endpoints(), &[], &namespaces());
    // x/a: pass-y (10), deny (100), the Kubernetes policy (1000). The
    // Pass goes to the profile's Kubernetes chain; the Log and the Deny
    // (a negated network) are written as they are.
    let qname = &rs.to_endpoint["tarxa"];
    let qa = &rs.chains[qname];
    let text = serde_json::to_string(&**qa).unwrap();
    let k = pass_chain(qname);
    assert!(
        text.contains(&format!("\"goto\":{{\"target\":\"{k}\"}}")),
        "{text}"
    );
    assert!(text.contains("\"log\""), "{text}");
    let pos = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    // In order: the pass, the log, the deny, the Kubernetes allow run.
    assert!(pos(&k) < pos("\"log\"") && pos("\"log\"") < pos("\"drop\""));
    assert!(pos("\"drop\"") < pos("\"accept\""));
    // The Kubernetes chain: its run (IPv4) and drop.
    assert_eq!(rs.chains[&k].len(), 2);
    assert!(
        serde_json::to_string(&*rs.chains[&k])
            .unwrap()
            .contains("\"accept\"")
    );
    // x/b has another profile (no deny): the profiles are distinct chains.
    assert_ne!(rs.to_endpoint["tarxa"], rs.to_endpoint["tarxb"]);
    snapshot("ordered_pass_log", &render::full(&rs).to_json());
}
