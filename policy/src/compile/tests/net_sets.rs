//! Network sets: which selectors pick them, and their networks in the
//! compiled sets.

use std::net::IpAddr;

use super::*;

fn set(namespace: Option<&str>, pairs: &[(&str, &str)], nets: &[&str]) -> NetSet {
    NetSet {
        namespace: namespace.map(Into::into),
        labels: labels(pairs).into(),
        nets: nets
            .iter()
            .map(|n| tartan_api::resources::common::parse_network_or_address(n).unwrap())
            .collect(),
    }
}

/// x/a, x/b and y/a (see `endpoints`), and three sets: `role: ext` in x
/// and in y, and a global one.
fn sets() -> Vec<NetSet> {
    vec![
        set(Some("x"), &[("role", "ext")], &["198.51.100.0/24"]),
        set(Some("y"), &[("role", "ext")], &["203.0.113.0/24"]),
        set(None, &[("role", "ext")], &["192.0.2.0/24", "2001:db8::/32"]),
    ]
}

fn ip(a: &str) -> IpAddr {
    a.parse().unwrap()
}

/// Whether an element of set `name` (an address set's range, or a run
/// set's box) holds `a`.
fn holds(rs: &Ruleset, name: &str, a: &str) -> bool {
    let a = ip(a);
    rs.sets[name].elements.iter().any(|e| match e {
        Element::Range(lo, hi) => *lo <= a && a <= *hi,
        Element::Span { addrs, .. } => addrs.0 <= a && a <= addrs.1,
        Element::Port(x, ..) => *x == a,
    })
}

/// The one set whose name starts with `prefix`.
fn only_set<'a>(rs: &'a Ruleset, prefix: &str) -> &'a str {
    let names: Vec<&String> = rs.sets.keys().filter(|n| n.starts_with(prefix)).collect();
    assert_eq!(names.len(), 1, "{prefix}: {:?}", rs.sets.keys());
    names[0]
}

#[test]
fn a_global_policy_allows_egress_to_a_global_network_set() {
    let g = global(
        "g",
        json!({"selector": "pod == 'a'", "egress": [
            {"action": "Allow", "destination": {"selector": "role == 'ext'", "namespaceSelector": "global()"}}
        ]}),
    );
    let rs = compile([&g], &endpoints(), &sets(), &namespaces());
    let run = only_set(&rs, "r");
    assert!(holds(&rs, run, "192.0.2.77"), "the global set");
    assert!(!holds(&rs, run, "198.51.100.1"), "not the set of x");
    assert!(!holds(&rs, run, "203.0.113.1"), "not the set of y");
    // A lone selector in a GlobalNetworkPolicy: every namespace's sets and
    // the global ones.
    let every = global(
        "g",
        json!({"selector": "pod == 'a'", "egress": [
            {"action": "Allow", "destination": {"selector": "role == 'ext'"}}
        ]}),
    );
    let rs = compile([&every], &endpoints(), &sets(), &namespaces());
    let run = only_set(&rs, "r");
    for a in ["192.0.2.77", "198.51.100.1", "203.0.113.1"] {
        assert!(holds(&rs, run, a), "{a}");
    }
    // The IPv6 network waits for an endpoint with IPv6.
    assert!(rs.sets.keys().all(|n| !n.ends_with('6')));
    let mut dual = endpoints();
    dual[0].addrs.push(ip("fd00::1"));
    let rs6 = compile([&every], &dual, &sets(), &namespaces());
    let r6 = (rs6.sets.keys())
        .find(|n| n.starts_with('r') && n.ends_with('6'))
        .unwrap();
    assert!(holds(&rs6, r6, "2001:db8::5"), "{r6}");
}

