use proptest::prelude::*;
use serde_json::{Value, json};

use super::message::{Data, ElementOp, Op, batch};
use super::socket::errors;
use super::types::{DataType, KeyType, Verdict};
use super::*;

fn declared() -> Declarations {
    let mut d = Declarations::default();
    d.observe(&json!({"nftables": [
        {"add": {"table": {"family": "ip", "name": "t"}}},
        {"add": {"map": {"family": "ip", "table": "t", "name": "fe_addr",
            "type": ["ipv4_addr", "inet_proto", "inet_service", "mark"], "map": "ipv4_addr"}}},
        {"add": {"map": {"family": "ip", "table": "t", "name": "frontends",
            "type": ["ipv4_addr", "inet_proto", "inet_service"], "map": "verdict"}}},
        {"add": {"set": {"family": "ip", "table": "t", "name": "plain", "type": "ipv4_addr"}}},
        {"add": {"set": {"family": "ip", "table": "t", "name": "ranges", "type": "ipv4_addr",
            "flags": ["interval"]}}},
    ]}));
    d
}

#[test]
fn concatenations_pad_each_part_to_four_bytes() {
    let k = KeyType::parse(&json!(["ipv4_addr", "inet_proto", "inet_service", "mark"])).unwrap();
    let b = k
        .encode(&json!({"concat": ["10.96.0.1", 6, 443, 2]}))
        .unwrap();
    let mut want = vec![10, 96, 0, 1, 6, 0, 0, 0, 0x01, 0xbb, 0, 0];
    want.extend(2u32.to_ne_bytes());
    assert_eq!(b, want);
    // A single type is not padded.
    assert_eq!(
        KeyType::parse(&json!("inet_service"))
            .unwrap()
            .encode(&json!(80)),
        Some(vec![0, 80])
    );
    // Wrong arity, wrong types and out-of-range numbers are not encoded.
    assert_eq!(k.encode(&json!({"concat": ["10.96.0.1", 6, 443]})), None);
    assert_eq!(k.encode(&json!({"concat": ["x", 6, 443, 2]})), None);
    assert_eq!(
        k.encode(&json!({"concat": ["10.96.0.1", 6, 70000, 2]})),
        None
    );
    assert_eq!(k.encode(&json!("10.96.0.1")), None);
}

#[test]
fn interface_names_are_sixteen_bytes_and_wildcards_are_not_keys() {
    let b = DataType::Ifname.encode(&json!("tar1a2b")).unwrap();
    assert_eq!(b.len(), 16);
    assert_eq!(&b[..7], b"tar1a2b");
    assert!(b[7..].iter().all(|x| *x == 0));
    assert_eq!(DataType::Ifname.encode(&json!("tar*")), None);
    assert_eq!(DataType::Ifname.encode(&json!("a-name-far-too-long")), None);
    assert_eq!(
        DataType::Ipv6Addr.encode(&json!("fd00::1")).unwrap().len(),
        16
    );
    assert_eq!(DataType::InetProto.encode(&json!("udp")), Some(vec![17]));
}

#[test]
fn verdicts_carry_their_kernel_codes() {
    let g = Verdict::parse(&json!({"goto": {"target": "fe_3"}})).unwrap();
    assert_eq!((g.code(), g.chain()), (-4, Some("fe_3")));
    let j = Verdict::parse(&json!({"jump": {"target": "x"}})).unwrap();
    assert_eq!(j.code(), -3);
    assert_eq!(Verdict::parse(&json!({"accept": null})).unwrap().code(), 1);
    assert_eq!(Verdict::parse(&json!({"drop": null})).unwrap().code(), 0);
    assert_eq!(Verdict::parse(&json!({"goto": {"target": ""}})), None);
    assert_eq!(Verdict::parse(&json!({"queue": 1})), None);
}

