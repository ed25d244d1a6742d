//! The Control packet codec: the reception checks of RFC 5880 section 6.8.6
//! and that decoding never panics and inverts encoding.

use proptest::prelude::*;

use crate::bfd::packet::{ControlPacket, DecodeError, Diag, State};

fn sample() -> ControlPacket {
    ControlPacket {
        diag: Diag::ControlDetectionTimeExpired,
        state: State::Up,
        poll: true,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: 0x0102_0304,
        your_discr: 0x0a0b_0c0d,
        desired_min_tx_us: 100_000,
        required_min_rx_us: 300_000,
        required_min_echo_rx_us: 0,
    }
}

#[test]
fn encodes_the_rfc_layout() {
    let b = sample().encode();
    assert_eq!(b[0], 0x21, "version 1, diag 1");
    assert_eq!(b[1], 0xe0, "state Up (3) and the P bit");
    assert_eq!(b[2], 3);
    assert_eq!(b[3], 24);
    assert_eq!(&b[4..8], &[1, 2, 3, 4]);
    assert_eq!(&b[8..12], &[0x0a, 0x0b, 0x0c, 0x0d]);
    assert_eq!(&b[12..16], &100_000u32.to_be_bytes());
    assert_eq!(&b[16..20], &300_000u32.to_be_bytes());
    assert_eq!(ControlPacket::decode(&b), Ok(sample()));
}

fn with(f: impl FnOnce(&mut [u8; 24])) -> Result<ControlPacket, DecodeError> {
    let mut b = sample().encode();
    f(&mut b);
    ControlPacket::decode(&b)
}

#[test]
fn rejects_other_versions() {
    assert_eq!(with(|b| b[0] = (2 << 5) | 1), Err(DecodeError::Version(2)));
    assert_eq!(with(|b| b[0] = 1), Err(DecodeError::Version(0)));
}

#[test]
fn rejects_short_packets_and_lengths() {
    let b = sample().encode();
    assert_eq!(
        ControlPacket::decode(&b[..23]),
        Err(DecodeError::Truncated(23))
    );
    assert_eq!(
        with(|b| b[3] = 23),
        Err(DecodeError::LengthTooSmall {
            length: 23,
            minimum: 24
        })
    );
    assert_eq!(
        with(|b| b[3] = 25),
        Err(DecodeError::LengthBeyondPayload {
            length: 25,
            payload: 24
        })
    );
    // The A bit raises the minimum length to 26.
    assert_eq!(
        with(|b| b[1] |= 0x04),
        Err(DecodeError::LengthTooSmall {
            length: 24,
            minimum: 26
        })
    );
}

#[test]
fn accepts_trailing_bytes_beyond_the_length() {
    let mut v = sample().encode().to_vec();
    v.extend_from_slice(&[0xff; 8]);
    assert_eq!(ControlPacket::decode(&v), Ok(sample()));
}

#[test]
fn rejects_zero_detect_mult() {
    assert_eq!(with(|b| b[2] = 0), Err(DecodeError::ZeroDetectMult));
}

#[test]
fn rejects_multipoint() {
    assert_eq!(with(|b| b[1] |= 0x01), Err(DecodeError::Multipoint));
}

#[test]
fn rejects_zero_my_discriminator() {
    assert_eq!(
        with(|b| b[4..8].fill(0)),
        Err(DecodeError::ZeroMyDiscriminator)
    );
}

#[test]
fn your_discriminator_zero_only_in_down_and_admin_down() {
    for (bits, state) in [(0u8, State::AdminDown), (1, State::Down)] {
        let got = with(|b| {
            b[8..12].fill(0);
            b[1] = bits << 6;
        });
        assert_eq!(got.map(|p| p.state), Ok(state));
    }
    for (bits, state) in [(2u8, State::Init), (3, State::Up)] {
        let got = with(|b| {
            b[8..12].fill(0);
            b[1] = bits << 6;
        });
        assert_eq!(got, Err(DecodeError::ZeroYourDiscriminator(state)));
    }
}

#[test]
fn rejects_authentication_when_none_is_configured() {
    let mut v = sample().encode().to_vec();
    v[1] |= 0x04;
    v[3] = 28;
    v.extend_from_slice(&[1, 4, 0, 0]); // simple password, length 4
    assert_eq!(
        ControlPacket::decode(&v),
        Err(DecodeError::AuthenticationNotConfigured)
    );
}

#[test]
fn takes_poll_with_final() {
    let p = with(|b| b[1] |= 0x30).expect("no discard rule for P and F");
    assert!(p.poll && p.final_);
}

fn any_state() -> impl Strategy<Value = State> {
    prop_oneof![
        Just(State::AdminDown),
        Just(State::Down),
        Just(State::Init),
        Just(State::Up)
    ]
}

fn any_packet() -> impl Strategy<Value = ControlPacket> {
    (
        (
            0u8..32,
            any_state(),
            0u8..3,
            any::<bool>(),
            any::<bool>(),
            1u8..=255,
        ),
        (1u32.., 1u32.., any::<u32>(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |((diag, state, pf, cpi, demand, mult), (my, your, tx, rx, echo))| {
                let diag = Diag::from_code(diag);
                ControlPacket {
                    diag,
                    state,
                    poll: pf == 1,
                    final_: pf == 2,
                    control_plane_independent: cpi,
                    demand,
                    detect_mult: mult,
                    my_discr: my,
                    your_discr: your,
                    desired_min_tx_us: tx,
                    required_min_rx_us: rx,
                    required_min_echo_rx_us: echo,
                }
            },
        )
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = ControlPacket::decode(&bytes);
    }

    #[test]
    fn decode_inverts_encode(p in any_packet()) {
        prop_assert_eq!(ControlPacket::decode(&p.encode()), Ok(p));
    }
}
