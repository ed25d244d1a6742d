//! Treats the input as a TCP byte stream from a peer: frames and decodes
//! messages as a session would, and re-encodes the routes of every UPDATE,
//! which must decode again to the same routes. The first byte sets the
//! session: bit 0 a 4-octet AS session, bit 1 an external peer, bits 2-3
//! our address on it, bits 4-7 what we expect of the peer's OPEN. Each
//! message is also decoded as a session waiting for the OPEN would, which
//! must agree with the plain decoding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use tartan_bgpd::model::{Family, PathAttrs, RawAttr};
use tartan_bgpd::wire::{
    DecodeOptions, EncodeError, EncodeOptions, Message, OpenExpect, Update, decode,
    decode_expecting, encode_announce, encode_withdraw, frame,
};

fuzz_target!(|data: &[u8]| {
    let Some((&first, mut stream)) = data.split_first() else {
        return;
    };
    let four_octet_as = first & 1 == 1;
    // The second bit: the peer is external (some attribute errors are
    // then discarded instead of withdrawing the routes).
    let dopts = DecodeOptions {
        four_octet_as,
        external: first & 2 == 2,
        local: local_address(first),
    };
    let expect = open_expect(first);
    let eopts = EncodeOptions {
        four_octet_as,
        ..EncodeOptions::default()
    };
    while let Ok(Some(len)) = frame(stream) {
        let msg = &stream[..len];
        stream = &stream[len..];
        check_expecting(msg, &dopts, &expect);
        match decode(msg, &dopts) {
            Ok(Message::Update(update)) => reencode(&update, &dopts, &eopts),
            Ok(Message::Notification(n)) => {
                let _ = n.to_string();
                assert_eq!(decode(&n.encode(), &dopts), Ok(Message::Notification(n)));
            }
            Ok(Message::Open(open)) => {
                let again = decode(&open.encode(), &dopts);
                assert!(again.is_ok(), "re-encoded OPEN fails: {again:?}");
            }
            Ok(_) => {}
            Err(n) => {
                let _ = n.to_string();
                break;
            }
        }
    }
});

/// Bits 2-3: none, or an IPv4, IPv6 or loopback address of ours, which
/// no route may have as its next hop.
fn local_address(first: u8) -> Option<IpAddr> {
    match (first >> 2) & 3 {
        0 => None,
        1 => Some(Ipv4Addr::new(192, 0, 2, 1).into()),
        2 => Some(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into()),
        _ => Some(Ipv4Addr::LOCALHOST.into()),
    }
}

/// Bits 4-7: the peer's AS (2- or 4-octet), whether it is internal, and
/// our identifier (one a test OPEN may well carry).
fn open_expect(first: u8) -> OpenExpect {
    let peer_as = match (first >> 4) & 3 {
        0 => 65000,
        1 => 23456,
        2 => 4_200_000_001,
        _ => 65001,
    };
    OpenExpect {
        peer_as,
        local_as: if first & 0x40 != 0 { peer_as } else { 65100 },
        local_id: if first & 0x80 != 0 {
            Ipv4Addr::new(192, 0, 2, 7)
        } else {
            Ipv4Addr::new(10, 0, 0, 1)
        },
    }
}

/// Decoding with an OPEN expected accepts only what the plain decoding
/// accepts, and differs from it only on OPENs (whose errors may come in
/// another order).
fn check_expecting(msg: &[u8], dopts: &DecodeOptions, expect: &OpenExpect) {
    let plain = decode(msg, dopts);
    match decode_expecting(msg, dopts, expect) {
        Ok(m) => assert_eq!(Ok(m), plain),
        Err(n) => {
            let _ = n.to_string();
            if msg[18] != 1 {
                assert_eq!(Err(n), plain);
            }
        }
    }
}

/// Decodes a stream of UPDATEs made by the encoder.
fn decode_all(mut buf: &[u8], dopts: &DecodeOptions) -> Vec<Update> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let len = frame(buf)
            .expect("encoder output frames")
            .expect("whole messages");
        let msg = decode(&buf[..len], dopts).expect("encoder output decodes");
        let Message::Update(u) = msg else {
            panic!("encoder wrote a non-UPDATE")
        };
        assert_eq!(
            u.treat_as_withdraw, None,
            "encoder output is treat-as-withdraw"
        );
        out.push(u);
        buf = &buf[len..];
    }
    out
}

/// What the attributes should look like after one more trip.
fn expected(attrs: &PathAttrs) -> PathAttrs {
    let mut a = attrs.clone();
    a.unknown.retain(|u| u.flags & 0xc0 == 0xc0);
    for u in &mut a.unknown {
        u.flags |= RawAttr::PARTIAL;
    }
    a
}

fn reencode(update: &Update, dopts: &DecodeOptions, eopts: &EncodeOptions) {
    if let Some(attrs) = &update.attrs {
        for reach in &update.reach {
            let mut a = attrs.clone();
            a.next_hop = reach.next_hop;
            let mut out = Vec::new();
            match encode_announce(&a, reach.family, &reach.prefixes, eopts, &mut out) {
                Ok(()) => {}
                // Can happen legitimately: AS4_PATH or AS_PATH splits make
                // the set bigger than what was received.
                Err(EncodeError::AttributesTooLarge { .. }) => continue,
                Err(e) => panic!("re-encoding a decoded route failed: {e}"),
            }
            let mut prefixes = Vec::new();
            for u in decode_all(&out, dopts) {
                assert_eq!(u.reach.len(), 1);
                let mut got = u.attrs.expect("attributes");
                got.next_hop = u.reach[0].next_hop;
                if dopts.four_octet_as {
                    assert_eq!(got, expected(&a));
                } else {
                    // Confederation segments cannot ride in AS4_PATH, so
                    // only the rest is compared on 2-octet sessions.
                    let mut want = expected(&a);
                    want.as_path = got.as_path.clone();
                    want.aggregator = got.aggregator;
                    assert_eq!(got, want);
                }
                prefixes.extend(u.reach[0].prefixes.iter().copied());
            }
            assert_eq!(prefixes, reach.prefixes);
        }
    }
    for family in Family::ALL {
        let withdrawn: Vec<_> = update
            .withdrawn
            .iter()
            .copied()
            .filter(|p| Family::of(p) == family)
            .collect();
        let mut out = Vec::new();
        encode_withdraw(family, &withdrawn, eopts, &mut out);
        let back: Vec<_> = decode_all(&out, dopts)
            .into_iter()
            .flat_map(|u| u.withdrawn)
            .collect();
        assert_eq!(back, withdrawn);
    }
}
