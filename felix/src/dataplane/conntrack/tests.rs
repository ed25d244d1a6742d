use std::net::Ipv4Addr;

use proptest::prelude::*;

use super::wire::{self, NLMSG_DONE};
use super::{Flow, matching};
use crate::services::stale::{Entry, Tuple};
use crate::services::{Backend, UDP};

fn sample() -> Entry {
    Entry {
        orig: Tuple {
            src: Ipv4Addr::new(10, 244, 1, 9),
            dst: Ipv4Addr::new(10, 96, 0, 10),
            proto: UDP,
            src_port: 40000,
            dst_port: 53,
        },
        reply: Tuple {
            src: Ipv4Addr::new(10, 244, 0, 5),
            dst: Ipv4Addr::new(10, 244, 1, 9),
            proto: UDP,
            src_port: 5353,
            dst_port: 40000,
        },
        zone: None,
        id: Some(0x01020304),
    }
}

#[test]
fn a_delete_is_encoded_as_the_kernel_reads_it() {
    let got = wire::delete(&sample(), 7);
    let ne16 = |v: u16| v.to_ne_bytes().to_vec();
    let ne32 = |v: u32| v.to_ne_bytes().to_vec();
    let mut want = Vec::new();
    want.extend(ne32(80)); // length
    want.extend(ne16(0x0102)); // CTNETLINK << 8 | DELETE
    want.extend(ne16(0x0005)); // REQUEST | ACK
    want.extend(ne32(7)); // seq
    want.extend(ne32(0)); // port id
    want.extend([2, 0, 0, 0]); // AF_INET, version 0, res id 0
    want.extend(ne16(52)); // CTA_TUPLE_ORIG, nested
    want.extend(ne16(0x8001));
    want.extend(ne16(20)); // CTA_TUPLE_IP, nested
    want.extend(ne16(0x8001));
    want.extend(ne16(8));
    want.extend(ne16(1));
    want.extend([10, 244, 1, 9]);
    want.extend(ne16(8));
    want.extend(ne16(2));
    want.extend([10, 96, 0, 10]);
    want.extend(ne16(28)); // CTA_TUPLE_PROTO, nested
    want.extend(ne16(0x8002));
    want.extend(ne16(5));
    want.extend(ne16(1));
    want.extend([17, 0, 0, 0]); // UDP, padded
    want.extend(ne16(6));
    want.extend(ne16(2));
    want.extend([0x9c, 0x40, 0, 0]); // 40000, big-endian
    want.extend(ne16(6));
    want.extend(ne16(3));
    want.extend([0, 53, 0, 0]);
    want.extend(ne16(8)); // CTA_ID
    want.extend(ne16(12));
    want.extend([1, 2, 3, 4]);
    assert_eq!(got, want);
}

#[test]
fn a_dump_request_asks_for_ipv4() {
    let got = wire::dump::<Ipv4Addr>(3);
    assert_eq!(got.len(), 20);
    assert_eq!(&got[4..6], &0x0101u16.to_ne_bytes());
    assert_eq!(&got[6..8], &0x0301u16.to_ne_bytes());
    assert_eq!(got[16], 2);
}

#[test]
fn listed_entries_acks_and_the_end_are_read() {
    let mut buf = wire::listed(&sample(), 1);
    let mut zoned = sample();
    zoned.zone = Some(3);
    zoned.id = None;
    buf.extend(wire::listed(&zoned, 1));
    // An ack (error 0) and ENOENT, then NLMSG_DONE.
    for err in [0i32, -libc::ENOENT] {
        buf.extend(36u32.to_ne_bytes());
        buf.extend(2u16.to_ne_bytes());
        buf.extend([0; 10]);
        buf.extend(err.to_ne_bytes());
        buf.extend([0; 16]);
    }
    buf.extend(20u32.to_ne_bytes());
    buf.extend(NLMSG_DONE.to_ne_bytes());
    buf.extend([0; 14]);
    let r = wire::read(&buf);
    assert_eq!(r.entries, vec![sample(), zoned]);
    assert_eq!(r.errors, vec![0, libc::ENOENT]);
    assert!(r.done);
}

