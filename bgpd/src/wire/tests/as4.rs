//! RFC 6793: 2-octet sessions, AS_TRANS, AS4_PATH and AS4_AGGREGATOR.

use super::*;
use crate::model::{AsPath, AsSegment, NextHop, PathAttrs};

fn seq(v: &[u32]) -> AsSegment {
    AsSegment::Sequence(v.to_vec())
}

fn two_octet_path(segs: &[(u8, &[u16])]) -> Vec<u8> {
    let mut v = vec![];
    for (ty, asns) in segs {
        v.push(*ty);
        v.push(asns.len() as u8);
        for a in *asns {
            v.extend_from_slice(&a.to_be_bytes());
        }
    }
    v
}

fn four_octet_path(segs: &[(u8, &[u32])]) -> Vec<u8> {
    let mut v = vec![];
    for (ty, asns) in segs {
        v.push(*ty);
        v.push(asns.len() as u8);
        for a in *asns {
            v.extend_from_slice(&a.to_be_bytes());
        }
    }
    v
}

fn decode_two(extra: &[u8], as_path: &[u8]) -> Update {
    let mut a = attr(0x40, 1, &[0]);
    a.extend(attr(0x40, 2, as_path));
    a.extend(attr(0x40, 3, &[192, 0, 2, 1]));
    a.extend_from_slice(extra);
    decode_update(&update_msg(&[], &a, NLRI_10), &TWO).unwrap()
}

#[test]
fn as4_path_merge() {
    // An OLD speaker (AS 65010) prepended itself to a path from NEW ones.
    let as_path = two_octet_path(&[(2, &[65010, 23456, 65020, 23456])]);
    let as4 = attr(
        0xc0,
        17,
        &four_octet_path(&[(2, &[4_200_000_000, 65020, 4_200_000_001])]),
    );
    let u = decode_two(&as4, &as_path);
    let path = u.attrs.unwrap().as_path;
    assert_eq!(
        path.segments,
        vec![seq(&[65010, 4_200_000_000, 65020, 4_200_000_001])]
    );
}

#[test]
fn as4_path_longer_than_as_path_is_ignored() {
    let as_path = two_octet_path(&[(2, &[65010])]);
    let as4 = attr(0xc0, 17, &four_octet_path(&[(2, &[1, 2, 3])]));
    let u = decode_two(&as4, &as_path);
    assert_eq!(u.attrs.unwrap().as_path.segments, vec![seq(&[65010])]);
}

#[test]
fn as4_path_merge_keeps_sets() {
    let as_path = two_octet_path(&[(2, &[65010, 23456]), (1, &[23456, 65030])]);
    let as4 = attr(
        0xc0,
        17,
        &four_octet_path(&[(2, &[4_200_000_000]), (1, &[4_200_000_001, 65030])]),
    );
    let u = decode_two(&as4, &as_path);
    assert_eq!(
        u.attrs.unwrap().as_path.segments,
        vec![
            seq(&[65010, 4_200_000_000]),
            AsSegment::Set(vec![4_200_000_001, 65030]),
        ]
    );
}

/// RFC 5065 5: bgpd is in no confederation; AS_CONFED_SEQUENCE in a
/// 2-octet AS_PATH withdraws the routes, AS4_PATH or not.
#[test]
fn confed_segments_in_a_two_octet_as_path_are_withdrawn() {
    let as_path = two_octet_path(&[(3, &[64512]), (2, &[65010, 23456])]);
    let as4 = attr(0xc0, 17, &four_octet_path(&[(2, &[4_200_000_000])]));
    let u = decode_two(&as4, &as_path);
    assert!(u.treat_as_withdraw.is_some(), "{u:?}");
    assert!(u.reach.is_empty());
}