#[test]
fn a_namespaced_policy_picks_network_sets_of_its_namespace_only() {
    let p = tartan_ns(json!({"selector": "all()", "egress": [
        {"action": "Allow", "destination": {"selector": "role == 'ext'"}}
    ]}));
    let rs = compile([&p], &endpoints(), &sets(), &namespaces());
    let run = only_set(&rs, "r");
    assert!(holds(&rs, run, "198.51.100.1"), "x's set");
    assert!(!holds(&rs, run, "203.0.113.1"), "not y's");
    assert!(!holds(&rs, run, "192.0.2.1"), "not the global one");
    // With a namespaceSelector: the sets of the namespaces it picks.
    let to_y = tartan_ns(json!({"selector": "all()", "egress": [
        {"action": "Allow", "destination": {"selector": "role == 'ext'",
            "namespaceSelector": "kubernetes.io/metadata.name == 'y'"}}
    ]}));
    let rs = compile([&to_y], &endpoints(), &sets(), &namespaces());
    let run = only_set(&rs, "r");
    assert!(holds(&rs, run, "203.0.113.1") && !holds(&rs, run, "198.51.100.1"));
    // A set in a namespace felix has not seen: only its name label.
    let mut unseen = sets();
    unseen[1].namespace = Some("z".into());
    let to_z = tartan_ns(json!({"selector": "all()", "egress": [
        {"action": "Allow", "destination": {
            "namespaceSelector": "kubernetes.io/metadata.name == 'z'"}}
    ]}));
    let rs = compile([&to_z], &endpoints(), &unseen, &namespaces());
    assert!(holds(&rs, only_set(&rs, "r"), "203.0.113.1"));
}

#[test]
fn global_in_a_namespaced_policys_rule_picks_the_global_sets() {
    for (ns_selector, global_set, x_set) in [
        ("global()", true, false),
        ("global() || kubernetes.io/metadata.name == 'x'", true, true),
        // As Calico reads it: all() is every namespace, not what has none.
        ("all()", false, true),
        ("all() || global()", true, true),
        ("!has(env)", true, true),
        ("kubernetes.io/metadata.name == 'x'", false, true),
    ] {
        let p = tartan_ns(json!({"selector": "all()", "ingress": [
            {"action": "Allow", "source": {"namespaceSelector": ns_selector}}
        ]}));
        let rs = compile([&p], &endpoints(), &sets(), &namespaces());
        let run = only_set(&rs, "r");
        assert_eq!(holds(&rs, run, "192.0.2.1"), global_set, "{ns_selector}");
        assert_eq!(holds(&rs, run, "198.51.100.1"), x_set, "{ns_selector}");
        // Pods are in namespaces: global() alone picks none.
        assert_eq!(holds(&rs, run, "10.0.0.2"), x_set, "{ns_selector}");
    }
}

#[test]
fn a_kubernetes_peer_never_picks_a_network_set() {
    let k = kube(json!({"podSelector": {}, "ingress": [
        {"from": [{"podSelector": {}}, {"namespaceSelector": {}}]}
    ]}));
    let with = compile([&k], &endpoints(), &sets(), &namespaces());
    assert_eq!(with, compile([&k], &endpoints(), &[], &namespaces()));
    let run = only_set(&with, "r");
    assert!(holds(&with, run, "10.0.1.1"), "pods");
    assert!(!holds(&with, run, "198.51.100.1") && !holds(&with, run, "192.0.2.1"));
}

