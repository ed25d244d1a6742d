//! Generated Tartan policies (namespaced and global): rules with any
//! condition, and the Log and Deny stretches the compiler merges and
//! guards.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::clusters::pick;
use super::policies::{Spec, strs};

const NETS: [&str; 12] = [
    "10.0.0.0/24",
    "10.0.1.0/24",
    "10.0.0.0/16",
    "10.0.1.0/30",
    "10.0.0.2",
    "192.0.2.0/28",
    "192.0.2.8/29",
    "203.0.113.0/24",
    "0.0.0.0/0",
    "fd00::/64",
    "fd00::2/128",
    "2001:db8::/32",
];

const POD_SELECTORS: [&str; 9] = [
    "all()",
    "has(net)",
    "app == 'a'",
    "app == 'b'",
    "app in {'a', 'c'}",
    "has(tier)",
    "tier != 'db'",
    "!has(tier)",
    "app == 'c' || tier == 'web'",
];

const NS_SELECTORS: [&str; 8] = [
    "all()",
    "env == 'prod'",
    "env == 'dev'",
    "kubernetes.io/metadata.name == 'ns1'",
    "kubernetes.io/metadata.name in {'ns0', 'ns2'}",
    "global()",
    "global() || env == 'prod'",
    "!has(env)",
];

/// Calico's selectors over service accounts' labels (unprefixed keys).
const SA_SELECTORS: [&str; 5] = [
    "all()",
    "team == 'db'",
    "has(team)",
    "!has(team)",
    "projectcalico.org/name == 'sa-a'",
];

/// A rule end's `serviceAccounts`.
fn sa_matches() -> Vec<Value> {
    let mut out = vec![
        json!({"names": ["sa-a"]}),
        json!({"names": ["sa-b", "sa-c"]}),
    ];
    out.extend(SA_SELECTORS.iter().map(|s| json!({"selector": s})));
    out.push(json!({"names": ["sa-a", "sa-b"], "selector": "has(team)"}));
    out
}

fn port_items() -> Vec<Value> {
    vec![
        json!(22),
        json!(53),
        json!(80),
        json!(161),
        json!(8080),
        json!("80:90"),
        json!("5000:9000"),
        json!("http"),
        json!("dns"),
        json!("metrics"),
    ]
}

/// One end of a Tartan rule, every field possible (ports are dropped by
/// the rule when its protocol has none).
fn entity() -> impl Strategy<Value = Value> {
    let list = |p| prop::option::weighted(p, prop::collection::vec(pick(strs(&NETS)), 1..=2));
    let ports = |p| prop::option::weighted(p, prop::collection::vec(pick(port_items()), 1..=2));
    (
        list(0.25),
        list(0.15),
        prop::option::weighted(0.3, pick(strs(&POD_SELECTORS))),
        prop::option::weighted(0.15, pick(strs(&POD_SELECTORS))),
        prop::option::weighted(0.15, pick(strs(&NS_SELECTORS))),
        ports(0.4),
        ports(0.15),
        prop::option::weighted(0.15, pick(sa_matches())),
    )
        .prop_map(|(nets, not_nets, sel, not_sel, ns, ports, not_ports, sa)| {
            let fields = [
                ("nets", nets.map(|v| json!(v))),
                ("notNets", not_nets.map(|v| json!(v))),
                ("selector", sel.map(|v| json!(v))),
                ("notSelector", not_sel.map(|v| json!(v))),
                ("namespaceSelector", ns.map(|v| json!(v))),
                ("ports", ports.map(|v| json!(v))),
                ("notPorts", not_ports.map(|v| json!(v))),
                ("serviceAccounts", sa),
            ];
            let present = fields
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), v?)));
            Value::Object(present.collect())
        })
}

fn icmp_match() -> impl Strategy<Value = Value> {
    (
        pick(vec![0u8, 3, 8, 128, 1]),
        prop::option::of(pick(vec![0u8, 1, 3])),
    )
        .prop_map(|(t, c)| match c {
            Some(c) => json!({"type": t, "code": c}),
            None => json!({"type": t}),
        })
}