#[test]
fn as4_aggregator() {
    let as_path = two_octet_path(&[(2, &[23456])]);
    let as4 = attr(0xc0, 17, &four_octet_path(&[(2, &[4_200_000_000])]));
    let agg = attr(0xc0, 7, &[0x5b, 0xa0, 10, 0, 0, 1]); // AS_TRANS
    let as4_agg = attr(0xc0, 18, &[0xfa, 0x56, 0xea, 0x00, 10, 0, 0, 2]);
    let mut extra = agg.clone();
    extra.extend(&as4);
    extra.extend(&as4_agg);
    let attrs = decode_two(&extra, &as_path).attrs.unwrap();
    assert_eq!(
        attrs.aggregator,
        Some((4_200_000_000, "10.0.0.2".parse().unwrap()))
    );
    assert_eq!(attrs.as_path.segments, vec![seq(&[4_200_000_000])]);

    // AGGREGATOR with a real AS: both AS4 attributes are ignored.
    let agg_real = attr(0xc0, 7, &[0xfd, 0xe9, 10, 0, 0, 1]);
    let mut extra = agg_real;
    extra.extend(&as4);
    extra.extend(&as4_agg);
    let u = decode_two(&extra, &as_path);
    let attrs = u.attrs.unwrap();
    assert_eq!(attrs.aggregator, Some((65001, "10.0.0.1".parse().unwrap())));
    assert_eq!(attrs.as_path.segments, vec![seq(&[23456])]);
}

#[test]
fn as4_attributes_on_a_four_octet_session_are_discarded() {
    let mut a = base_attrs();
    a.extend(attr(0xc0, 17, &four_octet_path(&[(2, &[1])])));
    a.extend(attr(0xc0, 18, &[0, 0, 0, 1, 1, 1, 1, 1]));
    let u = decode_update(&update_msg(&[], &a, NLRI_10), &FOUR).unwrap();
    assert_eq!(u.discarded.len(), 2);
    assert_eq!(u.attrs.unwrap().as_path.segments, vec![seq(&[65001])]);
}

#[test]
fn malformed_as4_path_is_discarded() {
    let as_path = two_octet_path(&[(2, &[65010])]);
    let bad = attr(0xc0, 17, &[2, 2, 0, 0, 0, 1]);
    let u = decode_two(&bad, &as_path);
    assert_eq!(u.treat_as_withdraw, None);
    assert_eq!(u.discarded.len(), 1);
    assert_eq!(u.attrs.unwrap().as_path.segments, vec![seq(&[65010])]);
}

#[test]
fn encode_to_two_octet_peer_uses_as_trans() {
    let attrs = PathAttrs {
        as_path: AsPath {
            segments: vec![seq(&[65001, 4_200_000_000])],
        },
        aggregator: Some((4_200_000_001, "10.0.0.1".parse().unwrap())),
        next_hop: NextHop::V4("192.0.2.1".parse().unwrap()),
        ..PathAttrs::default()
    };
    let opts = EncodeOptions {
        four_octet_as: false,
        ..EncodeOptions::default()
    };
    let mut out = Vec::new();
    encode_announce(
        &attrs,
        Family::Ipv4Unicast,
        &[net("10.0.0.0/8")],
        &opts,
        &mut out,
    )
    .unwrap();
    // AS_PATH on the wire: 65001, AS_TRANS.
    let path = [0x40, 2, 6, 2, 2, 0xfd, 0xe9, 0x5b, 0xa0];
    assert!(out.windows(path.len()).any(|w| w == path));
    // Read as a 2-octet peer would, without the AS4 attributes.
    let u = decode_update(&out, &TWO).unwrap();
    let mut back = u.attrs.unwrap();
    back.next_hop = u.reach[0].next_hop;
    assert_eq!(back, attrs);
    // Small ASNs need no AS4_PATH.
    let small = PathAttrs {
        as_path: AsPath {
            segments: vec![seq(&[65001])],
        },
        ..attrs.clone()
    };
    let mut out2 = Vec::new();
    let small = PathAttrs {
        aggregator: None,
        ..small
    };
    encode_announce(
        &small,
        Family::Ipv4Unicast,
        &[net("10.0.0.0/8")],
        &opts,
        &mut out2,
    )
    .unwrap();
    assert!(!out2.windows(2).any(|w| w == [0xc0, 17]));
}
