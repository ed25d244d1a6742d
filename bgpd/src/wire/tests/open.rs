use std::net::Ipv4Addr;

use super::*;

/// A valid OPEN from AS `asn` with identifier 192.0.2.7, every capability
/// Tartan reads and two it does not.
pub(super) fn sample(asn: u32) -> Open {
    Open {
        version: 4,
        asn,
        my_as_field: u16::try_from(asn).unwrap_or(23456),
        hold_time: 90,
        router_id: Ipv4Addr::new(192, 0, 2, 7),
        caps: Capabilities {
            families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
            unknown_families: vec![(1, 4), (25, 70)],
            four_octet_as: Some(asn),
            route_refresh: true,
            enhanced_route_refresh: true,
            graceful_restart: Some(GracefulRestartCap {
                restarting: true,
                notification: true,
                restart_time: 120,
                families: vec![(Family::Ipv4Unicast, true), (Family::Ipv6Unicast, false)],
            }),
            other: vec![
                (73, b"\x04node\x07example".to_vec()),
                (69, vec![0, 1, 1, 3]),
            ],
        },
    }
}

fn decode_open(msg: &[u8]) -> Result<Open, Notification> {
    match decode(msg, &FOUR)? {
        Message::Open(o) => Ok(o),
        other => panic!("not an OPEN: {other:?}"),
    }
}

/// An OPEN body with the given optional parameters.
fn open_with_params(params: &[u8]) -> Vec<u8> {
    let mut b = vec![4, 0xfd, 0xe8, 0, 90, 192, 0, 2, 7, params.len() as u8];
    b.extend_from_slice(params);
    message(msg_type::OPEN, &b)
}

#[test]
fn round_trip_with_gr_and_four_octet_as() {
    for asn in [65001, 4_200_000_001] {
        let open = sample(asn);
        let wire = open.encode();
        assert_eq!(frame(&wire), Ok(Some(wire.len())));
        let back = decode_open(&wire).unwrap();
        assert_eq!(back, open);
        assert_eq!(back.asn, asn);
    }
    // AS_TRANS in the 2-octet field for a large AS.
    let wire = sample(4_200_000_001).encode();
    assert_eq!(&wire[20..22], &23456u16.to_be_bytes());
}

#[test]
fn hostname_capability_with_domain_is_kept() {
    // zettabgp rejects this one; we keep it raw.
    let open = sample(65001);
    let back = decode_open(&open.encode()).unwrap();
    assert!(back.caps.other.iter().any(|(c, _)| *c == 73));
}

#[test]
fn without_capabilities() {
    let wire = open_with_params(&[]);
    let open = decode_open(&wire).unwrap();
    assert_eq!(open.asn, 65000);
    assert_eq!(open.caps, Capabilities::default());
}

#[test]
fn message_checks() {
    let mut bad_version = open_with_params(&[]);
    bad_version[19] = 3;
    assert_eq!(
        decode_open(&bad_version),
        Err(Notification::unsupported_version())
    );

    for hold in [1u8, 2] {
        let mut m = open_with_params(&[]);
        m[22] = 0;
        m[23] = hold;
        assert_eq!(decode_open(&m), Err(Notification::unacceptable_hold_time()));
    }
    let mut zero_hold = open_with_params(&[]);
    zero_hold[23] = 0;
    assert!(decode_open(&zero_hold).is_ok());

    let mut zero_id = open_with_params(&[]);
    zero_id[24..28].copy_from_slice(&[0, 0, 0, 0]);
    assert_eq!(
        decode_open(&zero_id),
        Err(Notification::bad_bgp_identifier(vec![]))
    );
}

#[test]
fn unsupported_optional_parameter_is_2_4() {
    // Type 1 (authentication, deprecated).
    let wire = open_with_params(&[1, 2, 0, 0]);
    assert_eq!(
        decode_open(&wire),
        Err(Notification::unsupported_optional_parameter())
    );
}

