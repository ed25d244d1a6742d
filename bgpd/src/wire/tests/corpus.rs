//! The seed corpus of the `decode` fuzz target (bgpd/fuzz/corpus/decode),
//! generated from the encoders so that it stays valid. Each seed is one
//! byte (bit 0: 4-octet AS session) followed by a byte stream.
//!
//! Regenerate: `TARTAN_WRITE_CORPUS=1 cargo test -p tartan-bgpd --lib wire::tests::corpus`

use std::net::Ipv4Addr;

use super::*;
use crate::model::{AsPath, AsSegment, NextHop, PathAttrs, RawAttr};

fn attrs_v4() -> PathAttrs {
    PathAttrs {
        as_path: AsPath {
            segments: vec![AsSegment::Sequence(vec![65001, 4_200_000_000])],
        },
        next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
        med: Some(10),
        local_pref: Some(100),
        ..PathAttrs::default()
    }
}

fn attrs_rich() -> PathAttrs {
    PathAttrs {
        communities: vec![0x0001_0002, 0xffff_ff01],
        large_communities: vec![[65001, 1, 2], [4_200_000_000, 3, 4]],
        atomic_aggregate: true,
        aggregator: Some((4_200_000_001, Ipv4Addr::new(10, 0, 0, 1))),
        originator_id: Some(Ipv4Addr::new(1, 1, 1, 1)),
        cluster_list: vec![Ipv4Addr::new(2, 2, 2, 2)],
        unknown: vec![
            RawAttr {
                flags: 0xc0,
                type_code: 16,
                value: vec![0, 2, 0xfd, 0xe9, 0, 0, 0, 1],
            },
            RawAttr {
                flags: 0xc0,
                type_code: 99,
                value: vec![7; 300],
            },
        ],
        ..attrs_v4()
    }
}

fn v6_next_hop(link_local: bool) -> NextHop {
    NextHop::V6 {
        global: "2001:db8::1".parse().unwrap(),
        link_local: link_local.then(|| "fe80::1".parse().unwrap()),
    }
}

fn announce(attrs: &PathAttrs, family: Family, prefixes: &[&str], four: bool) -> Vec<u8> {
    let prefixes: Vec<_> = prefixes.iter().map(|p| net(p)).collect();
    let opts = EncodeOptions {
        four_octet_as: four,
        ..EncodeOptions::default()
    };
    let mut out = Vec::new();
    encode_announce(attrs, family, &prefixes, &opts, &mut out).unwrap();
    out
}

fn open(asn: u32) -> Vec<u8> {
    Open {
        version: 4,
        asn,
        my_as_field: 0,
        hold_time: 90,
        router_id: Ipv4Addr::new(192, 0, 2, 7),
        caps: Capabilities {
            families: vec![Family::Ipv4Unicast, Family::Ipv6Unicast],
            four_octet_as: Some(asn),
            route_refresh: true,
            enhanced_route_refresh: true,
            graceful_restart: Some(GracefulRestartCap {
                restarting: false,
                notification: true,
                restart_time: 120,
                families: vec![(Family::Ipv4Unicast, true)],
            }),
            other: vec![(73, b"\x04node\x00".to_vec())],
            ..Capabilities::default()
        },
    }
    .encode()
}

/// Valid UPDATE messages, also used by the mutation test.
pub(super) fn update_messages(four: bool) -> Vec<Vec<u8>> {
    let mut v = vec![
        announce(
            &attrs_v4(),
            Family::Ipv4Unicast,
            &["10.0.0.0/8", "192.0.2.0/24", "0.0.0.0/0"],
            four,
        ),
        announce(&attrs_rich(), Family::Ipv4Unicast, &["10.1.0.0/16"], four),
        announce(
            &PathAttrs {
                next_hop: v6_next_hop(false),
                ..attrs_v4()
            },
            Family::Ipv6Unicast,
            &["2001:db8::/32", "2001:db8:1::/48"],
            four,
        ),
        announce(
            &PathAttrs {
                next_hop: v6_next_hop(true),
                ..attrs_rich()
            },
            Family::Ipv6Unicast,
            &["2001:db8:2::/64"],
            four,
        ),
    ];
    let mut w = Vec::new();
    encode_withdraw(
        Family::Ipv4Unicast,
        &[net("10.0.0.0/8")],
        &EncodeOptions::default(),
        &mut w,
    );
    v.push(w);
    let mut w = Vec::new();
    encode_withdraw(
        Family::Ipv6Unicast,
        &[net("2001:db8::/32")],
        &EncodeOptions::default(),
        &mut w,
    );
    v.push(w);
    v
}

