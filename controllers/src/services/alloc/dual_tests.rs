//! Tests of allocation on a dual-stack cluster: a ClusterIP per family
//! from each family's range, given ones kept or refused, the IPv6 range
//! used as the API server's bitmap uses it, NodePorts once per Service.

use super::tests::{node_ports, svc};
use super::*;
use serde_json::{Value, json};

fn dual() -> Ranges {
    Ranges::dual_stack(
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/112".parse().unwrap(),
    )
}

fn with(extra: Value) -> Value {
    let mut s = json!({"selector": {"app": "web"}, "ports": [{"port": 80}]});
    for (k, v) in extra.as_object().unwrap() {
        s[k] = v.clone();
    }
    s
}

fn ips(s: &Service) -> (String, Vec<String>, Vec<String>) {
    let sp = s.spec.as_ref().unwrap();
    (
        sp.cluster_ip.clone().unwrap_or_default(),
        sp.cluster_ips.clone().unwrap_or_default(),
        sp.ip_families.clone().unwrap_or_default(),
    )
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn require_dual_stack_gets_a_cluster_ip_of_each_family() {
    let a = allocate(
        &dual(),
        &[],
        &[
            svc("a", with(json!({"ipFamilyPolicy": "RequireDualStack"}))),
            svc(
                "b",
                with(json!({"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv6"]})),
            ),
            svc("c", with(json!({}))),
            svc("d", with(json!({"ipFamilies": ["IPv6"]}))),
        ],
    )
    .unwrap();
    assert_eq!(
        ips(&a[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2", "fd00:10:96::1"]),
            strings(&["IPv4", "IPv6"])
        )
    );
    // IPv6 first: `clusterIP` is the IPv6 one.
    assert_eq!(
        ips(&a[1]),
        (
            "fd00:10:96::2".into(),
            strings(&["fd00:10:96::2", "10.96.0.3"]),
            strings(&["IPv6", "IPv4"])
        )
    );
    assert_eq!(
        ips(&a[2]),
        (
            "10.96.0.4".into(),
            strings(&["10.96.0.4"]),
            strings(&["IPv4"])
        )
    );
    assert_eq!(
        ips(&a[3]),
        (
            "fd00:10:96::3".into(),
            strings(&["fd00:10:96::3"]),
            strings(&["IPv6"])
        )
    );
    // Stored ones are skipped in both ranges.
    let b = allocate(
        &dual(),
        &a,
        &[svc(
            "e",
            with(json!({"ipFamilyPolicy": "RequireDualStack"})),
        )],
    )
    .unwrap();
    assert_eq!(ips(&b[0]).1, strings(&["10.96.0.5", "fd00:10:96::4"]));
}

#[test]
fn given_ipv6_cluster_ips_are_kept_checked_and_refused_when_taken() {
    let given = json!({"ipFamilyPolicy": "RequireDualStack",
        "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9", "fd00:10:96::9"]});
    let a = allocate(&dual(), &[], &[svc("a", with(given.clone()))]).unwrap();
    assert_eq!(ips(&a[0]).1, strings(&["10.96.0.9", "fd00:10:96::9"]));
    let mut other = given.clone();
    other["clusterIP"] = json!("10.96.0.10");
    other["clusterIPs"] = json!(["10.96.0.10", "fd00:10:96::9"]);
    let e = allocate(&dual(), &a, &[svc("b", with(other))]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/b: spec.clusterIPs[1]: fd00:10:96::9 is already allocated to Service default/a"
        ]
    );
    // The network's address, and one past the bitmap of a large range,
    // are refused as the API server refuses them.
    let wide = Ranges::dual_stack(
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/108".parse().unwrap(),
    );
    for bad in ["fd00:10:96::", "fd00:10:96::1:0"] {
        let s = with(json!({"ipFamilies": ["IPv6"], "clusterIP": bad, "clusterIPs": [bad]}));
        let e = allocate(&wide, &[], &[svc("c", s)]).unwrap_err();
        assert_eq!(
            e,
            vec![format!(
                "Service default/c: spec.clusterIP: failed to allocate IP {bad}: the provided IP ({bad}) is not in the valid range. The range of valid IPs is fd00:10:96::/108"
            )]
        );
    }
    // The last address of the bitmap is handed out.
    let last = "fd00:10:96::ffff";
    let s = with(json!({"ipFamilies": ["IPv6"], "clusterIP": last, "clusterIPs": [last]}));
    assert!(allocate(&wide, &[], &[svc("d", s)]).is_ok());
}

