//! RFC 7606 error handling of MP attributes and of the UPDATE as a whole,
//! one case per rule, with the section it tests: MP_REACH/MP_UNREACH
//! (3.j, 7.11), duplicates (3.g), unknown attributes, the strongest action
//! (3.h, 5.2), the length and NLRI fields (3.b, 3.i, 5.3), End-of-RIB.

use super::rfc7606::{
    AS_PATH, NEXT_HOP, ORIGIN, assert_accepted, assert_withdrawn, attrs_with, mp_reach_v6,
};
use super::*;
use crate::model::{NextHop, RawAttr};

#[test]
fn mp_reach_next_hops() {
    let mut a = mp_reach_v6(32, &[64, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0]);
    a.extend(attrs_with(NEXT_HOP, None));
    let u = decode_update(&update_msg(&[], &a, &[]), &FOUR).unwrap();
    let NextHop::V6 { link_local, .. } = u.reach[0].next_hop else {
        panic!("{u:?}")
    };
    assert!(link_local.is_some());
    assert_eq!(u.reach[0].prefixes, vec![net("2001:db8::/64")]);
}

#[test]
fn s3_j_s7_11_unparseable_mp_attributes_reset() {
    let opt_err =
        |raw: &[u8]| Notification::update_error(UpdateError::OptionalAttribute, raw.to_vec());
    // Next hop length the family does not allow.
    let bad_nh = mp_reach_v6(4, &[8, 0x20]);
    let mut a = bad_nh.clone();
    a.extend(base_attrs());
    assert_eq!(
        decode_update(&update_msg(&[], &a, &[]), &FOUR),
        Err(opt_err(&bad_nh))
    );
    // Shorter than AFI, SAFI, next hop length and reserved octet.
    for v in [&[0u8, 2, 1, 0][..], &[0, 2], &[0, 2, 1, 16, 1, 2]] {
        let mp = attr(0x80, 14, v);
        let mut a = mp.clone();
        a.extend(base_attrs());
        assert_eq!(
            decode_update(&update_msg(&[], &a, &[]), &FOUR),
            Err(opt_err(&mp))
        );
    }
    // MP_UNREACH_NLRI shorter than AFI/SAFI; NLRI overrun; prefix too long.
    for v in [&[0u8, 2][..], &[0, 2, 1, 64, 0x20], &[0, 2, 1, 129, 0]] {
        let mp = attr(0x80, 15, v);
        assert_eq!(
            decode_update(&update_msg(&[], &mp, &[]), &FOUR),
            Err(opt_err(&mp))
        );
    }
    // MP_REACH_NLRI overrunning the attribute field.
    let mut a = base_attrs();
    a.extend_from_slice(&[0x80, 14, 40, 0, 2, 1]);
    assert_eq!(
        decode_update(&update_msg(&[], &a, NLRI_10), &FOUR),
        Err(Notification::update_error(
            UpdateError::MalformedAttributeList,
            vec![]
        ))
    );
}

#[test]
fn s3_g_duplicates() {
    // MP attributes: reset.
    let unreach = attr(0x80, 15, &[0, 2, 1]);
    let mut a = unreach.clone();
    a.extend(&unreach);
    assert_eq!(
        decode_update(&update_msg(&[], &a, &[]), &FOUR),
        Err(Notification::update_error(
            UpdateError::MalformedAttributeList,
            vec![]
        ))
    );
    // Others: the first wins, the rest are discarded.
    let mut a = base_attrs();
    a.extend(attr(0xc0, 8, &[0, 0, 0, 1]));
    a.extend(attr(0xc0, 8, &[0, 0, 0, 2]));
    a.extend(attr(0x40, ORIGIN, &[9]));
    let u = assert_accepted(&a, &FOUR);
    assert_eq!(u.discarded.len(), 2);
    let attrs = u.attrs.unwrap();
    assert_eq!(attrs.communities, vec![1]);
    assert_eq!(attrs.origin, crate::model::Origin::Igp);
}

