//! Host endpoints: which policies govern them, in what order, the default
//! drop, the failsafe ports, named ports, and the base chains' maps.

use std::sync::Arc;

use nftables::stmt::Statement;

use super::*;
use crate::compile::host::{FailsafePort, HostEndpoint, HostInterface, Hosts};

fn hep(name: &str, iface: HostInterface, role: &str) -> HostEndpoint {
    HostEndpoint {
        name: name.into(),
        labels: Arc::new(labels(&[("role", role)])),
        ports: [NamedPort {
            name: "admin".into(),
            protocol: 6,
            port: 8443,
        }]
        .into(),
        interface: iface,
        locked: false,
    }
}

fn hosts(endpoints: Vec<HostEndpoint>) -> Hosts {
    Hosts {
        endpoints,
        failsafe_in: vec![FailsafePort {
            protocol: 6,
            port: 22,
        }],
        failsafe_out: vec![FailsafePort {
            protocol: 17,
            port: 53,
        }],
        tunnel_peers: ["192.0.2.2".parse().unwrap()].into(),
        vxlan_port: 4789,
    }
}

fn build(policies: &[Policy], h: &Hosts) -> Ruleset {
    compile_with_hosts(
        &mut CompileCache::default(),
        policies,
        &endpoints(),
        &[],
        Families::of(&endpoints()),
        &namespaces(),
        h,
    )
}

fn eth0() -> HostInterface {
    HostInterface::Named("eth0".into())
}

/// The last statement of `chain`.
fn tail(rs: &Ruleset, chain: &str) -> Statement<'static> {
    rs.chains[chain].last().unwrap().last().unwrap().clone()
}

fn goto_target(st: &Statement<'static>) -> Option<String> {
    match st {
        Statement::Goto(t) => Some(t.target.to_string()),
        _ => None,
    }
}

fn text(rs: &Ruleset, chain: &str) -> String {
    format!("{:?}", rs.chains[chain])
}

#[test]
fn no_host_endpoint_leaves_the_host_alone() {
    let rs = build(&[], &Hosts::default());
    assert!(rs.host_in.is_empty() && rs.host_out.is_empty() && rs.host_all.is_none());
    assert!(!rs.chains.keys().any(|c| c.starts_with('h')));
    // The pods' table is what it was.
    assert_eq!(
        rs,
        compile(&[], &endpoints(), &[], &namespaces()),
        "hosts without endpoints change nothing"
    );
}

#[test]
fn a_host_endpoint_without_policy_drops_but_failsafe_tunnels_and_nd() {
    let rs = build(&[], &hosts(vec![hep("h", eth0(), "edge")]));
    let cin = &rs.host_in["eth0"];
    let cout = &rs.host_out["eth0"];
    assert!(
        cin.starts_with("hi") && cout.starts_with("he"),
        "{cin} {cout}"
    );
    assert!(matches!(tail(&rs, cin), Statement::Drop(_)));
    assert!(matches!(tail(&rs, cout), Statement::Drop(_)));
    let t = text(&rs, cin);
    // Failsafe: TCP 22 in, accepted; UDP 53 only out.
    assert!(t.contains("Number(22)") && !t.contains("Number(53)"), "{t}");
    assert!(text(&rs, cout).contains("Number(53)"));
    // VXLAN and IPIP from the other nodes; IPv6 neighbour discovery.
    assert!(t.contains("htun4") && t.contains("Number(4789)"), "{t}");
    assert!(t.contains("icmpv6"), "{t}");
    // ND (133-136) and MLD (130-132, 143) are accepted both ways.
    for chain in [cin, cout] {
        let icmpv6: Vec<String> = rs.chains[chain]
            .iter()
            .map(|r| format!("{r:?}"))
            .filter(|r| r.contains("icmpv6"))
            .collect();
        for ty in [130, 132, 133, 136, 143] {
            assert!(
                icmpv6
                    .iter()
                    .any(|r| r.contains(&format!("Number({ty})")) && r.contains("Accept")),
                "ICMPv6 type {ty} in {chain}: {icmpv6:?}"
            );
        }
    }
    assert_eq!(rs.sets["htun4"].elements.len(), 1);
    // Pods' interfaces are never host endpoints.
    let rs = build(
        &[],
        &hosts(vec![hep("p", HostInterface::Named("tarxa".into()), "edge")]),
    );
    assert!(rs.host_in.is_empty());
}