/// (file name, contents) of every seed.
pub(super) fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |name: &str, four: bool, stream: Vec<u8>| {
        let mut s = vec![u8::from(four)];
        s.extend(stream);
        seeds.push((name.to_string(), s));
    };
    let mut ka = Vec::new();
    encode_keepalive(&mut ka);
    add("keepalive", true, ka.clone());
    add("open_caps", true, open(65001));
    add("open_as4", true, open(4_200_000_000));
    add(
        "notification_cease",
        true,
        Notification::cease_with_message(2, "maintenance").encode(),
    );
    add(
        "notification_update",
        true,
        Notification::update_error(UpdateError::MalformedAsPath, vec![]).encode(),
    );
    let mut rr = Vec::new();
    encode_route_refresh(Family::Ipv6Unicast, &mut rr);
    add("route_refresh", true, rr);
    for four in [true, false] {
        for (i, u) in update_messages(four).into_iter().enumerate() {
            let suffix = if four { "" } else { "_two_octet" };
            add(&format!("update_{i}{suffix}"), four, u);
        }
    }
    for family in Family::ALL {
        let mut eor = Vec::new();
        encode_end_of_rib(family, &mut eor);
        add(&format!("eor_{}", family.name()), true, eor);
    }
    // A whole session: OPEN, KEEPALIVE, UPDATEs, EoR, NOTIFICATION.
    let mut session = open(65001);
    session.extend(&ka);
    for u in update_messages(true) {
        session.extend(u);
    }
    encode_end_of_rib(Family::Ipv4Unicast, &mut session);
    session.extend(Notification::administrative_reset().encode());
    add("session", true, session);

    // Malformed ones.
    add(
        "zettabgp_crash",
        true,
        message(msg_type::UPDATE, &[0, 0, 0, 1, 0xff]),
    );
    add("bad_marker", true, vec![0xfe; 19]);
    add("bad_length", true, message(msg_type::KEEPALIVE, &[0]));
    add("bad_type", true, message(9, &[]));
    let mut origin = base_attrs();
    origin[3] = 7;
    add("bad_origin", true, update_msg(&[], &origin, NLRI_10));
    let mut overrun = base_attrs();
    overrun.extend_from_slice(&[0xc0, 8, 200, 1]);
    add("attr_overrun", true, update_msg(&[], &overrun, NLRI_10));
    add(
        "bad_nlri",
        true,
        update_msg(&[], &base_attrs(), &[33, 1, 2, 3, 4, 5]),
    );
    let mut dup_mp = attr(0x80, 15, &[0, 2, 1]);
    dup_mp.extend(attr(0x80, 15, &[0, 2, 1]));
    add("dup_mp_unreach", true, update_msg(&[], &dup_mp, &[]));
    let mut well_known = base_attrs();
    well_known.extend(attr(0x40, 99, &[1]));
    add(
        "unknown_well_known",
        true,
        update_msg(&[], &well_known, NLRI_10),
    );
    add(
        "open_truncated_cap",
        true,
        message(
            msg_type::OPEN,
            &[4, 0xfd, 0xe8, 0, 90, 1, 2, 3, 4, 4, 2, 2, 65, 4],
        ),
    );
    seeds
}

fn corpus_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/decode")
}

#[test]
fn fuzz_corpus_is_current() {
    let dir = corpus_dir();
    if std::env::var_os("TARTAN_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, bytes) in seeds() {
        let on_disk = std::fs::read(dir.join(&name)).unwrap_or_default();
        assert!(
            on_disk == bytes,
            "fuzz seed {name} is stale: rerun with TARTAN_WRITE_CORPUS=1"
        );
    }
}

#[test]
fn valid_seeds_decode() {
    for (name, seed) in seeds() {
        if [
            "zettabgp",
            "bad_",
            "attr_",
            "dup_",
            "unknown_",
            "open_trunc",
        ]
        .iter()
        .any(|p| name.starts_with(p))
        {
            continue;
        }
        let opts = DecodeOptions {
            four_octet_as: seed[0] & 1 == 1,
            ..DecodeOptions::default()
        };
        let mut buf = &seed[1..];
        while !buf.is_empty() {
            let len = frame(buf)
                .unwrap()
                .unwrap_or_else(|| panic!("{name}: partial message"));
            let m = decode(&buf[..len], &opts).unwrap_or_else(|n| panic!("{name}: {n}"));
            if let Message::Update(u) = m {
                assert_eq!(u.treat_as_withdraw, None, "{name}");
            }
            buf = &buf[len..];
        }
    }
}
