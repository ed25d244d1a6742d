//! Treats the input as a received BFD Control packet (RFC 5880 4.1): decoding
//! must never panic, and a packet that decodes must encode to the same first
//! 24 bytes (modulo the length byte, the only field not kept) and decode again
//! to the same packet. A decoded packet is also fed to a session, which must
//! not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::time::{Duration, Instant};
use tartan_bgpd::bfd::{ControlPacket, Session, SessionConfig};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = ControlPacket::decode(data) else {
        return;
    };
    let bytes = p.encode();
    assert_eq!(ControlPacket::decode(&bytes), Ok(p));
    assert_eq!(&bytes[..3], &data[..3]);
    assert_eq!(&bytes[4..], &data[4..24]);
    let t0 = Instant::now();
    let cfg = SessionConfig {
        desired_min_tx: Duration::from_millis(50),
        required_min_rx: Duration::from_millis(50),
        detect_mult: 3,
    };
    let mut s = Session::new(1, cfg, t0, 1);
    s.receive(&p, t0);
    let _ = s.transmit(t0);
    let _ = s.expire(t0 + Duration::from_secs(1000));
    let _ = s.next_deadline();
});