#[test]
fn a_deny_to_a_network_set_and_a_negated_selector_over_sets() {
    let deny = tartan_ns(json!({"selector": "all()", "order": 1, "egress": [
        {"action": "Deny", "destination": {"selector": "role == 'ext'"}},
        {"action": "Allow"}
    ]}));
    let rs = compile([&deny], &endpoints(), &sets(), &namespaces());
    let runs: Vec<&String> = rs.sets.keys().filter(|n| n.starts_with('r')).collect();
    assert!(
        runs.iter().any(|r| holds(&rs, r, "198.51.100.9")),
        "{:?}",
        rs.sets
    );
    // A lone notSelector keeps the namespace: pods and sets of x not
    // matching, written with two address sets.
    let sets = {
        let mut s = sets();
        s.push(set(Some("x"), &[("role", "bad")], &["198.51.100.128/25"]));
        s
    };
    let not = tartan_ns(json!({"selector": "all()", "ingress": [
        {"action": "Allow", "source": {"notSelector": "role == 'bad'"}}
    ]}));
    let rs = compile([&not], &endpoints(), &sets, &namespaces());
    let scope = EndpointSel {
        namespaces: Namespaces::Named("x".into()),
        pods: crate::Selector::All,
        net_sets: true,
    };
    let bad = EndpointSel {
        pods: crate::Selector::parse("role == 'bad'").unwrap(),
        ..scope.clone()
    };
    let (scope, bad) = (
        selector_set(&scope, false, true),
        selector_set(&bad, false, true),
    );
    assert!(holds(&rs, &scope, "198.51.100.1") && holds(&rs, &scope, "10.0.0.1"));
    assert!(!holds(&rs, &scope, "203.0.113.1"), "y's set");
    assert_eq!(
        rs.sets[&bad].elements,
        [Element::Range(ip("198.51.100.128"), ip("198.51.100.255"))].into()
    );
}

