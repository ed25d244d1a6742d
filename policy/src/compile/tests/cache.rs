//! The compile cache: a cached compile equals a fresh one through
//! changes, and rebuilds only the profiles a changed policy touches.

use super::*;

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
            eps[1].labels = labels(&[("pod", "a")]).into();
            eps.clone()
        }),
        (vec![&g], eps.clone()),
    ] {
        let cached = compile_cached(&mut cache, policies.iter().copied(), &eps, &[], &ns);
        assert_eq!(cached, compile(policies.iter().copied(), &eps, &[], &ns));
    }
    assert_eq!(cache.len(), 1, "only the policy still in use is kept");
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
        let rs = compile_cached(&mut cache, hard.iter().chain([k]), &eps, &[], &ns);
        assert_eq!(rs, compile(hard.iter().chain([k]), &eps, &[], &ns));
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
