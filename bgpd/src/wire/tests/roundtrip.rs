//! Property tests: PathAttrs + prefixes -> encode_announce -> frame ->
//! decode gives back the same routes.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::prelude::*;

use super::*;
use crate::model::{AsPath, AsSegment, NextHop, Origin, PathAttrs, RawAttr};

/// AS numbers other than 0, which RFC 7607 reserves.
fn asns() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(1..=u32::MAX, 1..12)
}

/// Only SEQUENCE and SET: bgpd takes no confederation segments (RFC 5065 5).
fn segment() -> impl Strategy<Value = AsSegment> {
    (any::<bool>(), asns()).prop_map(|(set, v)| {
        if set {
            AsSegment::Set(v)
        } else {
            AsSegment::Sequence(v)
        }
    })
}

/// A next hop a route may have (RFC 4271 6.3): anything unusable becomes
/// a documentation address.
fn v4_next_hop(a: u32) -> NextHop {
    let nh = NextHop::V4(Ipv4Addr::from(a));
    if crate::model::checks::unusable_next_hop(&nh, &[]).is_some() {
        NextHop::V4(Ipv4Addr::new(192, 0, 2, 1))
    } else {
        nh
    }
}

fn v6_global(a: u128) -> Ipv6Addr {
    let a = Ipv6Addr::from(a);
    if a.is_unspecified() || a.is_loopback() || a.is_multicast() {
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)
    } else {
        a
    }
}

/// Attribute sets as the decoder gives them back.
fn path_attrs() -> impl Strategy<Value = PathAttrs> {
    let unknown = prop::collection::btree_map(
        prop_oneof![11u8..14, 16u8..17, 19u8..32, 33u8..=255],
        prop::collection::vec(any::<u8>(), 0..300),
        0..3,
    );
    (
        (0u8..3, prop::collection::vec(segment(), 0..4)),
        (any::<Option<u32>>(), any::<Option<u32>>(), any::<bool>()),
        prop::option::of((1..=u32::MAX, any::<u32>())),
        (
            prop::collection::vec(any::<u32>(), 0..6),
            prop::collection::vec(any::<[u32; 3]>(), 0..3),
        ),
        (
            any::<Option<u32>>(),
            prop::collection::vec(any::<u32>(), 0..3),
        ),
        unknown,
    )
        .prop_map(
            |(
                (origin, segments),
                (med, local_pref, atomic),
                agg,
                (comms, large),
                (orig, cl),
                unk,
            )| {
                PathAttrs {
                    origin: Origin::from_u8(origin).unwrap(),
                    as_path: AsPath { segments },
                    next_hop: NextHop::None,
                    med,
                    local_pref,
                    atomic_aggregate: atomic,
                    aggregator: agg.map(|(a, ip)| (a, Ipv4Addr::from(ip))),
                    communities: comms,
                    large_communities: large,
                    originator_id: orig.map(Ipv4Addr::from),
                    cluster_list: cl.into_iter().map(Ipv4Addr::from).collect(),
                    unknown: to_raw(unk),
                }
            },
        )
}

fn to_raw(m: BTreeMap<u8, Vec<u8>>) -> Vec<RawAttr> {
    m.into_iter()
        .map(|(type_code, value)| RawAttr {
            // What decoding gives back: the Partial bit set on the way out.
            flags: RawAttr::OPTIONAL | RawAttr::TRANSITIVE | RawAttr::PARTIAL,
            type_code,
            value,
        })
        .collect()
}

fn v4_prefixes() -> impl Strategy<Value = Vec<IpNet>> {
    prop::collection::vec(
        (any::<u32>(), 0u8..=32)
            .prop_map(|(a, l)| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), l).unwrap().trunc())),
        1..400,
    )
}

fn v6_prefixes() -> impl Strategy<Value = Vec<IpNet>> {
    prop::collection::vec(
        (any::<u128>(), 0u8..=128)
            .prop_map(|(a, l)| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), l).unwrap().trunc())),
        1..300,
    )
}