#[test]
fn mp_attribute_flag_conflict_withdraws_its_prefixes() {
    let mut a = mp_reach_v6(16, &[8, 0x20]);
    a[0] = 0xc0; // transitive
    a.extend(attrs_with(NEXT_HOP, None));
    let u = decode_update(&update_msg(&[], &a, &[]), &FOUR).unwrap();
    assert!(u.treat_as_withdraw.is_some());
    assert_eq!(u.withdrawn, vec![net("2000::/8")]);
}

#[test]
fn mp_unreach_alone_with_flag_conflict_still_withdraws() {
    // RFC 7606 5.2 escalates only when attributes other than
    // MP_UNREACH_NLRI are present.
    let a = attr(0xc0, 15, &[0, 2, 1, 8, 0x20]);
    let u = decode_update(&update_msg(&[], &a, &[]), &FOUR).unwrap();
    assert!(u.treat_as_withdraw.is_some());
    assert_eq!(u.withdrawn, vec![net("2000::/8")]);
}

#[test]
fn unknown_afi_safi_is_ignored() {
    let mut a = attr(
        0x80,
        14,
        &[0, 1, 128, 12, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 88, 1],
    );
    a.extend(base_attrs());
    let u = decode_update(&update_msg(&[], &a, NLRI_10), &FOUR).unwrap();
    assert_eq!(u.treat_as_withdraw, None);
    assert_eq!(u.reach.len(), 1);
    assert_eq!(u.reach[0].family, Family::Ipv4Unicast);
    let unreach = attr(0x80, 15, &[0, 25, 70, 1, 2, 3]);
    let u = decode_update(&update_msg(&[], &unreach, &[]), &FOUR).unwrap();
    assert_eq!(u, Update::default());
}

#[test]
fn unrecognized_well_known_is_3_2_with_the_attribute() {
    let unknown = attr(0x40, 99, &[1, 2, 3]);
    let mut a = base_attrs();
    a.extend(&unknown);
    assert_eq!(
        decode_update(&update_msg(&[], &a, NLRI_10), &FOUR),
        Err(Notification::update_error(
            UpdateError::UnrecognizedWellKnown,
            unknown
        ))
    );
}

#[test]
fn unknown_optional_attributes_kept_sorted() {
    let mut a = attr(0xc0, 200, &[9]);
    a.extend(base_attrs());
    a.extend(attr(0x80, 150, &[]));
    a.extend(attr(0xd0, 16, &[1; 8]));
    let attrs = assert_accepted(&a, &FOUR).attrs.unwrap();
    let got: Vec<(u8, u8, usize)> = attrs
        .unknown
        .iter()
        .map(|r| (r.type_code, r.flags, r.value.len()))
        .collect();
    assert_eq!(got, vec![(16, 0xc0, 8), (150, 0x80, 0), (200, 0xc0, 1)]);
}

#[test]
fn s3_h_strongest_action_wins() {
    // A treat-as-withdraw error, then an unrecognized well-known one.
    let mut a = attrs_with(ORIGIN, Some(attr(0x40, ORIGIN, &[7])));
    a.extend(attr(0x40, 99, &[]));
    assert_eq!(
        decode_update(&update_msg(&[], &a, NLRI_10), &FOUR)
            .unwrap_err()
            .subcode,
        2
    );
    // A discard and a treat-as-withdraw: treat-as-withdraw.
    let mut a = attrs_with(ORIGIN, Some(attr(0x40, ORIGIN, &[7])));
    a.extend(attr(0x40, 6, &[1]));
    let u = assert_withdrawn(&a, &FOUR);
    assert_eq!(u.discarded.len(), 1);
}

