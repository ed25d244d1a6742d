//! No input makes the decoder panic; decoding on a session that waits for
//! the peer's OPEN agrees with the plain decoding.

use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// The session's options and what we expect of the peer's OPEN, from the
/// bits of `b`, as the fuzz target derives them from its first byte.
fn session(b: u8) -> (DecodeOptions, OpenExpect) {
    let local: Option<IpAddr> = match (b >> 2) & 3 {
        0 => None,
        1 => Some(Ipv4Addr::new(192, 0, 2, 1).into()),
        2 => Some(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into()),
        _ => Some(Ipv4Addr::LOCALHOST.into()),
    };
    let opts = DecodeOptions {
        four_octet_as: b & 1 == 1,
        external: b & 2 == 2,
        local,
    };
    let peer_as = match (b >> 4) & 3 {
        0 => 65000,
        1 => 23456,
        2 => 4_200_000_001,
        _ => 65001,
    };
    let expect = OpenExpect {
        peer_as,
        local_as: if b & 0x40 != 0 { peer_as } else { 65100 },
        local_id: if b & 0x80 != 0 {
            Ipv4Addr::new(192, 0, 2, 7)
        } else {
            Ipv4Addr::new(10, 0, 0, 1)
        },
    };
    (opts, expect)
}

/// `decode_expecting` accepts only what `decode` accepts, and differs from
/// it only on OPENs (whose errors may come in another order).
fn check_expecting(msg: &[u8], b: u8) -> Result<(), TestCaseError> {
    let (opts, expect) = session(b);
    let plain = decode(msg, &opts);
    match decode_expecting(msg, &opts, &expect) {
        Ok(m) => prop_assert_eq!(Ok(m), plain),
        Err(n) if msg.get(18) != Some(&msg_type::OPEN) => prop_assert_eq!(Err(n), plain),
        Err(_) => {}
    }
    Ok(())
}

/// A valid OPEN from AS `asn`.
fn open_from(asn: u32) -> Vec<u8> {
    super::open::sample(asn).encode()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bodies_after_a_valid_header(ty in 1u8..=5, body in prop::collection::vec(any::<u8>(), 1..200), four in any::<bool>()) {
        let m = message(ty, &body);
        let opts = DecodeOptions { four_octet_as: four, ..DecodeOptions::default() };
        if let Ok(Some(len)) = frame(&m) {
            let _ = decode(&m[..len], &opts);
        }
        let _ = decode(&m, &opts);
    }

    #[test]
    fn random_streams(data in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = frame(&data);
        let _ = decode(&data, &FOUR);
    }

    #[test]
    fn random_attribute_fields(attrs in prop::collection::vec(any::<u8>(), 0..150), nlri in prop::collection::vec(0u8..40, 0..10), b in any::<u8>()) {
        let m = update_msg(&[], &attrs, &nlri);
        let _ = decode(&m, &session(b).0);
        check_expecting(&m, b)?;
    }

    #[test]
    fn random_bodies_with_an_open_expected(ty in 1u8..=5, body in prop::collection::vec(any::<u8>(), 0..200), b in any::<u8>()) {
        check_expecting(&message(ty, &body), b)?;
    }

    #[test]
    fn changed_opens_with_an_open_expected(asn in prop::sample::select(vec![65000u32, 65001, 4_200_000_001]), changes in prop::collection::vec((19usize..80, any::<u8>()), 0..3), b in any::<u8>()) {
        let mut m = open_from(asn);
        for (i, v) in changes {
            let i = i.min(m.len() - 1);
            m[i] = v;
        }
        check_expecting(&m, b)?;
    }
}

#[test]
fn every_expectation_and_local_address_on_the_corpus() {
    let mut accepted_opens = 0;
    for b in 0..=255u8 {
        let (opts, expect) = session(b);
        for asn in [65000, 65001, 4_200_000_001] {
            let m = open_from(asn);
            check_expecting(&m, b).unwrap();
            accepted_opens += usize::from(decode_expecting(&m, &opts, &expect).is_ok());
        }
        for m in super::corpus::update_messages(opts.four_octet_as) {
            check_expecting(&m, b).unwrap();
        }
    }
    // The expectations are met sometimes, and sometimes not.
    assert!(accepted_opens > 0 && accepted_opens < 256 * 3);
}

/// Every truncation and single-byte change of some valid UPDATEs.
#[test]
fn mutated_valid_updates() {
    for seed in super::corpus::update_messages(true) {
        for cut in 23..seed.len() {
            let mut m = seed[..cut].to_vec();
            m[16..18].copy_from_slice(&(cut as u16).to_be_bytes());
            let _ = decode(&m, &FOUR);
            let _ = decode(&m, &TWO);
        }
        for i in 19..seed.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut m = seed.clone();
                m[i] = v;
                let _ = decode(&m, &FOUR);
                let _ = decode(&m, &TWO);
            }
        }
    }
}