#[test]
fn only_global_policies_selecting_the_labels_govern_in_order() {
    let deny = global(
        "a-deny",
        json!({"order": 10, "selector": "role == 'edge'", "ingress": [
            {"action": "Deny", "protocol": "TCP", "destination": {"ports": [80]}}]}),
    );
    let allow = global(
        "b-allow",
        json!({"order": 20, "selector": "role == 'edge'", "ingress": [
            {"action": "Allow", "protocol": "TCP", "destination": {"ports": [80, "admin"]}}]}),
    );
    let other = global(
        "c-other",
        json!({"order": 5, "selector": "role == 'core'", "ingress": [{"action": "Allow"}]}),
    );
    let pods_only = global(
        "d-pods",
        json!({"order": 1, "selector": "all()", "namespaceSelector": "kubernetes.io/metadata.name == 'x'",
               "ingress": [{"action": "Allow"}]}),
    );
    let namespaced = tartan_ns(json!({"selector": "all()", "ingress": [{"action": "Allow"}]}));
    let knp = kube(json!({"podSelector": {}, "ingress": [{}]}));
    let explicit_all = global(
        "e-explicit-all",
        json!({"order": 2, "selector": "all()", "namespaceSelector": "all()",
               "ingress": [{"action": "Allow"}]}),
    );
    let policies = [
        deny,
        allow,
        other,
        pods_only.clone(),
        explicit_all,
        namespaced,
        knp,
    ];
    // Exactly the two GlobalNetworkPolicies whose selector picks the
    // endpoint and that no namespaceSelector narrows to pods.
    let edge = labels(&[("role", "edge")]);
    let selecting: Vec<String> = policies
        .iter()
        .filter(|p| crate::compile::host::selects_host(p, &edge))
        .map(|p| p.source.to_string())
        .collect();
    assert_eq!(selecting, ["gnp:a-deny", "gnp:b-allow"]);
    let rs = build(&policies, &hosts(vec![hep("h", eth0(), "edge")]));
    let profile = goto_target(&tail(&rs, &rs.host_in["eth0"])).expect("a profile");
    assert!(profile.starts_with("qhi"), "{profile}");
    let t = text(&rs, &profile);
    // Deny (order 10) before Allow (order 20); then the default drop.
    let verdicts: Vec<&str> = rs.chains[&profile]
        .iter()
        .flat_map(|r| r.iter())
        .filter_map(|s| match s {
            Statement::Drop(_) => Some("drop"),
            Statement::Accept(_) => Some("accept"),
            _ => None,
        })
        .collect();
    // One rule per IP family, nothing else: no other policy's accept.
    assert_eq!(
        verdicts,
        ["drop", "drop", "accept", "accept", "drop"],
        "{t}"
    );
    // Egress: no policy governs it: dropped.
    assert!(matches!(
        tail(&rs, &rs.host_out["eth0"]),
        Statement::Drop(_)
    ));
    // The named port: the endpoint's own number, 8443.
    let numbers = format!("{:?}", rs.sets);
    assert!(numbers.contains("8443"), "{numbers}");
    // A policy narrowed by a namespaceSelector is for pods: with only
    // that policy, the host is default-deny.
    let rs = build(&[pods_only], &hosts(vec![hep("h", eth0(), "edge")]));
    assert!(matches!(tail(&rs, &rs.host_in["eth0"]), Statement::Drop(_)));
}

