use std::collections::BTreeMap;

use ipnet::IpNet;
use tartan_api::resources::bgpfilter::BgpFilterSpec;

use super::*;
use crate::model::{AsPath, AsSegment, PathAttrs};

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn spec(yaml: &str) -> BgpFilterSpec {
    serde_saphyr::from_str(yaml).unwrap()
}

fn filters(list: &[(&str, &str)]) -> BTreeMap<String, BgpFilterSpec> {
    list.iter().map(|(n, y)| (n.to_string(), spec(y))).collect()
}

#[test]
fn each_match_operator() {
    let f = |op: &str| {
        let all = filters(&[(
            "f",
            &format!("{{exportV4: [{{action: Reject, cidr: 10.88.0.0/16, matchOperator: {op}}}]}}"),
        )]);
        peer_filters(&["f".into()], &all).unwrap().export
    };
    let cases = [
        ("Equal", "10.88.0.0/16", Verdict::Reject),
        ("Equal", "10.88.1.0/24", Verdict::Accept(None)),
        ("NotEqual", "10.88.0.0/16", Verdict::Accept(None)),
        ("NotEqual", "10.88.1.0/24", Verdict::Reject),
        ("In", "10.88.1.0/24", Verdict::Reject),
        ("In", "10.88.0.0/16", Verdict::Reject),
        ("In", "10.89.0.0/24", Verdict::Accept(None)),
        ("In", "10.0.0.0/8", Verdict::Accept(None)),
        ("NotIn", "10.89.0.0/24", Verdict::Reject),
        ("NotIn", "10.88.3.0/26", Verdict::Accept(None)),
    ];
    for (op, prefix, want) in cases {
        assert_eq!(f(op).verdict(&net(prefix), true), want, "{op} {prefix}");
    }
}

#[test]
fn prefix_lengths_default_to_the_cidr_and_the_family() {
    let all = filters(&[(
        "f",
        "{importV4: [{action: Reject, cidr: 10.0.0.0/8, matchOperator: In, prefixLength: {max: 24}}], \
          importV6: [{action: Reject, cidr: \"::/0\", matchOperator: In, prefixLength: {min: 120}}]}",
    )]);
    let i = peer_filters(&["f".into()], &all).unwrap().import;
    assert_eq!(i.v4[0].lengths, Some((8, 24)));
    assert_eq!(i.verdict(&net("10.1.0.0/16"), true), Verdict::Reject);
    assert_eq!(i.verdict(&net("10.1.1.0/25"), true), Verdict::Accept(None));
    assert_eq!(i.v6[0].lengths, Some((120, 128)));
    assert_eq!(i.verdict(&net("2001:db8::/124"), true), Verdict::Reject);
    assert_eq!(
        i.verdict(&net("2001:db8::/64"), true),
        Verdict::Accept(None)
    );
    // The IPv4 rules say nothing of IPv6 routes and the other way round.
    assert_eq!(i.verdict(&net("10.1.1.0/32"), true), Verdict::Accept(None));
}

/// As Calico: a min shorter than the cidr is the cidr's length (it makes
/// a difference to NotEqual). Lengths without a cidr, refused when
/// written now, are read as before if stored: a filter written then must
/// not take its peer down.
#[test]
fn a_short_min_is_the_cidrs_length_and_stored_lengths_alone_still_read() {
    let all = filters(&[
        (
            "f",
            "{importV4: [{action: Reject, cidr: 10.0.0.0/16, matchOperator: NotEqual, prefixLength: {min: 8}}]}",
        ),
        (
            "g",
            "{importV4: [{action: Reject, prefixLength: {min: 25}}]}",
        ),
    ]);
    let i = peer_filters(&["f".into()], &all).unwrap().import;
    assert_eq!(i.v4[0].lengths, Some((16, 32)));
    assert_eq!(i.verdict(&net("10.0.0.0/8"), true), Verdict::Accept(None));
    assert_eq!(i.verdict(&net("10.0.1.0/24"), true), Verdict::Reject);
    let g = peer_filters(&["g".into()], &all).unwrap().import;
    assert_eq!(g.verdict(&net("10.9.9.0/25"), true), Verdict::Reject);
    assert_eq!(g.verdict(&net("10.9.9.0/24"), true), Verdict::Accept(None));
}

#[test]
fn remote_peers_leaves_own_routes_alone() {
    let all = filters(&[("f", "{exportV4: [{action: Reject, source: RemotePeers}]}")]);
    let e = peer_filters(&["f".into()], &all).unwrap().export;
    assert_eq!(e.verdict(&net("10.88.0.0/26"), true), Verdict::Reject);
    assert_eq!(
        e.verdict(&net("10.88.0.0/26"), false),
        Verdict::Accept(None)
    );
}