#[test]
fn matching_picks_only_stale_entries() {
    let stale = Flow {
        proto: UDP,
        addr: Some(Ipv4Addr::new(10, 96, 0, 10)),
        port: 53,
        endpoint: Some(Backend {
            addr: Ipv4Addr::new(10, 244, 0, 5),
            port: 5353,
        }),
    };
    let mut other = sample();
    other.reply.src = Ipv4Addr::new(10, 244, 0, 6);
    let got = matching(&[sample(), other], &[stale]);
    assert_eq!(got, vec![sample()]);
    assert!(matching(&[sample()], &[]).is_empty());
}

fn tuple() -> impl Strategy<Value = Tuple> {
    (
        any::<u32>(),
        any::<u32>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
    )
        .prop_map(|(s, d, proto, sp, dp)| Tuple {
            src: Ipv4Addr::from(s),
            dst: Ipv4Addr::from(d),
            proto,
            src_port: sp,
            dst_port: dp,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, rng_seed: proptest::test_runner::RngSeed::Fixed(24), ..ProptestConfig::default() })]

    #[test]
    fn reading_any_bytes_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = wire::read::<Ipv4Addr>(&buf);
    }

    #[test]
    fn a_mangled_listing_never_panics(cut in 0usize..200, flip in 0usize..200, bits in any::<u8>()) {
        let mut buf = wire::listed(&sample(), 1);
        buf.extend(wire::listed(&sample(), 2));
        let i = flip % buf.len();
        buf[i] ^= bits;
        buf.truncate(buf.len().saturating_sub(cut));
        let _ = wire::read::<Ipv4Addr>(&buf);
    }

    #[test]
    fn listed_entries_read_back(orig in tuple(), reply in tuple(), zone in any::<Option<u16>>(), id in any::<Option<u32>>()) {
        let e = Entry { orig, reply, zone, id };
        let r = wire::read(&wire::listed(&e, 9));
        prop_assert_eq!(r.entries, vec![e]);
    }
}

#[test]
fn a_create_carries_both_tuples_and_asks_for_an_ack() {
    let msg = wire::create(&sample(), 600, 5);
    // REQUEST | ACK | EXCL | CREATE.
    assert_eq!(&msg[6..8], &0x0605u16.to_ne_bytes());
    let mut e = sample();
    e.id = None;
    assert_eq!(wire::read(&msg).entries, vec![e]);
}

fn sample6() -> Entry<std::net::Ipv6Addr> {
    let a = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap();
    Entry {
        orig: Tuple {
            src: a("fd00:1::9"),
            dst: a("fd96::10"),
            proto: UDP,
            src_port: 40000,
            dst_port: 53,
        },
        reply: Tuple {
            src: a("fd00::5"),
            dst: a("fd00:1::9"),
            proto: UDP,
            src_port: 5353,
            dst_port: 40000,
        },
        zone: Some(3),
        id: Some(9),
    }
}

#[test]
fn an_ipv6_entry_is_written_and_read_as_af_inet6_with_the_v6_attributes() {
    let msg = wire::delete(&sample6(), 7);
    // nfgenmsg: AF_INET6; the tuple's addresses as CTA_IP_V6_SRC (3) and
    // CTA_IP_V6_DST (4), 16 bytes each.
    assert_eq!(msg[16], 10);
    let src = [&20u16.to_ne_bytes()[..], &3u16.to_ne_bytes()[..]].concat();
    let at = msg.windows(4).position(|w| w == src.as_slice()).unwrap();
    assert_eq!(
        &msg[at + 4..at + 20],
        &"fd00:1::9".parse::<std::net::Ipv6Addr>().unwrap().octets()
    );
    // A listed IPv6 entry reads back whole in the IPv6 reader, and is no
    // entry to the IPv4 one (the kernel dumps one family per request).
    let listed = wire::listed(&sample6(), 1);
    assert_eq!(
        wire::read::<std::net::Ipv6Addr>(&listed).entries,
        [sample6()]
    );
    assert!(wire::read::<Ipv4Addr>(&listed).entries.is_empty());
    assert_eq!(wire::dump::<std::net::Ipv6Addr>(5)[16], 10);
    assert_eq!(wire::dump::<Ipv4Addr>(5)[16], 2);
}