#[test]
fn truncated_or_overrunning_tlvs_are_2_0() {
    let cases: &[&[u8]] = &[
        // Parameter length overruns the parameters.
        &[2, 10, 65, 4, 0, 0],
        // Capability length overruns its parameter.
        &[2, 4, 65, 4, 0, 0],
        // Capability header cut short.
        &[2, 1, 65],
        // Parameter header cut short.
        &[2],
        // 4-octet AS capability of the wrong length.
        &[2, 5, 65, 3, 0, 0, 1],
        &[2, 7, 65, 5, 0, 0, 0xfd, 0xe8, 0],
        // Multiprotocol capability of the wrong length.
        &[2, 5, 1, 3, 0, 1, 0],
        // Graceful restart with a partial tuple.
        &[2, 6, 64, 4, 0, 120, 0, 1],
        // Route refresh with a value.
        &[2, 3, 2, 1, 0],
    ];
    for params in cases {
        let wire = open_with_params(params);
        assert_eq!(
            decode_open(&wire),
            Err(Notification::malformed_open()),
            "params {params:?}"
        );
    }
    // Optional Parameters Length disagreeing with the message.
    let mut wire = open_with_params(&[2, 2, 2, 0]);
    wire[28] = 3;
    assert_eq!(decode_open(&wire), Err(Notification::malformed_open()));
    wire[28] = 200;
    assert_eq!(decode_open(&wire), Err(Notification::malformed_open()));
}

#[test]
fn extended_optional_parameters() {
    // RFC 9072, written when the capabilities do not fit 255 bytes.
    let mut open = sample(65001);
    open.caps.other = (0..40)
        .map(|i| (200 + (i % 50) as u8, vec![i as u8; 20]))
        .collect();
    let wire = open.encode();
    assert_eq!(wire[28], 255);
    assert_eq!(decode_open(&wire).unwrap(), open);
    // Truncated extended length.
    let body = [4, 0xfd, 0xe8, 0, 90, 192, 0, 2, 7, 255, 255, 0];
    assert_eq!(
        decode_open(&message(msg_type::OPEN, &body)),
        Err(Notification::malformed_open())
    );
}

#[test]
fn multiprotocol_with_nonzero_reserved_octet() {
    let wire = open_with_params(&[2, 6, 1, 4, 0, 2, 9, 1]);
    assert_eq!(
        decode_open(&wire).unwrap().caps.families,
        vec![Family::Ipv6Unicast]
    );
}

#[test]
fn no_panic_on_any_truncation_or_bit_flip() {
    let wire = sample(4_200_000_001).encode();
    for cut in 0..wire.len() {
        let _ = decode(&wire[..cut], &FOUR);
        let mut m = wire[..cut.max(19)].to_vec();
        if m.len() >= 19 {
            let len = m.len() as u16;
            m[16..18].copy_from_slice(&len.to_be_bytes());
            let _ = decode(&m, &FOUR);
        }
    }
    for i in 19..wire.len() {
        for bit in 0..8 {
            let mut m = wire.clone();
            m[i] ^= 1 << bit;
            let _ = decode(&m, &FOUR);
        }
    }
}

/// We are AS 65100 with identifier 10.0.0.1; the peer must be `peer_as`.
fn expecting(peer_as: u32) -> OpenExpect {
    OpenExpect {
        peer_as,
        local_as: 65100,
        local_id: Ipv4Addr::new(10, 0, 0, 1),
    }
}

fn decode_open_expecting(msg: &[u8], expect: &OpenExpect) -> Result<Open, Notification> {
    match decode_expecting(msg, &FOUR, expect)? {
        Message::Open(o) => Ok(o),
        other => panic!("not an OPEN: {other:?}"),
    }
}

/// An OPEN body as `open_with_params` (AS 65000, hold 90, 192.0.2.7),
/// with the hold time and the identifier replaced.
fn open_with(hold: u16, id: [u8; 4], params: &[u8]) -> Vec<u8> {
    let mut m = open_with_params(params);
    m[22..24].copy_from_slice(&hold.to_be_bytes());
    m[24..28].copy_from_slice(&id);
    m
}

const UNSUPPORTED_PARAM: &[u8] = &[1, 2, 0, 0];