#[test]
fn overlapping_networks_and_addresses_are_merged_into_disjoint_ranges() {
    let sets = [set(
        Some("x"),
        &[("role", "ext")],
        &[
            "10.1.0.0/24",
            "10.1.0.5",
            "10.1.0.7/32",
            "10.1.1.0/32",
            "10.1.2.9",
        ],
    )];
    // A Pass is written as it is: its selector is an address set.
    let p = tartan_ns(json!({"selector": "all()", "ingress": [
        {"action": "Pass", "source": {"selector": "role == 'ext' || pod == 'b'"}}
    ]}));
    let rs = compile([&p], &endpoints(), &sets, &namespaces());
    let name = only_set(&rs, "s");
    let def = &rs.sets[name];
    assert_eq!(
        def.kind,
        SetKind::Addr {
            v6: false,
            ranges: true
        }
    );
    assert_eq!(
        def.elements,
        [
            Element::Range(ip("10.0.0.2"), ip("10.0.0.2")),
            // The /24 and the adjacent /32 in one range.
            Element::Range(ip("10.1.0.0"), ip("10.1.1.0")),
            Element::Range(ip("10.1.2.9"), ip("10.1.2.9")),
        ]
        .into()
    );
    // Written as an interval set, a range where there are several
    // addresses.
    let text = render::full(&rs).to_string();
    assert!(text.contains("\"interval\""), "{text}");
    assert!(
        text.contains(r#"{"range":["10.1.0.0","10.1.1.0"]}"#),
        "{text}"
    );
}

#[test]
fn a_changed_range_is_deleted_whole_before_the_new_one_is_added() {
    let p = tartan_ns(json!({"selector": "all()", "ingress": [
        {"action": "Pass", "source": {"selector": "role == 'ext'"}}
    ]}));
    let before = [set(
        Some("x"),
        &[("role", "ext")],
        &["10.1.0.0/24", "10.9.0.1"],
    )];
    let after = [set(
        Some("x"),
        &[("role", "ext")],
        &["10.1.0.0/23", "10.9.0.1"],
    )];
    let old = compile([&p], &endpoints(), &before, &namespaces());
    let new = compile([&p], &endpoints(), &after, &namespaces());
    let d = render::diff(&old, &new).unwrap().to_json();
    let cmds = d["nftables"].as_array().unwrap();
    let at = |verb: &str, range: &str| {
        cmds.iter()
            .position(|c| c[verb]["element"]["elem"].to_string().contains(range))
            .unwrap_or_else(|| panic!("{verb} {range}: {d:#}"))
    };
    let gone = at("delete", r#"["10.1.0.0","10.1.0.255"]"#);
    let came = at("add", r#"["10.1.0.0","10.1.1.255"]"#);
    assert!(gone < came, "{d:#}");
    // The element unchanged is neither deleted nor added.
    assert!(!d.to_string().contains("10.9.0.1"), "{d:#}");
}

#[test]
fn a_cached_compile_follows_changed_network_sets() {
    let policies = [
        global(
            "g",
            json!({"selector": "pod == 'a'", "egress": [
                {"action": "Deny", "destination": {"selector": "role == 'ext'"}},
                {"action": "Pass", "destination": {"notSelector": "role == 'ext'"}}
            ]}),
        ),
        tartan_ns(json!({"selector": "all()", "ingress": [
            {"action": "Allow", "source": {"namespaceSelector": "global()"}}
        ]})),
    ];
    let (eps, ns) = (endpoints(), namespaces());
    let mut cache = CompileCache::default();
    let mut s = sets();
    // Each compile after a change to the sets: none, other networks,
    // relabelled out of the selectors and back, one gone.
    let steps = 0..5;
    let change = |step: usize, s: &mut Vec<NetSet>| match step {
        1 => s[0].nets = ["198.51.100.0/25".parse().unwrap()].into(),
        2 => s[2].labels = labels(&[("role", "int")]).into(),
        3 => s[2].labels = labels(&[("role", "ext")]).into(),
        4 => {
            s.remove(1);
        }
        _ => {}
    };
    let mut seen = Vec::new();
    for step in steps {
        change(step, &mut s);
        let cached = compile_cached(&mut cache, &policies, &eps, &s, &ns);
        assert_eq!(cached, compile(&policies, &eps, &s, &ns));
        seen.push(cached);
    }
    seen.dedup();
    assert_eq!(seen.len(), 5, "each change changed the sets");
}

/// Without any network set a selector's address set is the plain set of
/// single addresses felix writes over netlink; the first set with
/// networks turns it into the interval form, under another name, and the
/// rule names that one; the last set gone, back again.
#[test]
fn selector_sets_are_plain_until_a_network_set_has_networks() {
    let p = tartan_ns(json!({"selector": "all()", "ingress": [
        {"action": "Pass", "source": {"selector": "role == 'ext' || pod == 'b'"}}
    ]}));
    let plain = compile([&p], &endpoints(), &[], &namespaces());
    let name = only_set(&plain, "s").to_string();
    assert_eq!(
        plain.sets[&name].kind,
        SetKind::Addr {
            v6: false,
            ranges: false
        }
    );
    assert!(
        plain.sets[&name]
            .elements
            .iter()
            .all(|e| matches!(e, Element::Range(lo, hi) if lo == hi))
    );
    let text = render::full(&plain).to_string();
    assert!(!text.contains("\"interval\""), "{text}");
    let empty = [set(Some("x"), &[("role", "ext")], &[])];
    assert_eq!(compile([&p], &endpoints(), &empty, &namespaces()), plain);

    let mut cache = CompileCache::default();
    let with = [set(Some("x"), &[("role", "ext")], &["198.51.100.0/24"])];
    let first = compile_cached(&mut cache, [&p], &endpoints(), &[], &namespaces());
    assert_eq!(first, plain);
    let ranged = compile_cached(&mut cache, [&p], &endpoints(), &with, &namespaces());
    assert_eq!(ranged, compile([&p], &endpoints(), &with, &namespaces()));
    let rname = only_set(&ranged, "s").to_string();
    assert_eq!(rname, format!("{name}r"));
    assert!(holds(&ranged, &rname, "198.51.100.7"));
    let chains = format!("{:?}", ranged.chains);
    assert!(chains.contains(&format!("@{rname}")), "{chains}");
    assert!(!chains.contains(&format!("@{name}\"")), "{chains}");
    // Both ways the difference is one the kernel takes: the new set
    // added, the chains rewritten, the old set deleted.
    assert!(render::diff(&plain, &ranged).is_some());
    let back = compile_cached(&mut cache, [&p], &endpoints(), &[], &namespaces());
    assert_eq!(back, plain);
}