#[test]
fn only_batches_of_encodable_element_changes_go_over_netlink() {
    let d = declared();
    let ops = d
        .ops(&json!({"nftables": [
            {"delete": {"element": {"family": "ip", "table": "t", "name": "fe_addr",
                "elem": [[{"concat": ["10.96.0.1", 6, 80, 0]}, "10.0.0.5"]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "fe_addr",
                "elem": [[{"concat": ["10.96.0.1", 6, 80, 0]}, "10.0.0.6"]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "frontends",
                "elem": [[{"concat": ["10.96.0.1", 6, 80]}, {"goto": {"target": "fe_1"}}]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "plain",
                "elem": ["10.1.1.1", "10.1.1.2"]}}},
        ]}))
        .expect("element-only batch");
    let ops: Vec<ElementOp> = ops
        .into_iter()
        .map(|o| match o {
            Op::Elements(e) => e,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ops.len(), 4);
    assert!(!ops[0].add && ops[0].elems[0].data.is_none());
    assert_eq!(ops[1].elems[0].data, Some(Data::Bytes(vec![10, 0, 0, 6])));
    assert_eq!(ops[3].elems.len(), 2);
    assert_eq!(ops[0].family, 2);

    let refused = |b: Value| d.ops(&json!({"nftables": [b]}));
    // A base chain, a rule matching a packet field, a rule at a position,
    // an interval set, an unknown set, a map element without a value: all
    // left to nft.
    assert!(
        refused(
            json!({"add": {"chain": {"family": "ip", "table": "t", "name": "c",
        "type": "filter", "hook": "forward", "prio": 0}}})
        )
        .is_none()
    );
    assert!(refused(json!({"add": {"rule": {"family": "ip", "table": "t", "chain": "c",
        "expr": [{"match": {"left": {"payload": {"protocol": "ip", "field": "saddr"}}, "op": "==", "right": "10.0.0.1"}}, {"accept": null}]}}})).is_none());
    assert!(
        refused(
            json!({"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "index": 0,
        "expr": [{"accept": null}]}}})
        )
        .is_none()
    );
    assert!(
        refused(json!({"flush": {"chain": {"family": "ip", "table": "t", "name": "c"}}})).is_some()
    );
    assert!(refused(json!({"add": {"element": {"family": "ip", "table": "t", "name": "ranges", "elem": ["10.0.0.0"]}}})).is_none());
    assert!(refused(json!({"add": {"element": {"family": "ip", "table": "t", "name": "nope", "elem": ["10.0.0.0"]}}})).is_none());
    assert!(
        refused(
            json!({"add": {"element": {"family": "ip", "table": "t", "name": "fe_addr",
        "elem": [{"concat": ["10.96.0.1", 6, 80, 0]}]}}})
        )
        .is_none()
    );
    assert!(
        refused(
            json!({"add": {"element": {"family": "ip", "table": "t", "name": "plain",
        "elem": [{"elem": {"val": "10.0.0.1", "timeout": 3}}]}}})
        )
        .is_none()
    );
}

#[test]
fn declarations_follow_deletes() {
    let mut d = declared();
    let add = json!({"nftables": [{"add": {"element": {"family": "ip", "table": "t", "name": "plain", "elem": ["10.1.1.1"]}}}]});
    assert!(d.ops(&add).is_some());
    d.observe(&json!({"nftables": [{"delete": {"set": {"family": "ip", "table": "t", "name": "plain"}}}]}));
    assert!(d.ops(&add).is_none());
    let mut d = declared();
    d.observe(&json!({"nftables": [{"delete": {"table": {"family": "ip", "name": "t"}}}]}));
    assert!(d.ops(&add).is_none());
    let mut d = declared();
    d.forget("ip", "t");
    assert!(d.ops(&add).is_none());
}

#[test]
fn a_batch_is_framed_by_begin_and_end_and_splits_large_element_lists() {
    let d = declared();
    let elems: Vec<Value> = (0..600)
        .map(|i| json!(format!("10.2.{}.{}", i / 256, i % 256)))
        .collect();
    let ops = d
        .ops(&json!({"nftables": [{"add": {"element": {"family": "ip", "table": "t", "name": "plain", "elem": elems}}}]}))
        .unwrap();
    let (bytes, acked) = batch(&ops, 7);
    assert_eq!(acked, 1, "one ack, on the last message");
    // Walk the messages: begin, three NEWSETELEM, end; lengths add up.
    let mut at = 0;
    let mut kinds = vec![];
    while at < bytes.len() {
        let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        kinds.push(u16::from_ne_bytes(
            bytes[at + 4..at + 6].try_into().unwrap(),
        ));
        at += len;
    }
    assert_eq!(at, bytes.len());
    assert_eq!(
        kinds,
        vec![16, (10 << 8) | 12, (10 << 8) | 12, (10 << 8) | 12, 17]
    );
}

proptest! {
    /// Whatever the kernel sends back, reading it never panics.
    #[test]
    fn reading_answers_never_panics(buf in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = errors(&buf);
    }
}

#[test]
fn answers_are_read_as_errno() {
    let mut buf = Vec::new();
    for e in [0i32, -2] {
        buf.extend(36u32.to_ne_bytes());
        buf.extend(2u16.to_ne_bytes());
        buf.extend([0u8; 10]);
        buf.extend(e.to_ne_bytes());
        buf.extend([0u8; 16]);
    }
    assert_eq!(errors(&buf), vec![0, 2]);
}

#[test]
fn profile_rules_become_mark_and_verdict_expressions() {
    use super::rules::{Expr, META_MARK, parse};
    let mark = json!({"meta": {"key": "mark"}});
    let clear = json!({"mangle": {"key": mark, "value": {"&": [mark, 0xfcff_ffffu32]}}});
    let set = json!({"mangle": {"key": mark, "value": {"|": [mark, 0x0100_0000u32]}}});
    let test = json!({"match": {"left": {"&": [mark, 0x0200_0000u32]}, "op": "==", "right": 0}});
    assert_eq!(
        parse(&[
            clear,
            set,
            test,
            json!({"jump": {"target": "pi1"}}),
            json!({"return": null})
        ])
        .unwrap(),
        vec![
            Expr::MetaLoad { key: META_MARK },
            Expr::Bitwise {
                mask: 0xfcff_ffff,
                xor: 0
            },
            Expr::MetaStore { key: META_MARK },
            Expr::MetaLoad { key: META_MARK },
            Expr::Bitwise {
                mask: !0x0100_0000,
                xor: 0x0100_0000
            },
            Expr::MetaStore { key: META_MARK },
            Expr::MetaLoad { key: META_MARK },
            Expr::Bitwise {
                mask: 0x0200_0000,
                xor: 0
            },
            Expr::Cmp {
                equal: true,
                data: 0
            },
            Expr::Verdict(Verdict::Jump("pi1".into())),
            Expr::Verdict(Verdict::Return),
        ]
    );
    // Other keys, operators and statements are not for netlink.
    assert!(
        parse(&[json!({"mangle": {"key": {"meta": {"key": "priority"}}, "value": 1}})]).is_none()
    );
    assert!(
        parse(&[json!({"match": {"left": {"&": [mark, 1]}, "op": "<", "right": 0}})]).is_none()
    );
    assert!(parse(&[json!({"log": {"prefix": "x"}})]).is_none());
    assert!(parse(&[json!({"counter": null})]).is_none());
}