#[test]
fn an_explicit_namespace_selector_all_is_for_pods_only() {
    // Calico reads a given `namespaceSelector: all()` as "has a
    // namespace": the policy never selects a host endpoint.
    let explicit = global(
        "e-all",
        json!({"order": 1, "selector": "all()", "namespaceSelector": "all()",
               "ingress": [{"action": "Allow"}]}),
    );
    assert!(!crate::compile::host::selects_host(
        &explicit,
        &labels(&[("role", "edge")])
    ));
    let rs = build(
        std::slice::from_ref(&explicit),
        &hosts(vec![hep("h", eth0(), "edge")]),
    );
    assert!(matches!(tail(&rs, &rs.host_in["eth0"]), Statement::Drop(_)));
    // Absent or empty: every endpoint the selector picks, hosts too.
    for spec in [
        json!({"selector": "all()", "ingress": [{"action": "Allow"}]}),
        json!({"selector": "all()", "namespaceSelector": "", "ingress": [{"action": "Allow"}]}),
    ] {
        let p = global("f-none", spec);
        assert!(crate::compile::host::selects_host(
            &p,
            &labels(&[("role", "edge")])
        ));
        let rs = build(&[p], &hosts(vec![hep("h", eth0(), "edge")]));
        assert!(goto_target(&tail(&rs, &rs.host_in["eth0"])).is_some());
    }
    // For pods, the explicit `all()` still means every namespace.
    let pods = build(std::slice::from_ref(&explicit), &Hosts::default());
    let everywhere = global(
        "e-all",
        json!({"order": 1, "selector": "all()", "ingress": [{"action": "Allow"}]}),
    );
    let pods_absent = build(&[everywhere], &Hosts::default());
    assert!(!pods.to_endpoint.is_empty());
    assert_eq!(
        pods.to_endpoint.keys().collect::<Vec<_>>(),
        pods_absent.to_endpoint.keys().collect::<Vec<_>>()
    );
}

#[test]
fn a_pass_drops_on_a_host_and_allows_on_a_pod() {
    let pass = global(
        "pass",
        json!({"selector": "all()", "ingress": [{"action": "Pass"}]}),
    );
    let rs = build(
        std::slice::from_ref(&pass),
        &hosts(vec![hep("h", eth0(), "edge")]),
    );
    let host_profile = goto_target(&tail(&rs, &rs.host_in["eth0"])).unwrap();
    let pod_profile = &rs.to_endpoint["tarxa"];
    let first = |c: &str| rs.chains[c][0].last().unwrap().clone();
    assert!(matches!(first(&host_profile), Statement::Drop(_)));
    assert!(matches!(first(pod_profile), Statement::Accept(_)));
}

#[test]
fn all_interfaces_named_ones_first_and_a_locked_endpoint_allows_nothing() {
    let allow = global(
        "allow",
        json!({"selector": "has(role)", "ingress": [{"action": "Allow"}], "egress": [{"action": "Allow"}]}),
    );
    let rs = build(
        std::slice::from_ref(&allow),
        &hosts(vec![
            hep("all", HostInterface::All, "any"),
            hep("named", eth0(), "edge"),
        ]),
    );
    let (i, e) = rs.host_all.clone().expect("a * endpoint");
    assert!(goto_target(&tail(&rs, &i)).is_some());
    assert!(goto_target(&tail(&rs, &e)).is_some());
    assert_eq!(rs.host_in.len(), 1);
    let mut locked = hep("unreadable:x", HostInterface::All, "any");
    locked.locked = true;
    let rs = build(
        std::slice::from_ref(&allow),
        &hosts(vec![hep("all", HostInterface::All, "any"), locked]),
    );
    let (i, _) = rs.host_all.clone().unwrap();
    assert!(matches!(tail(&rs, &i), Statement::Drop(_)));
}

#[test]
fn host_tables_render_whole_and_as_differences() {
    let allow = global(
        "allow",
        json!({"selector": "role == 'edge'", "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [80]}}]}),
    );
    let empty = build(&[], &Hosts::default());
    let one = build(
        std::slice::from_ref(&allow),
        &hosts(vec![
            hep("h", eth0(), "edge"),
            hep("a", HostInterface::All, "x"),
        ]),
    );
    let full = serde_json::to_string(&render::full(&one).to_json()).unwrap();
    for want in ["\"input\"", "\"output\"", "host_in", "host_all_in", "eth0"] {
        assert!(full.contains(want), "{want}: {full}");
    }
    let there = serde_json::to_string(&render::diff(&empty, &one).unwrap().to_json()).unwrap();
    assert!(
        there.contains("eth0") && there.contains("host_all_in"),
        "{there}"
    );
    let back = serde_json::to_string(&render::diff(&one, &empty).unwrap().to_json()).unwrap();
    assert!(
        back.contains("\"delete\"") && back.contains("host_all_in"),
        "{back}"
    );
    let summary = render::summary(&one);
    assert_eq!(summary["@host_in"], 1);
    assert_eq!(summary["host_all_in"], 1);
    assert_eq!(render::summary(&empty)["host_all_in"], 0);
}