#[test]
fn s5_2_no_reachable_nlri_escalates_to_reset() {
    // Withdrawals plus a malformed ORIGIN: nothing to treat as withdrawn.
    let bad_origin = attr(0x40, ORIGIN, &[0, 0]);
    let mut a = bad_origin.clone();
    a.extend(attr(0x40, AS_PATH, &[]));
    assert_eq!(
        decode_update(&update_msg(NLRI_10, &a, &[]), &FOUR),
        Err(Notification::update_error(
            UpdateError::AttributeLength,
            bad_origin
        ))
    );
    // An attribute discard alone does not escalate.
    let u = decode_update(&update_msg(NLRI_10, &attr(0x40, 6, &[1]), &[]), &FOUR).unwrap();
    assert_eq!(u.withdrawn, vec![net("10.0.0.0/8")]);
    assert_eq!(u.discarded.len(), 1);
}

#[test]
fn s3_b_length_fields_overrunning_the_message() {
    let malformed = Err(Notification::update_error(
        UpdateError::MalformedAttributeList,
        vec![],
    ));
    // Withdrawn Routes Length too large.
    let mut m = update_msg(NLRI_10, &[], &[]);
    m[19..21].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(decode_update(&m, &FOUR), malformed);
    // Total Path Attribute Length too large.
    let mut m = update_msg(&[], &base_attrs(), NLRI_10);
    m[21..23].copy_from_slice(&1000u16.to_be_bytes());
    assert_eq!(decode_update(&m, &FOUR), malformed);
    // No room for the Total Path Attribute Length at all.
    let m = message(msg_type::UPDATE, &[0, 2, 8, 10]);
    assert_eq!(decode_update(&m, &FOUR), malformed);
}

#[test]
fn s5_3_s3_i_invalid_network_fields_reset() {
    let invalid = Err(Notification::update_error(
        UpdateError::InvalidNetworkField,
        vec![],
    ));
    assert_eq!(
        decode_update(&update_msg(&[], &base_attrs(), &[33, 1, 2, 3, 4, 5]), &FOUR),
        invalid
    );
    assert_eq!(
        decode_update(&update_msg(&[], &base_attrs(), &[24, 10, 0]), &FOUR),
        invalid
    );
    assert_eq!(
        decode_update(&update_msg(&[40, 0, 0, 0, 0, 0], &[], &[]), &FOUR),
        invalid
    );
    assert_eq!(
        decode_update(&update_msg(&[16, 10], &[], &[]), &FOUR),
        invalid
    );
}

#[test]
fn host_bits_are_truncated() {
    let u = assert_accepted(&base_attrs(), &FOUR);
    assert_eq!(u.reach[0].prefixes, vec![net("10.0.0.0/8")]);
    let u = decode_update(&update_msg(&[], &base_attrs(), &[12, 10, 0xff, 0]), &FOUR).unwrap();
    assert_eq!(
        u.reach[0].prefixes,
        vec![net("10.240.0.0/12"), net("0.0.0.0/0")]
    );
}

#[test]
fn end_of_rib_detection() {
    let mut buf = Vec::new();
    encode_end_of_rib(Family::Ipv4Unicast, &mut buf);
    assert_eq!(buf.len(), 23);
    assert_eq!(
        decode_update(&buf, &FOUR).unwrap().end_of_rib,
        Some(Family::Ipv4Unicast)
    );
    let mut buf = Vec::new();
    encode_end_of_rib(Family::Ipv6Unicast, &mut buf);
    assert_eq!(
        decode_update(&buf, &FOUR).unwrap().end_of_rib,
        Some(Family::Ipv6Unicast)
    );
    // MP_UNREACH with prefixes, or with other attributes, is not an EoR.
    let with_prefix = attr(0x80, 15, &[0, 2, 1, 8, 0x20]);
    let u = decode_update(&update_msg(&[], &with_prefix, &[]), &FOUR).unwrap();
    assert_eq!((u.end_of_rib, u.withdrawn), (None, vec![net("2000::/8")]));
    let mut a = attr(0x80, 15, &[0, 2, 1]);
    a.extend(attr(0xc0, 8, &[0, 0, 0, 1]));
    assert_eq!(
        decode_update(&update_msg(&[], &a, &[]), &FOUR)
            .unwrap()
            .end_of_rib,
        None
    );
    // Withdrawals only: not an EoR.
    assert_eq!(
        decode_update(&update_msg(NLRI_10, &[], &[]), &FOUR)
            .unwrap()
            .end_of_rib,
        None
    );
}