#[test]
fn the_first_match_over_the_filters_in_order_decides() {
    let all = filters(&[
        (
            "a",
            "{exportV4: [{action: Accept, cidr: 10.88.0.0/26, matchOperator: Equal}]}",
        ),
        ("b", "{exportV4: [{action: Reject}]}"),
    ]);
    let ab = peer_filters(&["a".into(), "b".into()], &all)
        .unwrap()
        .export;
    assert_eq!(
        ab.verdict(&net("10.88.0.0/26"), true),
        Verdict::Accept(None)
    );
    assert_eq!(ab.verdict(&net("10.88.0.64/26"), true), Verdict::Reject);
    let ba = peer_filters(&["b".into(), "a".into()], &all)
        .unwrap()
        .export;
    assert_eq!(ba.verdict(&net("10.88.0.0/26"), true), Verdict::Reject);
    // No rule matches: accepted.
    assert_eq!(
        PeerFilters::default()
            .export
            .verdict(&net("10.88.0.0/26"), true),
        Verdict::Accept(None)
    );
}

#[test]
fn accepting_rules_change_communities_and_the_as_path() {
    let all = filters(&[(
        "f",
        "{exportV4: [{action: Accept, communities: {add: ['65000:7', '65000:1:2', no-export], \
          remove: ['65000:9', '1:2:3']}, asPathPrepend: [64512, 64512]}]}",
    )]);
    let e = peer_filters(&["f".into()], &all).unwrap().export;
    let v = e.verdict(&net("10.88.0.0/26"), false);
    assert_eq!(v, Verdict::Accept(Some(0)));
    let mut a = PathAttrs {
        communities: vec![(65000 << 16) | 9, (65000 << 16) | 7],
        large_communities: vec![[1, 2, 3]],
        as_path: AsPath {
            segments: vec![AsSegment::Sequence(vec![65001])],
        },
        ..PathAttrs::default()
    };
    e.rule(crate::model::Family::Ipv4Unicast, 0)
        .unwrap()
        .apply(&mut a);
    assert_eq!(a.communities, vec![(65000 << 16) | 7, 0xFFFF_FF01]);
    assert_eq!(a.large_communities, vec![[65000, 1, 2]]);
    assert_eq!(
        a.as_path.segments,
        vec![AsSegment::Sequence(vec![64512, 64512, 65001])]
    );
}

#[test]
fn a_missing_filter_is_an_error_not_an_open_session() {
    let e = peer_filters(&["gone".into()], &BTreeMap::new()).unwrap_err();
    assert!(e.contains("gone"), "{e}");
}

#[test]
fn a_rule_matching_an_interface_is_refused_not_run_without_it() {
    let f = filters(&[(
        "iface",
        "importV4: [{action: Reject, interface: '*.calico'}]",
    )]);
    let e = peer_filters(&["iface".into()], &f).unwrap_err();
    assert!(e.contains("interface"), "{e}");
}

/// Calico (confd's BIRD template) puts prefixLength inside the pattern:
/// In is `net ~ [cidr{min,max}]`, NotIn is `net !~ [cidr{min,max}]`, the
/// negation of "within cidr and length in range".
#[test]
fn prefix_length_is_part_of_the_in_and_not_in_pattern() {
    let list = |op: &str| {
        let all = filters(&[(
            "f",
            &format!(
                "{{importV4: [{{action: Reject, cidr: 10.0.0.0/8, matchOperator: {op}, \
                 prefixLength: {{max: 24}}}}]}}"
            ),
        )]);
        peer_filters(&["f".into()], &all).unwrap().import
    };
    let not_in = list("NotIn");
    // Within but longer than /24: not in the pattern, so NotIn matches.
    assert_eq!(not_in.verdict(&net("10.1.2.0/28"), true), Verdict::Reject);
    // Outside the cidr: NotIn matches whatever the length.
    assert_eq!(
        not_in.verdict(&net("192.168.0.0/28"), true),
        Verdict::Reject
    );
    assert_eq!(
        not_in.verdict(&net("192.168.0.0/16"), true),
        Verdict::Reject
    );
    // Within and of a length in range: in the pattern, NotIn does not match.
    assert_eq!(
        not_in.verdict(&net("10.1.0.0/16"), true),
        Verdict::Accept(None)
    );
    let is_in = list("In");
    assert_eq!(is_in.verdict(&net("10.1.0.0/16"), true), Verdict::Reject);
    assert_eq!(
        is_in.verdict(&net("10.1.2.0/28"), true),
        Verdict::Accept(None)
    );
    assert_eq!(
        is_in.verdict(&net("192.168.0.0/16"), true),
        Verdict::Accept(None)
    );
}
