use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::networking::v1::NetworkPolicy as KubePolicy;
use serde_json::json;
use tartan_api::resources::{GlobalNetworkPolicy, NetworkPolicy};

use super::render;
use super::*;
use crate::ir::{self, Policy};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn ep(ns: &str, pod: &str, ip: &str, iface: Option<&str>) -> Endpoint {
    Endpoint {
        namespace: ns.into(),
        labels: labels(&[("pod", pod)]),
        addrs: vec![ip.parse().unwrap()],
        ports: vec![NamedPort {
            name: "serve-80-tcp".into(),
            protocol: 6,
            port: 80,
        }],
        interface: iface.map(String::from),
    }
}

/// x/a and x/b on this node, y/a elsewhere.
fn endpoints() -> Vec<Endpoint> {
    vec![
        ep("x", "a", "10.0.0.1", Some("tarxa")),
        ep("x", "b", "10.0.0.2", Some("tarxb")),
        ep("y", "a", "10.0.1.1", None),
    ]
}

fn namespaces() -> NamespaceLabels {
    ["x", "y"]
        .iter()
        .map(|n| (n.to_string(), labels(&[(NAMESPACE_NAME_LABEL, n)])))
        .collect()
}

fn kube(spec: serde_json::Value) -> Policy {
    let np: KubePolicy = serde_json::from_value(json!({
        "metadata": {"name": "allow", "namespace": "x"}, "spec": spec
    }))
    .unwrap();
    ir::from_kubernetes(&crate::k8s::from_network_policy(&np).unwrap())
}

fn tartan_ns(spec: serde_json::Value) -> Policy {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "deny", "namespace": "x"}, "spec": spec
    }))
    .unwrap();
    crate::tartan::from_network_policy(&np).unwrap()
}

fn global(name: &str, spec: serde_json::Value) -> Policy {
    let g: GlobalNetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    crate::tartan::from_global_network_policy(&g).unwrap()
}

/// Compare with the file in `policy/tests/snapshots/`; `UPDATE_SNAPSHOTS=1`
/// writes it instead.
fn snapshot(name: &str, value: &serde_json::Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(value).unwrap() + "\n";
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("no snapshot {path:?}; run with UPDATE_SNAPSHOTS=1"));
    assert!(
        want == text,
        "{name}: the compiled output changed; if that is meant, run with UPDATE_SNAPSHOTS=1 and review the diff\n{text}"
    );
}

#[test]
fn no_policy_leaves_every_local_endpoint_open() {
    let rs = compile([], &endpoints(), &namespaces());
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
    let rs = compile(std::slice::from_ref(&p), &endpoints(), &namespaces());
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
    let rs6 = compile(std::slice::from_ref(&p), &dual, &namespaces());
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
    let rs = compile([&deny, &k, &pass], &endpoints(), &namespaces());
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
    let rs = compile([&py, &px], &eps, &namespaces());
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

#[test]
fn a_cached_compile_equals_a_fresh_one_through_changes() {
    let k1 = kube(
        json!({"podSelector": {}, "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b"}}}]}]}),
    );
    let k2 = kube(json!({"podSelector": {}, "ingress": [{"ports": [{"port": 8443}]}]}));
    let g = global(
        "g",
        json!({"order": 10, "ingress": [{"action": "Deny", "source": {"selector": "pod == 'a'"}}]}),
    );
    let ns = namespaces();
    let mut eps = endpoints();
    let mut cache = CompileCache::default();
    for (policies, eps) in [
        (vec![&k1, &g], eps.clone()),
        // A policy changed (same name, other rules).
        (vec![&k2, &g], eps.clone()),
        // An IPv6 address appears: every family-specific rule changes.
        (vec![&k2, &g], {
            eps[0].addrs.push("fd00::1".parse().unwrap());
            eps.clone()
        }),
        (vec![&k1, &g], eps.clone()),
        // A pod relabelled: the addresses a selector picks change.
        (vec![&k1, &g], {
            eps[1].labels = labels(&[("pod", "a")]);
            eps.clone()
        }),
        (vec![&g], eps.clone()),
    ] {
        let cached = compile_cached(&mut cache, policies.iter().copied(), &eps, &ns);
        assert_eq!(cached, compile(policies.iter().copied(), &eps, &ns));
    }
    assert_eq!(cache.len(), 1, "only the policy still in use is kept");
}

/// Prod-hardening policies: each a Log on UDP `log_port`, a Deny on TCP
/// 22, a Deny from a network.
fn hardening(i: u16, log_port: u16) -> Policy {
    global(
        &format!("harden-{i}"),
        json!({"order": 100 + i, "ingress": [
            {"action": "Log", "protocol": "UDP", "destination": {"ports": [log_port]}},
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [22]}},
            {"action": "Deny", "source": {"nets": [format!("192.0.2.{i}/32")]}}
        ]}),
    )
}

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
    let rs = compile(policies.iter(), &endpoints(), &namespaces());
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
    let rs = compile(policies.iter(), &endpoints(), &namespaces());
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
    let rs = compile([&hardening(1, 161)], &endpoints(), &namespaces());
    let rules = rule_texts(&rs, &rs.to_endpoint["tarxa"]);
    assert!(rules.iter().all(|r| !r.contains("\"jump\"")), "{rules:#?}");
    assert_eq!(rules.len(), 4, "{rules:#?}");
}

#[test]
fn a_cached_compile_rebuilds_only_the_profiles_of_a_changed_policy() {
    let hard: Vec<Policy> = (1..=3).map(|i| hardening(i, 161)).collect();
    let only_a = |port: u16| {
        kube(json!({"podSelector": {"matchLabels": {"pod": "a"}},
                    "ingress": [{"ports": [{"port": port}]}]}))
    };
    let (eps, ns) = (endpoints(), namespaces());
    let mut cache = CompileCache::default();
    let mut built = |k: &Policy| {
        let rs = compile_cached(&mut cache, hard.iter().chain([k]), &eps, &ns);
        assert_eq!(rs, compile(hard.iter().chain([k]), &eps, &ns));
        let of = |iface: &str| cache.profiles[&rs.to_endpoint[iface]].built.clone();
        (of("tarxa"), of("tarxb"))
    };
    let (a1, b1) = built(&only_a(80));
    let (a2, b2) = built(&only_a(80));
    assert!(
        Arc::ptr_eq(&a1, &a2) && Arc::ptr_eq(&b1, &b2),
        "nothing changed"
    );
    // x/a's Kubernetes policy changes: its profile is built again, x/b's
    // (the hardening policies alone) is kept.
    let (a3, b3) = built(&only_a(81));
    assert!(!Arc::ptr_eq(&a2, &a3));
    assert!(Arc::ptr_eq(&b2, &b3));
}

mod render_diff;
