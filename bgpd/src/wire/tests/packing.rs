use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::*;
use crate::model::{AsPath, AsSegment, NextHop, PathAttrs};

fn attrs(next_hop: NextHop) -> PathAttrs {
    PathAttrs {
        as_path: AsPath {
            segments: vec![AsSegment::Sequence(vec![65001, 65002])],
        },
        next_hop,
        local_pref: Some(100),
        communities: vec![1, 2, 3],
        ..PathAttrs::default()
    }
}

/// Splits `buf` into messages, decodes each, and returns all announced
/// prefixes and the number of messages.
fn reassemble(mut buf: &[u8], opts: &DecodeOptions) -> (Vec<IpNet>, usize) {
    let mut all = vec![];
    let mut count = 0;
    while !buf.is_empty() {
        let len = frame(buf).unwrap().expect("whole messages");
        assert!(len <= MAX_MESSAGE_LEN);
        let u = decode_update(&buf[..len], opts).unwrap();
        assert_eq!(u.treat_as_withdraw, None);
        for r in u.reach {
            all.extend(r.prefixes);
        }
        all.extend(u.withdrawn);
        buf = &buf[len..];
        count += 1;
    }
    (all, count)
}

fn v4_prefixes(n: u32) -> Vec<IpNet> {
    (0..n)
        .map(|i| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap()))
        .collect()
}

fn v6_prefixes(n: u32) -> Vec<IpNet> {
    (0..n)
        .map(|i| {
            let a = (0x2001_0db8u128 << 96) | (u128::from(i) << 64);
            IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), 64).unwrap())
        })
        .collect()
}