/// Encodes, frames and decodes; returns the attributes of every message
/// (with the next hop put back) and all prefixes in order.
fn round_trip(
    attrs: &PathAttrs,
    family: Family,
    prefixes: &[IpNet],
    four: bool,
) -> (Vec<PathAttrs>, Vec<IpNet>) {
    let eopts = EncodeOptions {
        four_octet_as: four,
        ..EncodeOptions::default()
    };
    let dopts = DecodeOptions {
        four_octet_as: four,
        ..DecodeOptions::default()
    };
    let mut out = Vec::new();
    encode_announce(attrs, family, prefixes, &eopts, &mut out).unwrap();
    let mut buf = &out[..];
    let (mut all_attrs, mut all_prefixes) = (vec![], vec![]);
    while !buf.is_empty() {
        let len = frame(buf).unwrap().unwrap();
        assert!(len <= MAX_MESSAGE_LEN);
        let u = decode_update(&buf[..len], &dopts).unwrap();
        assert_eq!(u.treat_as_withdraw, None);
        assert_eq!(u.discarded, Vec::<String>::new());
        assert_eq!(u.reach.len(), 1);
        let reach = &u.reach[0];
        assert_eq!(reach.family, family);
        let mut a = u.attrs.clone().unwrap();
        a.next_hop = reach.next_hop;
        all_attrs.push(a);
        all_prefixes.extend(reach.prefixes.iter().copied());
        buf = &buf[len..];
    }
    (all_attrs, all_prefixes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn v4_four_octet(mut attrs in path_attrs(), prefixes in v4_prefixes(), nh in any::<u32>()) {
        attrs.next_hop = v4_next_hop(nh);
        let (got, back) = round_trip(&attrs, Family::Ipv4Unicast, &prefixes, true);
        prop_assert_eq!(back, prefixes);
        for a in got { prop_assert_eq!(&a, &attrs); }
    }

    #[test]
    fn v4_two_octet(mut attrs in path_attrs(), prefixes in v4_prefixes(), nh in any::<u32>()) {
        attrs.next_hop = v4_next_hop(nh);
        let (got, back) = round_trip(&attrs, Family::Ipv4Unicast, &prefixes, false);
        prop_assert_eq!(back, prefixes);
        for a in got { prop_assert_eq!(&a, &attrs); }
    }

    #[test]
    fn v6_with_and_without_link_local(
        mut attrs in path_attrs(),
        prefixes in v6_prefixes(),
        global in any::<u128>(),
        ll in any::<Option<u128>>(),
        four in any::<bool>(),
    ) {
        attrs.next_hop = NextHop::V6 { global: v6_global(global), link_local: ll.map(Ipv6Addr::from) };
        let (got, back) = round_trip(&attrs, Family::Ipv6Unicast, &prefixes, four);
        prop_assert_eq!(back, prefixes);
        for a in got { prop_assert_eq!(&a, &attrs); }
    }

    #[test]
    fn withdraw_round_trip(v4 in v4_prefixes(), v6 in v6_prefixes()) {
        for (family, prefixes) in [(Family::Ipv4Unicast, v4), (Family::Ipv6Unicast, v6)] {
            let mut out = Vec::new();
            encode_withdraw(family, &prefixes, &EncodeOptions::default(), &mut out);
            let mut buf = &out[..];
            let mut back = vec![];
            while !buf.is_empty() {
                let len = frame(buf).unwrap().unwrap();
                let u = decode_update(&buf[..len], &FOUR).unwrap();
                prop_assert!(u.reach.is_empty() && u.end_of_rib.is_none());
                back.extend(u.withdrawn);
                buf = &buf[len..];
            }
            prop_assert_eq!(back, prefixes);
        }
    }
}

#[test]
fn non_transitive_unknown_is_dropped_on_encode() {
    let attrs = PathAttrs {
        next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
        unknown: vec![
            RawAttr {
                flags: 0x80,
                type_code: 50,
                value: vec![1],
            },
            RawAttr {
                flags: 0x40,
                type_code: 51,
                value: vec![2],
            },
            RawAttr {
                flags: 0xc0,
                type_code: 52,
                value: vec![3],
            },
        ],
        ..PathAttrs::default()
    };
    let mut out = Vec::new();
    encode_announce(
        &attrs,
        Family::Ipv4Unicast,
        &[net("10.0.0.0/8")],
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let u = decode_update(&out, &FOUR).unwrap();
    let codes: Vec<u8> = u
        .attrs
        .unwrap()
        .unknown
        .iter()
        .map(|a| a.type_code)
        .collect();
    assert_eq!(codes, vec![52]);
}

#[test]
fn long_as_sequence_is_split() {
    let attrs = PathAttrs {
        as_path: AsPath {
            segments: vec![AsSegment::Sequence((1..=600).collect())],
        },
        next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
        ..PathAttrs::default()
    };
    let mut out = Vec::new();
    encode_announce(
        &attrs,
        Family::Ipv4Unicast,
        &[net("10.0.0.0/8")],
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let path = decode_update(&out, &FOUR).unwrap().attrs.unwrap().as_path;
    assert_eq!(path.segments.len(), 3);
    assert_eq!(path.len_for_decision(), 600);
}
