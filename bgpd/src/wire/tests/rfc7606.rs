//! RFC 7606 error handling of single path attributes, one case per rule,
//! with the section it tests (the rest is in `rfc7606_mp.rs`), and the
//! helpers both files use.

use super::*;
use crate::model::NextHop;

pub(super) const ORIGIN: u8 = 1;
pub(super) const AS_PATH: u8 = 2;
pub(super) const NEXT_HOP: u8 = 3;

/// Base attributes with `code` replaced by `replacement` (or removed).
pub(super) fn attrs_with(code: u8, replacement: Option<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for (c, a) in [
        (ORIGIN, attr(0x40, ORIGIN, &[0])),
        (AS_PATH, attr(0x40, AS_PATH, &[2, 1, 0, 0, 0xfd, 0xe9])),
        (NEXT_HOP, attr(0x40, NEXT_HOP, &[192, 0, 2, 1])),
    ] {
        if c == code {
            if let Some(r) = &replacement {
                out.extend_from_slice(r);
            }
        } else {
            out.extend(a);
        }
    }
    if code > NEXT_HOP
        && let Some(r) = replacement
    {
        out.extend(r);
    }
    out
}

/// Asserts that the UPDATE (announcing 10.0.0.0/8) is treat-as-withdraw.
#[track_caller]
pub(super) fn assert_withdrawn(attrs: &[u8], opts: &DecodeOptions) -> Update {
    let u = decode_update(&update_msg(&[], attrs, NLRI_10), opts).expect("not a reset");
    assert!(
        u.treat_as_withdraw.is_some(),
        "not treat-as-withdraw: {u:?}"
    );
    assert!(u.reach.is_empty() && u.attrs.is_none());
    assert!(u.withdrawn.contains(&net("10.0.0.0/8")));
    u
}

#[track_caller]
pub(super) fn assert_accepted(attrs: &[u8], opts: &DecodeOptions) -> Update {
    let u = decode_update(&update_msg(&[], attrs, NLRI_10), opts).expect("not a reset");
    assert_eq!(u.treat_as_withdraw, None, "{u:?}");
    assert_eq!(u.reach.len(), 1);
    u
}

#[test]
fn valid_update_is_accepted() {
    let u = assert_accepted(&base_attrs(), &FOUR);
    assert_eq!(
        u.reach[0].next_hop,
        NextHop::V4("192.0.2.1".parse().unwrap())
    );
    assert_eq!(u.attrs.unwrap().as_path.first_as(), Some(65001));
}

#[test]
fn s7_1_malformed_origin() {
    assert_withdrawn(
        &attrs_with(ORIGIN, Some(attr(0x40, ORIGIN, &[0, 0]))),
        &FOUR,
    );
    assert_withdrawn(&attrs_with(ORIGIN, Some(attr(0x40, ORIGIN, &[]))), &FOUR);
    assert_withdrawn(&attrs_with(ORIGIN, Some(attr(0x40, ORIGIN, &[3]))), &FOUR);
}

#[test]
fn s7_2_malformed_as_path() {
    for path in [
        &[2u8, 2, 0, 0, 0xfd, 0xe9][..], // overruns: 2 ASNs, 1 present
        &[2, 0],                         // zero-length segment
        &[5, 1, 0, 0, 0xfd, 0xe9],       // unknown segment type
        &[2],                            // truncated segment header
    ] {
        assert_withdrawn(&attrs_with(AS_PATH, Some(attr(0x40, AS_PATH, path))), &FOUR);
    }
    // 2-octet width: 4 bytes read as two 2-octet ASNs is fine, 3 is not.
    assert_withdrawn(
        &attrs_with(AS_PATH, Some(attr(0x40, AS_PATH, &[2, 2, 0, 1, 0]))),
        &TWO,
    );
    // An empty AS_PATH is valid (iBGP).
    assert_accepted(&attrs_with(AS_PATH, Some(attr(0x40, AS_PATH, &[]))), &FOUR);
}

#[test]
fn s7_3_malformed_next_hop() {
    assert_withdrawn(
        &attrs_with(NEXT_HOP, Some(attr(0x40, NEXT_HOP, &[1, 2, 3, 4, 5]))),
        &FOUR,
    );
}

#[test]
fn s7_4_s7_5_malformed_med_and_local_pref() {
    assert_withdrawn(&attrs_with(4, Some(attr(0x80, 4, &[0, 0, 1]))), &FOUR);
    assert_withdrawn(&attrs_with(5, Some(attr(0x40, 5, &[0, 0, 0, 0, 1]))), &FOUR);
    let u = assert_accepted(&attrs_with(5, Some(attr(0x40, 5, &[0, 0, 0, 200]))), &FOUR);
    assert_eq!(u.attrs.unwrap().local_pref, Some(200));
}