pub(super) fn is_empty(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.is_empty())
}

/// A Tartan rule with any condition.
fn tartan_rule() -> impl Strategy<Value = Value> {
    (
        pick(strs(&[
            "Log", "Log", "Log", "Deny", "Deny", "Deny", "Allow", "Allow", "Pass",
        ])),
        pick(vec![
            None,
            None,
            None,
            Some("TCP"),
            Some("TCP"),
            Some("UDP"),
            Some("UDP"),
            Some("ICMP"),
            Some("SCTP"),
            Some("ICMPv6"),
        ]),
        prop::option::weighted(0.15, pick(strs(&["TCP", "UDP", "ICMP"]))),
        prop::option::weighted(0.1, pick(vec![4u8, 6])),
        prop::option::weighted(0.5, icmp_match()),
        prop::option::weighted(0.2, icmp_match()),
        entity(),
        entity(),
    )
        .prop_map(
            |(action, protocol, not_protocol, ip_version, icmp, not_icmp, mut src, mut dst)| {
                let mut r = json!({"action": action});
                if let Some(p) = protocol {
                    r["protocol"] = json!(p);
                }
                if let Some(p) = not_protocol
                    && Some(p) != protocol
                {
                    r["notProtocol"] = json!(p);
                }
                if let Some(v) = ip_version {
                    r["ipVersion"] = json!(v);
                }
                // Ports need a protocol with ports, ICMP matches ICMP (as
                // the API's validation wants).
                if !matches!(protocol, Some("TCP" | "UDP" | "SCTP")) {
                    for e in [&mut src, &mut dst] {
                        let m = e.as_object_mut().unwrap();
                        m.remove("ports");
                        m.remove("notPorts");
                    }
                }
                if matches!(protocol, Some("ICMP" | "ICMPv6")) {
                    if let Some(m) = icmp {
                        r["icmp"] = m;
                    }
                    if let Some(m) = not_icmp {
                        r["notICMP"] = m;
                    }
                }
                for (k, e) in [("source", src), ("destination", dst)] {
                    if !is_empty(&e) {
                        r[k] = e;
                    }
                }
                r
            },
        )
}

/// A rule the compiler can merge into a run (and guard): the peer's
/// nets and selectors, protocol, destination ports. `peer` is placed on
/// the peer's side once the direction is known.
#[derive(Debug, Clone)]
struct BoxRule {
    action: &'static str,
    protocol: Option<&'static str>,
    peer: Value,
    ports: Option<Vec<Value>>,
}

fn box_rule() -> impl Strategy<Value = BoxRule> {
    let nets = || prop::collection::vec(pick(strs(&NETS)), 1..=2);
    let sel = || pick(strs(&POD_SELECTORS));
    let ns = || pick(strs(&NS_SELECTORS));
    let peer = prop_oneof![
        2 => Just(json!({})),
        3 => nets().prop_map(|n| json!({"nets": n})),
        2 => sel().prop_map(|s| json!({"selector": s})),
        1 => (sel(), ns()).prop_map(|(s, n)| json!({"selector": s, "namespaceSelector": n})),
        1 => ns().prop_map(|n| json!({"namespaceSelector": n})),
        1 => (nets(), sel()).prop_map(|(n, s)| json!({"nets": n, "selector": s})),
    ];
    (
        // A Pass (never merged) now and then splits a stretch.
        pick(strs(&[
            "Log", "Log", "Deny", "Deny", "Deny", "Allow", "Pass",
        ])),
        pick(vec![
            None,
            Some("TCP"),
            Some("TCP"),
            Some("UDP"),
            Some("ICMP"),
        ]),
        peer,
        prop::option::weighted(0.6, prop::collection::vec(pick(port_items()), 1..=2)),
    )
        .prop_map(|(action, protocol, peer, ports)| {
            // Ports need a protocol with ports.
            let (protocol, ports) = match (protocol, ports) {
                (None, Some(p)) => (Some("TCP"), Some(p)),
                (Some("ICMP"), Some(_)) => (Some("ICMP"), None),
                other => other,
            };
            BoxRule {
                action,
                protocol,
                peer,
                ports,
            }
        })
}