#[test]
fn errors_come_in_the_order_of_rfc_4271_6_2() {
    let good_id = [192, 0, 2, 7];
    // Hold time (2/6) before optional parameters (2/4).
    let m = open_with(1, good_id, UNSUPPORTED_PARAM);
    assert_eq!(decode_open(&m), Err(Notification::unacceptable_hold_time()));
    // BGP Identifier (2/3) before optional parameters, also malformed ones.
    let m = open_with(90, [0; 4], UNSUPPORTED_PARAM);
    assert_eq!(
        decode_open(&m),
        Err(Notification::bad_bgp_identifier(vec![]))
    );
    let m = open_with(90, [0; 4], &[2, 4, 65, 4, 0, 0]);
    assert_eq!(
        decode_open(&m),
        Err(Notification::bad_bgp_identifier(vec![]))
    );
    // My Autonomous System (2/2) before everything but the version.
    let wrong_as = expecting(65009);
    let m = open_with(90, [0; 4], &[]);
    assert_eq!(
        decode_open_expecting(&m, &wrong_as),
        Err(Notification::bad_peer_as(65000))
    );
    let m = open_with(2, good_id, &[2, 4, 65, 4, 0, 0]);
    assert_eq!(
        decode_open_expecting(&m, &wrong_as),
        Err(Notification::bad_peer_as(65000))
    );
    let mut bad_version = open_with(90, [0; 4], &[]);
    bad_version[19] = 3;
    assert_eq!(
        decode_open_expecting(&bad_version, &wrong_as),
        Err(Notification::unsupported_version())
    );
    // The right AS: the next error in order.
    let m = open_with(1, [0; 4], UNSUPPORTED_PARAM);
    assert_eq!(
        decode_open_expecting(&m, &expecting(65000)),
        Err(Notification::unacceptable_hold_time())
    );
}

#[test]
fn the_peers_as_comes_from_the_capability_after_a_bad_parameter() {
    // AS_TRANS in the fixed field; the 4-octet AS capability follows an
    // unsupported parameter, and is still read for the AS check.
    let mut params = UNSUPPORTED_PARAM.to_vec();
    params.extend_from_slice(&[2, 6, 65, 4]);
    params.extend_from_slice(&4_200_000_001u32.to_be_bytes());
    let mut m = open_with_params(&params);
    m[20..22].copy_from_slice(&23456u16.to_be_bytes());
    assert_eq!(
        decode_open_expecting(&m, &expecting(4_200_000_001)),
        Err(Notification::unsupported_optional_parameter())
    );
    assert_eq!(
        decode_open_expecting(&m, &expecting(4_200_000_002)),
        Err(Notification::bad_peer_as(23456))
    );
    // A broken capability and AS_TRANS: the AS cannot be known, so the
    // parameter's error is reported rather than a wrong AS.
    let mut m = open_with_params(&[2, 5, 65, 3, 0, 0, 1]);
    m[20..22].copy_from_slice(&23456u16.to_be_bytes());
    assert_eq!(
        decode_open_expecting(&m, &expecting(4_200_000_001)),
        Err(Notification::malformed_open())
    );
}

#[test]
fn an_internal_peer_with_our_identifier_is_2_3_before_its_parameters() {
    let ours = expecting(65000);
    let m = open_with(90, ours.local_id.octets(), UNSUPPORTED_PARAM);
    let ibgp = OpenExpect {
        local_as: 65000,
        ..ours
    };
    assert_eq!(
        decode_open_expecting(&m, &ibgp),
        Err(Notification::bad_bgp_identifier(vec![10, 0, 0, 1]))
    );
    // From another AS the same identifier is allowed (RFC 6286 2.2).
    assert_eq!(
        decode_open_expecting(&m, &ours),
        Err(Notification::unsupported_optional_parameter())
    );
    assert!(decode_open_expecting(&open_with(90, [10, 0, 0, 1], &[]), &ours).is_ok());
}

#[test]
fn of_several_graceful_restart_capabilities_the_last_counts() {
    // RFC 4724 3: restart time 120 with IPv4, then 30 with IPv6 (F bit),
    // in two Capabilities parameters.
    let first = [2, 8, 64, 6, 0x00, 120, 0, 1, 1, 0];
    let last = [2, 8, 64, 6, 0x80, 30, 0, 2, 1, 0x80];
    let wire = open_with_params(&[first, last].concat());
    let gr = decode_open(&wire).unwrap().caps.graceful_restart.unwrap();
    assert_eq!(
        gr,
        GracefulRestartCap {
            restarting: true,
            notification: false,
            restart_time: 30,
            families: vec![(Family::Ipv6Unicast, true)],
        }
    );
    // Within one parameter too.
    let wire = open_with_params(&[2, 16, 64, 6, 0, 120, 0, 1, 1, 0, 64, 6, 0, 30, 0, 2, 1, 0]);
    let gr = decode_open(&wire).unwrap().caps.graceful_restart.unwrap();
    assert_eq!(gr.restart_time, 30);
    assert_eq!(gr.families, vec![(Family::Ipv6Unicast, false)]);
}