#[test]
fn s7_6_s7_7_attribute_discard() {
    // ATOMIC_AGGREGATE with a value: discarded, routes kept.
    let u = assert_accepted(&attrs_with(6, Some(attr(0x40, 6, &[1]))), &FOUR);
    assert!(!u.attrs.unwrap().atomic_aggregate);
    assert_eq!(u.discarded.len(), 1);
    // AGGREGATOR: 8 bytes on a 4-octet session, 6 on a 2-octet one.
    let agg8 = attr(0xc0, 7, &[0, 0, 0xfd, 0xe9, 10, 0, 0, 1]);
    let agg6 = attr(0xc0, 7, &[0xfd, 0xe9, 10, 0, 0, 1]);
    let u = assert_accepted(&attrs_with(7, Some(agg8.clone())), &FOUR);
    assert_eq!(
        u.attrs.unwrap().aggregator,
        Some((65001, "10.0.0.1".parse().unwrap()))
    );
    let u = assert_accepted(&attrs_with(7, Some(agg6.clone())), &FOUR);
    assert_eq!((u.attrs.unwrap().aggregator, u.discarded.len()), (None, 1));
    let two_octet_path = attr(0x40, AS_PATH, &[2, 1, 0xfd, 0xe9]);
    let mut two = attrs_with(AS_PATH, Some(two_octet_path));
    two.extend(&agg8);
    let u = assert_accepted(&two, &TWO);
    assert_eq!((u.attrs.unwrap().aggregator, u.discarded.len()), (None, 1));
    let u = assert_accepted(&attrs_with(7, Some(attr(0xc0, 7, &[1; 7]))), &FOUR);
    assert_eq!(u.discarded.len(), 1);
}

#[test]
fn s7_8_communities() {
    assert_withdrawn(&attrs_with(8, Some(attr(0xc0, 8, &[0, 0, 1]))), &FOUR);
    assert_withdrawn(&attrs_with(8, Some(attr(0xc0, 8, &[]))), &FOUR);
    let u = assert_accepted(
        &attrs_with(8, Some(attr(0xc0, 8, &[0, 1, 0, 2, 0xff, 0xff, 0xff, 1]))),
        &FOUR,
    );
    assert_eq!(u.attrs.unwrap().communities, vec![0x0001_0002, 0xffff_ff01]);
}

#[test]
fn rfc8092_large_communities() {
    assert_withdrawn(&attrs_with(32, Some(attr(0xc0, 32, &[0; 11]))), &FOUR);
    assert_withdrawn(&attrs_with(32, Some(attr(0xc0, 32, &[]))), &FOUR);
    let mut v = vec![];
    for x in [1u32, 2, 3] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    let u = assert_accepted(&attrs_with(32, Some(attr(0xc0, 32, &v))), &FOUR);
    assert_eq!(u.attrs.unwrap().large_communities, vec![[1, 2, 3]]);
}

#[test]
fn s7_9_s7_10_route_reflection_attributes() {
    assert_withdrawn(&attrs_with(9, Some(attr(0x80, 9, &[1, 2, 3]))), &FOUR);
    assert_withdrawn(
        &attrs_with(10, Some(attr(0x80, 10, &[1, 2, 3, 4, 5, 6]))),
        &FOUR,
    );
    assert_withdrawn(&attrs_with(10, Some(attr(0x80, 10, &[]))), &FOUR);
    let mut a = attrs_with(9, Some(attr(0x80, 9, &[1, 1, 1, 1])));
    a.extend(attr(0x80, 10, &[2, 2, 2, 2, 3, 3, 3, 3]));
    let attrs = assert_accepted(&a, &FOUR).attrs.unwrap();
    assert_eq!(attrs.originator_id, Some("1.1.1.1".parse().unwrap()));
    assert_eq!(attrs.cluster_list.len(), 2);
}

#[test]
fn s3_c_flag_conflicts() {
    // ORIGIN marked optional; NEXT_HOP not transitive; MED transitive;
    // COMMUNITIES non-transitive.
    assert_withdrawn(&attrs_with(ORIGIN, Some(attr(0xc0, ORIGIN, &[0]))), &FOUR);
    assert_withdrawn(
        &attrs_with(NEXT_HOP, Some(attr(0x00, NEXT_HOP, &[1, 2, 3, 4]))),
        &FOUR,
    );
    assert_withdrawn(&attrs_with(4, Some(attr(0xc0, 4, &[0, 0, 0, 1]))), &FOUR);
    assert_withdrawn(&attrs_with(8, Some(attr(0x80, 8, &[0, 0, 0, 1]))), &FOUR);
    // RFC 4271 4.3: Partial on a well-known (ORIGIN) or an optional
    // non-transitive attribute (MED) is a conflict too.
    assert_withdrawn(&attrs_with(ORIGIN, Some(attr(0x60, ORIGIN, &[0]))), &FOUR);
    assert_withdrawn(&attrs_with(4, Some(attr(0xa0, 4, &[0, 0, 0, 1]))), &FOUR);
    // Extended Length is no conflict, nor is Partial on an optional
    // transitive attribute.
    assert_accepted(&attrs_with(ORIGIN, Some(attr(0x50, ORIGIN, &[0]))), &FOUR);
    assert_accepted(&attrs_with(8, Some(attr(0xe0, 8, &[0, 0, 0, 1]))), &FOUR);
}