fn box_rule_json(r: &BoxRule, ingress: bool) -> Value {
    let mut out = json!({"action": r.action});
    if let Some(p) = r.protocol {
        out["protocol"] = json!(p);
    }
    let mut dst = json!({});
    if ingress {
        if !is_empty(&r.peer) {
            out["source"] = r.peer.clone();
        }
    } else {
        dst = r.peer.clone();
    }
    if let Some(p) = &r.ports {
        dst["ports"] = json!(p);
    }
    if !is_empty(&dst) {
        out["destination"] = dst;
    }
    out
}

fn orders() -> impl Strategy<Value = Option<f64>> {
    pick(vec![
        Some(5.0),
        Some(10.0),
        Some(100.0),
        Some(100.0),
        Some(500.0),
        Some(1000.0),
        Some(1500.0),
        None,
    ])
}

/// A namespaced or global Tartan policy from its parts.
#[allow(clippy::too_many_arguments)]
fn tartan_spec_from(
    global: bool,
    ns: usize,
    order: Option<f64>,
    selector: &str,
    ns_selector: Option<&str>,
    sa_selector: Option<&str>,
    ingress: Option<Vec<Value>>,
    egress: Option<Vec<Value>>,
) -> Spec {
    let mut s = json!({"selector": selector});
    if let Some(sa) = sa_selector {
        s["serviceAccountSelector"] = json!(sa);
    }
    if let Some(o) = order {
        s["order"] = json!(o);
    }
    let mut types = Vec::new();
    if let Some(rules) = ingress {
        types.push("Ingress");
        s["ingress"] = json!(rules);
    }
    if let Some(rules) = egress {
        types.push("Egress");
        s["egress"] = json!(rules);
    }
    s["types"] = json!(types);
    if global {
        if let Some(n) = ns_selector {
            s["namespaceSelector"] = json!(n);
        }
        Spec::Global(s)
    } else {
        Spec::Tartan(ns, s)
    }
}

/// Log and Deny stretches: rules the compiler merges and guards.
pub(super) fn hardening_spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        0..3usize,
        orders(),
        pick(strs(&[
            "all()",
            "all()",
            "all()",
            "app == 'a'",
            "has(tier)",
        ])),
        prop::option::weighted(0.2, pick(strs(&NS_SELECTORS))),
        pick(vec![
            (true, false),
            (true, false),
            (false, true),
            (true, true),
        ]),
        prop::collection::vec(box_rule(), 2..=5),
        prop::collection::vec(box_rule(), 2..=5),
    )
        .prop_map(|(global, ns, order, sel, nss, (i, e), ir, er)| {
            let rules =
                |rs: &[BoxRule], ingress| rs.iter().map(|r| box_rule_json(r, ingress)).collect();
            tartan_spec_from(
                global,
                ns,
                order,
                sel,
                nss,
                None,
                i.then(|| rules(&ir, true)),
                e.then(|| rules(&er, false)),
            )
        })
}

/// Tartan policies with any rule.
pub(super) fn tartan_spec() -> impl Strategy<Value = Spec> {
    (
        any::<bool>(),
        0..3usize,
        orders(),
        pick(strs(&POD_SELECTORS)),
        prop::option::weighted(0.3, pick(strs(&NS_SELECTORS))),
        pick(vec![(true, false), (false, true), (true, true)]),
        prop::collection::vec(tartan_rule(), 0..=4),
        prop::collection::vec(tartan_rule(), 0..=4),
        prop::option::weighted(0.15, pick(strs(&SA_SELECTORS))),
    )
        .prop_map(|(global, ns, order, sel, nss, (i, e), ir, er, sa)| {
            tartan_spec_from(
                global,
                ns,
                order,
                sel,
                nss,
                sa,
                i.then_some(ir),
                e.then_some(er),
            )
        })
}