#[test]
fn an_update_adds_or_drops_the_second_cluster_ip() {
    let a = allocate(&dual(), &[], &[svc("a", with(json!({})))]).unwrap();
    assert_eq!(ips(&a[0]).1, strings(&["10.96.0.2"]));
    // The file says RequireDualStack and nothing of its addresses: the
    // stored ClusterIP is kept and an IPv6 one added.
    let up = allocate(
        &dual(),
        &a,
        &[svc(
            "a",
            with(json!({"ipFamilyPolicy": "RequireDualStack"})),
        )],
    )
    .unwrap();
    assert_eq!(
        ips(&up[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2", "fd00:10:96::1"]),
            strings(&["IPv4", "IPv6"])
        )
    );
    // Back to SingleStack: the IPv6 one goes.
    let down = allocate(
        &dual(),
        &up,
        &[svc("a", with(json!({"ipFamilyPolicy": "SingleStack"})))],
    )
    .unwrap();
    assert_eq!(
        ips(&down[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2"]),
            strings(&["IPv4"])
        )
    );
    // A changed second address is refused.
    let moved = with(json!({"ipFamilyPolicy": "RequireDualStack",
        "clusterIPs": ["10.96.0.2", "fd00:10:96::7"]}));
    let e = allocate(&dual(), &up, &[svc("a", moved)]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/a: spec.clusterIPs[1]: may not change once set (fd00:10:96::1 -> fd00:10:96::7)"
        ]
    );
}

#[test]
fn a_prefer_dual_stack_service_applied_again_is_not_upgraded() {
    // Made PreferDualStack when the cluster had IPv4 alone.
    let single = Ranges::new("10.96.0.0/16".parse().unwrap());
    let file = || svc("p", with(json!({"ipFamilyPolicy": "PreferDualStack"})));
    let a = allocate(&single, &[], &[file()]).unwrap();
    assert_eq!(ips(&a[0]).1, strings(&["10.96.0.2"]));
    // The same file on the cluster made dual-stack: left as it is.
    let again = allocate(&dual(), &a, &[file()]).unwrap();
    assert_eq!(
        ips(&again[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2"]),
            strings(&["IPv4"])
        )
    );
    // RequireDualStack upgrades it.
    let up = svc("p", with(json!({"ipFamilyPolicy": "RequireDualStack"})));
    let up = allocate(&dual(), &a, &[up]).unwrap();
    assert_eq!(ips(&up[0]).2, strings(&["IPv4", "IPv6"]));
}

#[test]
fn node_ports_are_per_service_not_per_family() {
    let np = with(
        json!({"type": "NodePort", "ipFamilyPolicy": "RequireDualStack",
        "ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "b"}]}),
    );
    let a = allocate(&dual(), &[], &[svc("n", np)]).unwrap();
    assert_eq!(node_ports(&a[0]), vec![30000, 30001]);
    assert_eq!(ips(&a[0]).1.len(), 2);
}

#[test]
fn an_exhausted_ipv6_range_is_refused() {
    let tiny = Ranges::dual_stack(
        "10.96.0.0/16".parse().unwrap(),
        "fd00:10:96::/127".parse().unwrap(),
    );
    let v6 = || with(json!({"ipFamilies": ["IPv6"]}));
    let a = allocate(&tiny, &[], &[svc("a", v6())]).unwrap();
    assert_eq!(ips(&a[0]).1, strings(&["fd00:10:96::1"]));
    let e = allocate(&tiny, &a, &[svc("b", v6())]).unwrap_err();
    assert_eq!(
        e,
        vec!["Service default/b: no free ClusterIP left in the service range fd00:10:96::/127"]
    );
}

/// Nothing held of either service range (the Service being written
/// holds nothing in `held` of its own).
fn nothing_claimed(held: &Held) {
    assert_eq!(
        held.cluster_ips.bits().count(),
        0,
        "an IPv4 ClusterIP claimed"
    );
    let v6 = held.cluster_ips6.as_ref().unwrap();
    assert_eq!(v6.bits().count(), 0, "an IPv6 ClusterIP claimed");
}

#[test]
fn a_changed_primary_family_is_refused_before_anything_is_claimed() {
    let a = allocate(&dual(), &[], &[svc("a", with(json!({})))]).unwrap();
    assert_eq!(
        ips(&a[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2"]),
            strings(&["IPv4"])
        )
    );
    // The file names the families the other way round and no addresses:
    // the stored IPv4 address is carried over into the IPv6 slot.
    let swapped =
        with(json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv6", "IPv4"]}));
    let (r, held) = allocate_held(&dual(), &a, &[svc("a", swapped.clone())]);
    assert_eq!(
        r.unwrap_err(),
        Refusal {
            problems: vec![
                "Service default/a: spec.ipFamilies[0]: IPv6: may not change once set".into(),
                "Service default/a: spec.clusterIPs[0]: 10.96.0.2: expected an IPv6 value as indicated by `ipFamilies[0]`".into(),
            ],
            taken: false,
        }
    );
    nothing_claimed(&held);
    // A dual-stack Service's second family may not change either.
    let both = allocate(
        &dual(),
        &[],
        &[svc(
            "b",
            with(json!({"ipFamilyPolicy": "RequireDualStack"})),
        )],
    )
    .unwrap();
    let (r, held) = allocate_held(&dual(), &both, &[svc("b", swapped)]);
    let e = r.unwrap_err().problems;
    assert_eq!(
        e[..2],
        [
            "Service default/b: spec.ipFamilies[0]: IPv6: may not change once set".to_string(),
            "Service default/b: spec.ipFamilies[1]: IPv4: may not change once set".to_string(),
        ]
    );
    nothing_claimed(&held);
}

#[test]
fn an_address_of_another_family_than_named_is_refused_after_carry_over() {
    // Stored without families (as written before they were filled in):
    // nothing to compare them with, but the carried-over address is not
    // of the family the file names.
    let stored = svc(
        "a",
        with(json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"]})),
    );
    let (r, held) = allocate_held(
        &dual(),
        &[stored],
        &[svc("a", with(json!({"ipFamilies": ["IPv6"]})))],
    );
    assert_eq!(
        r.unwrap_err().problems,
        vec![
            "Service default/a: spec.clusterIPs[0]: 10.96.0.2: expected an IPv6 value as indicated by `ipFamilies[0]`"
        ]
    );
    nothing_claimed(&held);
    // Given in the file itself, likewise.
    let given = with(
        json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"],
        "clusterIPs": ["10.96.0.9", "10.96.0.10"]}),
    );
    let e = allocate(&dual(), &[], &[svc("b", given)]).unwrap_err();
    assert_eq!(
        e,
        vec![
            "Service default/b: spec.clusterIPs: Invalid value: []string{\"10.96.0.9\", \"10.96.0.10\"}: may specify no more than one IP for each IP family",
            "Service default/b: spec.clusterIPs[1]: 10.96.0.10: expected an IPv6 value as indicated by `ipFamilies[1]`"
        ]
    );
}

#[test]
fn a_family_named_twice_is_refused_before_anything_is_claimed() {
    let twice = with(json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv4"]}));
    let (r, held) = allocate_held(&dual(), &[], &[svc("a", twice)]);
    assert_eq!(
        r.unwrap_err().problems,
        vec!["Service default/a: spec.ipFamilies[1]: IPv4: duplicate value"]
    );
    nothing_claimed(&held);
}

#[test]
fn every_given_cluster_ip_is_checked_before_anything_is_claimed() {
    const NOT_AN_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    let cases = [
        // The second address too, not only the first.
        (
            json!(["10.96.0.5", "bogus"]),
            json!(["IPv4", "IPv6"]),
            format!("spec.clusterIPs[1]: Invalid value: \"bogus\": {NOT_AN_IP}"),
        ),
        // "None" only as the one value (headless).
        (
            json!(["None", "fd00:10:96::5"]),
            Value::Null,
            "spec.clusterIPs: Invalid value: []string{\"None\", \"fd00:10:96::5\"}: 'None' must be the first and only value".into(),
        ),
        (
            json!(["10.96.0.5", "None"]),
            Value::Null,
            format!("spec.clusterIPs[1]: Invalid value: \"None\": {NOT_AN_IP}"),
        ),
        // At most two, one of each family.
        (
            json!(["10.96.0.5", "fd00:10:96::5", "10.96.0.6"]),
            Value::Null,
            "spec.clusterIPs: Invalid value: []string{\"10.96.0.5\", \"fd00:10:96::5\", \"10.96.0.6\"}: may only hold up to 2 values".into(),
        ),
        (
            json!(["10.96.0.5", "10.96.0.6"]),
            Value::Null,
            "spec.clusterIPs: Invalid value: []string{\"10.96.0.5\", \"10.96.0.6\"}: may specify no more than one IP for each IP family".into(),
        ),
    ];
    for (list, families, why) in cases {
        let s = json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": families,
            "clusterIP": list[0], "clusterIPs": list});
        let (r, held) = allocate_held(&dual(), &[], &[svc("a", with(s))]);
        nothing_claimed(&held);
        assert_eq!(
            r.unwrap_err().problems,
            vec![format!("Service default/a: {why}")]
        );
    }
}

#[test]
fn a_service_stored_without_a_policy_turned_prefer_dual_stack_is_upgraded() {
    // Stored before its family fields were filled in: no policy, no
    // families. The API server reads it as SingleStack (`defaultOnRead`),
    // so PreferDualStack is a change of policy, not a Service left as it is.
    let stored = svc(
        "a",
        with(json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"]})),
    );
    let up = allocate(
        &dual(),
        &[stored],
        &[svc("a", with(json!({"ipFamilyPolicy": "PreferDualStack"})))],
    )
    .unwrap();
    assert_eq!(
        ips(&up[0]),
        (
            "10.96.0.2".into(),
            strings(&["10.96.0.2", "fd00:10:96::1"]),
            strings(&["IPv4", "IPv6"])
        )
    );
}