#[test]
fn s4_attribute_length_conflicts() {
    // The last attribute's length overruns the attribute field; the NLRI
    // is still found from the Total Path Attribute Length.
    let mut a = base_attrs();
    a.extend_from_slice(&[0xc0, 8, 8, 0, 0, 0, 1]);
    let u = assert_withdrawn(&a, &FOUR);
    assert!(u.treat_as_withdraw.unwrap().contains("overruns"));
    // Fewer than 3 octets left for an attribute header.
    let mut a = base_attrs();
    a.extend_from_slice(&[0xc0, 8]);
    assert_withdrawn(&a, &FOUR);
    // Extended length header cut short.
    let mut a = base_attrs();
    a.extend_from_slice(&[0xd0, 8, 0]);
    assert_withdrawn(&a, &FOUR);
}

#[test]
fn s3_d_missing_well_known_attributes() {
    for code in [ORIGIN, AS_PATH, NEXT_HOP] {
        let u = assert_withdrawn(&attrs_with(code, None), &FOUR);
        assert!(u.treat_as_withdraw.unwrap().contains("missing"));
    }
    // NEXT_HOP is not needed when only MP_REACH_NLRI carries NLRI.
    let mut a = mp_reach_v6(16, &[8, 0x20]);
    a.extend(attrs_with(NEXT_HOP, None));
    let u = decode_update(&update_msg(&[], &a, &[]), &FOUR).unwrap();
    assert_eq!(u.treat_as_withdraw, None);
    assert_eq!(u.reach[0].prefixes, vec![net("2000::/8")]);
    // ORIGIN still is.
    let mut a = mp_reach_v6(16, &[8, 0x20]);
    a.extend(attr(0x40, AS_PATH, &[]));
    let u = decode_update(&update_msg(&[], &a, &[]), &FOUR).unwrap();
    assert!(u.treat_as_withdraw.is_some());
    assert_eq!(u.withdrawn, vec![net("2000::/8")]);
}

/// An MP_REACH_NLRI for IPv6 unicast with a next hop of `nh_len` bytes.
pub(super) fn mp_reach_v6(nh_len: u8, nlri: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 2, 1, nh_len];
    v.extend((0..nh_len).map(|i| 0x20 + i));
    v.push(0);
    v.extend_from_slice(nlri);
    attr(0x80, 14, &v)
}

/// RFC 5065 5, RFC 7606 7.2: bgpd is in no confederation, so an AS_PATH
/// with AS_CONFED_SEQUENCE or AS_CONFED_SET comes from outside one.
#[test]
fn s7_2_confederation_segments_are_withdrawn() {
    for path in [
        &[3u8, 1, 0, 0, 0, 7, 2, 1, 0, 0, 0, 9][..],
        &[2, 1, 0, 0, 0, 9, 4, 1, 0, 0, 0, 8],
    ] {
        let a = attrs_with(AS_PATH, Some(attr(0x40, AS_PATH, path)));
        assert_withdrawn(&a, &FOUR);
        let external = DecodeOptions {
            external: true,
            ..FOUR
        };
        assert_withdrawn(&a, &external);
    }
}

/// RFC 4271 6.3, RFC 7606 7.3: a semantically wrong NEXT_HOP withdraws
/// the routes; it is no reset.
#[test]
fn s7_3_unusable_next_hop_is_withdrawn() {
    let opts = DecodeOptions {
        local: Some("192.0.2.254".parse().unwrap()),
        ..FOUR
    };
    for nh in [
        [0, 0, 0, 0],
        [0, 1, 2, 3],
        [224, 0, 0, 1],
        [239, 1, 2, 3],
        [127, 0, 0, 1],
        [255, 255, 255, 255],
        [240, 0, 0, 1],
        [192, 0, 2, 254],
    ] {
        let u = assert_withdrawn(
            &attrs_with(NEXT_HOP, Some(attr(0x40, NEXT_HOP, &nh))),
            &opts,
        );
        assert!(u.treat_as_withdraw.unwrap().contains("next hop"));
    }
    assert_accepted(&base_attrs(), &opts);
}
