//! No input makes the decoder panic.

use proptest::prelude::*;

use super::*;

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
    fn random_attribute_fields(attrs in prop::collection::vec(any::<u8>(), 0..150), nlri in prop::collection::vec(0u8..40, 0..10), four in any::<bool>()) {
        let opts = DecodeOptions { four_octet_as: four, ..DecodeOptions::default() };
        let _ = decode(&update_msg(&[], &attrs, &nlri), &opts);
    }
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