#[test]
fn ten_thousand_v4_prefixes() {
    let prefixes = v4_prefixes(10_000);
    let mut out = Vec::new();
    let a = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    encode_announce(
        &a,
        Family::Ipv4Unicast,
        &prefixes,
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let (back, count) = reassemble(&out, &FOUR);
    assert_eq!(back, prefixes);
    // Each /24 takes 4 bytes; the attributes about 50.
    let per_msg = (MAX_MESSAGE_LEN - 23 - 60) / 4;
    assert!(count <= 10_000usize.div_ceil(per_msg), "{count} messages");
    assert!(count >= 10_000 / ((MAX_MESSAGE_LEN - 23) / 4));
}

#[test]
fn ten_thousand_v6_prefixes_with_link_local() {
    let prefixes = v6_prefixes(10_000);
    let nh = NextHop::V6 {
        global: "2001:db8::1".parse().unwrap(),
        link_local: Some("fe80::1".parse().unwrap()),
    };
    let mut out = Vec::new();
    encode_announce(
        &attrs(nh),
        Family::Ipv6Unicast,
        &prefixes,
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let (back, count) = reassemble(&out, &FOUR);
    assert_eq!(back, prefixes);
    // Each /64 takes 9 bytes.
    let per_msg = (MAX_MESSAGE_LEN - 23 - 100) / 9;
    assert!(count <= 10_000usize.div_ceil(per_msg), "{count} messages");
}

#[test]
fn withdrawals_pack_too() {
    for (family, prefixes) in [
        (Family::Ipv4Unicast, v4_prefixes(5000)),
        (Family::Ipv6Unicast, v6_prefixes(5000)),
    ] {
        let mut out = Vec::new();
        encode_withdraw(family, &prefixes, &EncodeOptions::default(), &mut out);
        let (back, count) = reassemble(&out, &FOUR);
        assert_eq!(back, prefixes);
        assert!(count < 20, "{count}");
    }
}

#[test]
fn smaller_max_len_is_respected() {
    let opts = EncodeOptions {
        max_len: 200,
        ..EncodeOptions::default()
    };
    let prefixes = v4_prefixes(500);
    let mut out = Vec::new();
    let a = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    encode_announce(&a, Family::Ipv4Unicast, &prefixes, &opts, &mut out).unwrap();
    let mut buf = &out[..];
    while !buf.is_empty() {
        let len = frame(buf).unwrap().unwrap();
        assert!(len <= 200);
        buf = &buf[len..];
    }
    assert_eq!(reassemble(&out, &FOUR).0, prefixes);
}

#[test]
fn attributes_too_large_is_an_error() {
    let mut a = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    a.communities = (0..1100).collect();
    let mut out = vec![1, 2, 3];
    let err = encode_announce(
        &a,
        Family::Ipv4Unicast,
        &v4_prefixes(3),
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap_err();
    assert!(
        matches!(err, EncodeError::AttributesTooLarge { .. }),
        "{err}"
    );
    assert_eq!(out, vec![1, 2, 3]);
    // With extended messages (RFC 8654) it fits.
    let opts = EncodeOptions {
        max_len: 65535,
        ..EncodeOptions::default()
    };
    encode_announce(&a, Family::Ipv4Unicast, &v4_prefixes(3), &opts, &mut out).unwrap();
}

#[test]
fn mismatches_are_errors() {
    let v4 = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    let mut out = Vec::new();
    let opts = EncodeOptions::default();
    assert!(matches!(
        encode_announce(&v4, Family::Ipv6Unicast, &v6_prefixes(1), &opts, &mut out),
        Err(EncodeError::NextHopMismatch { .. })
    ));
    assert!(matches!(
        encode_announce(&v4, Family::Ipv4Unicast, &v6_prefixes(1), &opts, &mut out),
        Err(EncodeError::PrefixFamilyMismatch { .. })
    ));
    assert!(matches!(
        encode_announce(
            &attrs(NextHop::None),
            Family::Ipv4Unicast,
            &v4_prefixes(1),
            &opts,
            &mut out
        ),
        Err(EncodeError::NextHopMismatch { .. })
    ));
    assert!(out.is_empty());
}

#[test]
fn mp_reach_is_the_first_attribute() {
    let nh = NextHop::V6 {
        global: "2001:db8::1".parse().unwrap(),
        link_local: None,
    };
    let mut out = Vec::new();
    encode_announce(
        &attrs(nh),
        Family::Ipv6Unicast,
        &v6_prefixes(2),
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    // RFC 7606 5.1: right after the two length fields.
    assert_eq!(out[23..25], [0x80, 14]);
    let u = decode_update(&out, &FOUR).unwrap();
    assert_eq!(u.reach[0].next_hop, nh);
    let uniq: HashSet<_> = u.reach[0].prefixes.iter().collect();
    assert_eq!(uniq.len(), 2);
}

#[test]
fn attributes_are_in_type_code_order() {
    let mut a = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    a.med = Some(5);
    a.atomic_aggregate = true;
    a.aggregator = Some((1, "1.1.1.1".parse().unwrap()));
    a.originator_id = Some("2.2.2.2".parse().unwrap());
    a.cluster_list = vec!["3.3.3.3".parse().unwrap()];
    a.large_communities = vec![[1, 2, 3]];
    a.unknown = vec![
        crate::model::RawAttr {
            flags: 0xc0,
            type_code: 40,
            value: vec![1],
        },
        crate::model::RawAttr {
            flags: 0xc0,
            type_code: 11,
            value: vec![2],
        },
        crate::model::RawAttr {
            flags: 0x80,
            type_code: 12,
            value: vec![3],
        },
    ];
    let mut out = Vec::new();
    encode_announce(
        &a,
        Family::Ipv4Unicast,
        &v4_prefixes(1),
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let alen = usize::from(u16::from_be_bytes([out[21], out[22]]));
    let mut field = &out[23..23 + alen];
    let mut codes = vec![];
    while !field.is_empty() {
        let hdr = if field[0] & 0x10 != 0 { 4 } else { 3 };
        let len = if hdr == 4 {
            usize::from(u16::from_be_bytes([field[2], field[3]]))
        } else {
            usize::from(field[2])
        };
        codes.push(field[1]);
        field = &field[hdr + len..];
    }
    assert_eq!(codes, vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 32, 40]);
}

/// Full-table ingest speed (run with --release --ignored): 1M prefixes.
#[test]
#[ignore]
fn decode_one_million_prefixes() {
    let prefixes: Vec<IpNet> = (0..1_000_000u32)
        .map(|i| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(i << 8), 24).unwrap()))
        .collect();
    let mut out = Vec::new();
    let a = attrs(NextHop::V4("192.0.2.1".parse().unwrap()));
    let t = std::time::Instant::now();
    encode_announce(
        &a,
        Family::Ipv4Unicast,
        &prefixes,
        &EncodeOptions::default(),
        &mut out,
    )
    .unwrap();
    let encode = t.elapsed();
    let t = std::time::Instant::now();
    let mut buf = &out[..];
    let mut n = 0;
    while let Some(len) = frame(buf).unwrap() {
        if let Ok(Message::Update(u)) = decode(&buf[..len], &FOUR) {
            n += u.reach.iter().map(|r| r.prefixes.len()).sum::<usize>();
        }
        buf = &buf[len..];
    }
    let decode = t.elapsed();
    assert_eq!(n, 1_000_000);
    eprintln!("1M prefixes: encode {encode:?}, frame+decode {decode:?}");
}
