//! RFC 7606 attribute discard where the attribute's own rules call for it
//! rather than treat-as-withdraw: LOCAL_PREF, ORIGINATOR_ID and
//! CLUSTER_LIST from an external peer (7.5, 7.9, 7.10), flag conflicts on
//! ATOMIC_AGGREGATE and AGGREGATOR (7.6, 7.7), and AS 0 (RFC 7607 2).

use super::rfc7606::{AS_PATH, assert_accepted, assert_withdrawn, attrs_with};
use super::*;

const EXTERNAL: DecodeOptions = DecodeOptions {
    external: true,
    ..FOUR
};

#[test]
fn s7_5_s7_9_s7_10_malformed_from_external_is_discarded() {
    let malformed = [
        attr(0x40, 5, &[0, 0, 0, 0, 1]),     // LOCAL_PREF length 5
        attr(0x80, 9, &[1, 2, 3]),           // ORIGINATOR_ID length 3
        attr(0x80, 10, &[1, 2, 3, 4, 5, 6]), // CLUSTER_LIST length 6
        attr(0x80, 10, &[]),                 // CLUSTER_LIST empty
        attr(0xc0, 5, &[0, 0, 0, 1]),        // LOCAL_PREF marked optional
        attr(0x40, 9, &[1, 1, 1, 1]),        // ORIGINATOR_ID transitive
        attr(0x60, 10, &[1, 1, 1, 1]),       // CLUSTER_LIST well-known, Partial
    ];
    for a in malformed {
        let code = a[1];
        let u = assert_accepted(&attrs_with(code, Some(a.clone())), &EXTERNAL);
        assert_eq!(u.discarded.len(), 1, "{a:?}");
        let attrs = u.attrs.unwrap();
        assert_eq!(attrs.local_pref, None);
        assert_eq!(attrs.originator_id, None);
        assert!(attrs.cluster_list.is_empty());
        // From an internal peer they stay treat-as-withdraw.
        assert_withdrawn(&attrs_with(code, Some(a)), &FOUR);
    }
    // MED is not one of them.
    assert_withdrawn(&attrs_with(4, Some(attr(0x80, 4, &[0, 1]))), &EXTERNAL);
}

#[test]
fn s7_6_s7_7_flag_conflicts_are_discarded() {
    for a in [
        attr(0xc0, 6, &[]),                              // ATOMIC_AGGREGATE optional
        attr(0x60, 6, &[]),                              // ATOMIC_AGGREGATE with Partial
        attr(0x40, 7, &[0, 0, 0xfd, 0xe9, 10, 0, 0, 1]), // AGGREGATOR well-known
        attr(0x80, 7, &[0, 0, 0xfd, 0xe9, 10, 0, 0, 1]), // AGGREGATOR non-transitive
    ] {
        let u = assert_accepted(&attrs_with(a[1], Some(a.clone())), &FOUR);
        assert_eq!(u.discarded.len(), 1, "{a:?}");
        let attrs = u.attrs.unwrap();
        assert!(!attrs.atomic_aggregate);
        assert_eq!(attrs.aggregator, None);
    }
}

#[test]
fn rfc7607_as_0() {
    // In AS_PATH: treat-as-withdraw, on either session width.
    let path = attr(0x40, AS_PATH, &[2, 2, 0, 0, 0xfd, 0xe9, 0, 0, 0, 0]);
    assert_withdrawn(&attrs_with(AS_PATH, Some(path)), &FOUR);
    let path = attr(0x40, AS_PATH, &[2, 2, 0xfd, 0xe9, 0, 0]);
    assert_withdrawn(&attrs_with(AS_PATH, Some(path)), &TWO);
    // In AGGREGATOR: attribute discard.
    let agg = attr(0xc0, 7, &[0, 0, 0, 0, 10, 0, 0, 1]);
    let u = assert_accepted(&attrs_with(7, Some(agg)), &FOUR);
    assert_eq!((u.attrs.unwrap().aggregator, u.discarded.len()), (None, 1));
}

#[test]
fn rfc7607_as_0_in_as4_attributes_is_discarded() {
    // A 2-octet session: AS_PATH 65010 23456, AS4_PATH 0.
    let mut a = attr(0x40, 1, &[0]);
    a.extend(attr(0x40, AS_PATH, &[2, 2, 0xfd, 0xf2, 0x5b, 0xa0]));
    a.extend(attr(0x40, 3, &[192, 0, 2, 1]));
    a.extend(attr(0xc0, 17, &[2, 1, 0, 0, 0, 0]));
    let u = assert_accepted(&a, &TWO);
    assert_eq!(u.discarded.len(), 1, "{u:?}");
    assert_eq!(u.attrs.unwrap().as_path.to_string(), "65010 23456");
    // AGGREGATOR AS_TRANS with AS4_AGGREGATOR AS 0: the latter goes.
    let mut a = attrs_with(AS_PATH, Some(attr(0x40, AS_PATH, &[2, 1, 0xfd, 0xf2])));
    a.extend(attr(0xc0, 7, &[0x5b, 0xa0, 10, 0, 0, 1]));
    a.extend(attr(0xc0, 18, &[0, 0, 0, 0, 10, 0, 0, 2]));
    let u = assert_accepted(&a, &TWO);
    assert_eq!(u.discarded.len(), 1, "{u:?}");
    assert_eq!(
        u.attrs.unwrap().aggregator,
        Some((23456, "10.0.0.1".parse().unwrap()))
    );
}