#[test]
fn zettabgp_crash_input_does_not_panic() {
    let m = message(msg_type::UPDATE, &[0x00, 0x00, 0x00, 0x01, 0xff]);
    assert_eq!(
        decode_update(&m, &FOUR),
        Err(Notification::update_error(
            UpdateError::MalformedAttributeList,
            vec![]
        ))
    );
    assert!(decode_update(&m, &TWO).is_err());
}

#[test]
fn unknown_transitive_survives_with_partial_bit() {
    let unknown = attr(0xc0, 99, &[1, 2, 3, 4, 5]);
    let non_transitive = attr(0x80, 98, &[6]);
    let mut a = base_attrs();
    a.extend(&non_transitive);
    a.extend(&unknown);
    let u = assert_accepted(&a, &FOUR);
    let mut attrs = u.attrs.unwrap();
    attrs.next_hop = u.reach[0].next_hop;
    let mut out = Vec::new();
    encode_announce(
        &attrs,
        Family::Ipv4Unicast,
        &u.reach[0].prefixes,
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let back = decode_update(&out, &FOUR).unwrap().attrs.unwrap();
    assert_eq!(
        back.unknown,
        vec![RawAttr {
            flags: 0xe0,
            type_code: 99,
            value: vec![1, 2, 3, 4, 5]
        }]
    );
    // The bytes on the wire: Partial set, value untouched.
    let pos = out
        .windows(3)
        .position(|w| w == [0xe0, 99, 5])
        .expect("attribute on the wire");
    assert_eq!(&out[pos + 3..pos + 8], &[1, 2, 3, 4, 5]);
}

/// MP_REACH_NLRI for 2001:db8::/64 with this IPv6 next hop (and
/// optionally a link-local second one).
fn mp_reach_v6_via(global: &str, link_local: Option<&str>) -> Vec<u8> {
    let mut nh: Vec<u8> = global
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets()
        .to_vec();
    if let Some(ll) = link_local {
        nh.extend(ll.parse::<std::net::Ipv6Addr>().unwrap().octets());
    }
    let mut v = vec![0, 2, 1, nh.len() as u8];
    v.extend(nh);
    v.push(0);
    v.extend([64, 0x20, 1, 0xd, 0xb8, 0, 0, 0, 0]);
    let mut a = attr(0x80, 14, &v);
    a.extend(attrs_with(NEXT_HOP, None));
    a
}

/// RFC 4271 6.3 applied to the MP_REACH_NLRI next hop (RFC 7606 7.3):
/// the unspecified, loopback, a multicast or our own address withdraw the
/// routes; a link-local second next hop is fine.
#[test]
fn mp_reach_unusable_next_hop_is_withdrawn() {
    let opts = DecodeOptions {
        local: Some("2001:db8::fe".parse().unwrap()),
        ..FOUR
    };
    for bad in ["::", "::1", "ff02::1", "ff0e::5", "2001:db8::fe"] {
        let u = decode_update(&update_msg(&[], &mp_reach_v6_via(bad, None), &[]), &opts)
            .expect("not a reset");
        assert!(u.treat_as_withdraw.is_some(), "{bad}: {u:?}");
        assert_eq!(u.withdrawn, vec![net("2001:db8::/64")]);
        assert!(u.reach.is_empty());
    }
    let ok = mp_reach_v6_via("2001:db8::2", Some("fe80::2"));
    let u = decode_update(&update_msg(&[], &ok, &[]), &opts).unwrap();
    assert_eq!((u.treat_as_withdraw, u.reach.len()), (None, 1));
}
