//! The address each autodetection method picks, and the checks.

use super::*;

fn local(list: &[(&str, &str)]) -> Vec<LocalAddress> {
    list.iter()
        .map(|(i, a)| LocalAddress {
            interface: i.to_string(),
            address: a.parse().unwrap(),
        })
        .collect()
}

fn method(json: &str) -> AddressAutodetection {
    serde_json::from_str(json).unwrap()
}

fn node() -> Vec<LocalAddress> {
    local(&[
        ("lo", "127.0.0.1/8"),
        ("docker0", "172.17.0.1/16"),
        ("eth0", "169.254.3.3/16"),
        ("eth0", "10.0.0.5/24"),
        ("eth1", "192.0.2.7/28"),
        ("eth1", "fe80::1/64"),
        ("eth1", "fd00:1::7/64"),
        ("tartan.vxlan", "10.244.3.0/32"),
    ])
}

fn pick(m: &str, f: Family, internal: &[&str], via: Option<&str>) -> Result<String, String> {
    let internal: Vec<IpAddr> = internal.iter().map(|a| a.parse().unwrap()).collect();
    method(m)
        .choose(f, &internal, &node(), via.map(|v| v.parse().unwrap()))
        .map(|n| n.to_string())
}

#[test]
fn node_internal_ip_takes_the_interface_prefix() {
    let m = r#"{"kubernetes": "NodeInternalIP"}"#;
    assert_eq!(
        pick(m, Family::V4, &["fd00:1::7", "192.0.2.7"], None).unwrap(),
        "192.0.2.7/28"
    );
    assert_eq!(
        pick(m, Family::V6, &["192.0.2.7", "fd00:1::7"], None).unwrap(),
        "fd00:1::7/64"
    );
    let e = pick(m, Family::V4, &["203.0.113.1"], None).unwrap_err();
    assert!(
        e.contains("203.0.113.1 is on none of this node's interfaces"),
        "{e}"
    );
    let e = pick(m, Family::V6, &["10.0.0.5"], None).unwrap_err();
    assert_eq!(e, "the Node has no IPv6 InternalIP");
    assert_eq!(
        AddressAutodetection::node_internal_ip(),
        method(m),
        "the default is the InternalIP method"
    );
}

#[test]
fn interface_matches_whole_names_and_skips_link_local() {
    assert_eq!(
        pick(r#"{"interface": "eth0"}"#, Family::V4, &[], None).unwrap(),
        "10.0.0.5/24"
    );
    assert_eq!(
        pick(r#"{"interface": "eth.*"}"#, Family::V6, &[], None).unwrap(),
        "fd00:1::7/64"
    );
    // `eth` alone does not match eth0: the whole name must match.
    let e = pick(r#"{"interface": "eth"}"#, Family::V4, &[], None).unwrap_err();
    assert!(
        e.contains("no IPv4 address on an interface matching \"eth\""),
        "{e}"
    );
}

#[test]
fn first_found_skips_container_and_tunnel_devices() {
    assert_eq!(
        pick(r#"{"firstFound": true}"#, Family::V4, &[], None).unwrap(),
        "10.0.0.5/24"
    );
    assert_eq!(
        pick(r#"{"skipInterface": "eth0"}"#, Family::V4, &[], None).unwrap(),
        "192.0.2.7/28"
    );
    let e = pick(r#"{"skipInterface": "eth.*"}"#, Family::V4, &[], None).unwrap_err();
    assert!(e.contains("no IPv4 address"), "{e}");
}

#[test]
fn cidrs_and_can_reach() {
    assert_eq!(
        pick(r#"{"cidrs": ["192.0.2.0/24"]}"#, Family::V4, &[], None).unwrap(),
        "192.0.2.7/28"
    );
    let e = pick(r#"{"cidrs": ["198.51.100.0/24"]}"#, Family::V4, &[], None).unwrap_err();
    assert!(e.contains("no IPv4 address inside 198.51.100.0/24"), "{e}");
    let m = r#"{"canReach": "192.0.2.1"}"#;
    assert_eq!(
        pick(m, Family::V4, &[], Some("192.0.2.7")).unwrap(),
        "192.0.2.7/28"
    );
    let e = pick(m, Family::V4, &[], None).unwrap_err();
    assert!(e.contains("no route from this node to 192.0.2.1"), "{e}");
    assert_eq!(method(m).reach_target(), Some("192.0.2.1".parse().unwrap()));
}

fn problems(json: &str, f: Family) -> Vec<(String, String)> {
    let mut p = Problems::default();
    method(json).check("m", f, &mut p);
    p.0
}

#[test]
fn checks_name_each_bad_field() {
    assert!(problems(r#"{"interface": "eth[0-9]+"}"#, Family::V4).is_empty());
    assert!(problems(r#"{"cidrs": ["fd00::/8"]}"#, Family::V6).is_empty());
    let p = problems(r#"{"interface": "eth("}"#, Family::V4);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].0, "m.interface");
    assert!(p[0].1.contains("not a regular expression"), "{:?}", p);
    let p = problems(r#"{"interface": "eth0", "firstFound": true}"#, Family::V4);
    assert_eq!(
        p[0].1,
        "2 methods set; set exactly one of kubernetes, interface, skipInterface, canReach, cidrs, firstFound"
    );
    assert_eq!(problems("{}", Family::V4).len(), 1);
    let p = problems(r#"{"canReach": "fd00::1"}"#, Family::V4);
    assert_eq!(
        p,
        vec![("m.canReach".into(), "fd00::1 is not an IPv4 address".into())]
    );
    let p = problems(r#"{"cidrs": ["10.0.0.0/8", "10.0.0.1/8"]}"#, Family::V6);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(
        p[0],
        (
            "m.cidrs[0]".into(),
            "10.0.0.0/8 is not an IPv6 network".into()
        )
    );
    assert_eq!(p[1].0, "m.cidrs[1]");
    assert_eq!(
        problems(r#"{"cidrs": []}"#, Family::V4)[0].1,
        "give at least one network"
    );
    assert_eq!(problems(r#"{"firstFound": false}"#, Family::V4).len(), 1);
    assert!(
        serde_json::from_str::<AddressAutodetection>(r#"{"kubernetes": "ExternalIP"}"#).is_err()
    );
}
