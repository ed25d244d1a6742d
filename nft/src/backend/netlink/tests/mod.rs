//! The netlink backend's encoding of elements, sets and batches, and the
//! reading of the kernel's answers; [`rule_shapes`] holds the rules'.

mod rule_shapes;

use nftables::expr::{Expression, Verdict as NftVerdict};
use nftables::schema::SetTypeValue;
use nftables::stmt::Statement;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::message::{Data, ElementOp, Op, batch};
use super::rules::{Expr, SetInfo};
use super::socket::errors;
use super::types::{DataType, KeyType, Verdict};
use super::*;

/// Commands written by hand in nft's JSON, as the model; `None` for
/// JSON the model cannot hold (which could not be encoded either).
fn tx(v: Value) -> Option<Transaction> {
    Transaction::from_json(&v).ok()
}

fn ops_of(d: &Declarations, v: Value) -> Option<Vec<Op>> {
    d.ops(&tx(v)?)
}

fn observe(d: &mut Declarations, v: Value) {
    d.observe(&tx(v).expect("a batch of the model"));
}

fn ex(v: Value) -> Expression<'static> {
    serde_json::from_value(v).expect("an expression")
}

fn key(v: Value) -> Option<KeyType> {
    KeyType::of(&serde_json::from_value::<SetTypeValue>(v).ok()?)
}

fn verdict(v: Value) -> Option<Verdict> {
    Verdict::of(&serde_json::from_value::<NftVerdict>(v).ok()?)
}

/// [`rules::parse`] of statements written in nft's JSON.
fn parse(
    stmts: &[Value],
    family: &str,
    sets: &dyn Fn(&str) -> Option<SetInfo>,
) -> Option<Vec<Expr>> {
    let stmts = stmts
        .iter()
        .map(|s| serde_json::from_value::<Statement<'static>>(s.clone()).ok())
        .collect::<Option<Vec<_>>>()?;
    let family = serde_json::from_value(json!(family)).ok()?;
    rules::parse(&stmts, family, sets)
}

fn declared() -> Declarations {
    let mut d = Declarations::default();
    observe(
        &mut d,
        json!({"nftables": [
            {"add": {"table": {"family": "ip", "name": "t"}}},
            {"add": {"map": {"family": "ip", "table": "t", "name": "fe_addr",
                "type": ["ipv4_addr", "inet_proto", "inet_service", "mark"], "map": "ipv4_addr"}}},
            {"add": {"map": {"family": "ip", "table": "t", "name": "frontends",
                "type": ["ipv4_addr", "inet_proto", "inet_service"], "map": "verdict"}}},
            {"add": {"set": {"family": "ip", "table": "t", "name": "plain", "type": "ipv4_addr"}}},
            {"add": {"set": {"family": "ip", "table": "t", "name": "ranges", "type": "ipv4_addr",
                "flags": ["interval"]}}},
        ]}),
    );
    d
}

#[test]
fn concatenations_pad_each_part_to_four_bytes() {
    let k = key(json!(["ipv4_addr", "inet_proto", "inet_service", "mark"])).unwrap();
    let b = k
        .encode(&ex(json!({"concat": ["10.96.0.1", 6, 443, 2]})))
        .unwrap();
    let mut want = vec![10, 96, 0, 1, 6, 0, 0, 0, 0x01, 0xbb, 0, 0];
    want.extend(2u32.to_ne_bytes());
    assert_eq!(b, want);
    // A single type is not padded.
    assert_eq!(
        key(json!("inet_service")).unwrap().encode(&ex(json!(80))),
        Some(vec![0, 80])
    );
    // Wrong arity, wrong types and out-of-range numbers are not encoded.
    assert_eq!(
        k.encode(&ex(json!({"concat": ["10.96.0.1", 6, 443]}))),
        None
    );
    assert_eq!(k.encode(&ex(json!({"concat": ["x", 6, 443, 2]}))), None);
    assert_eq!(
        k.encode(&ex(json!({"concat": ["10.96.0.1", 6, 70000, 2]}))),
        None
    );
    assert_eq!(k.encode(&ex(json!("10.96.0.1"))), None);
}

#[test]
fn interface_names_are_sixteen_bytes_and_wildcards_are_not_keys() {
    let b = DataType::Ifname.encode(&ex(json!("tar1a2b"))).unwrap();
    assert_eq!(b.len(), 16);
    assert_eq!(&b[..7], b"tar1a2b");
    assert!(b[7..].iter().all(|x| *x == 0));
    assert_eq!(DataType::Ifname.encode(&ex(json!("tar*"))), None);
    assert_eq!(
        DataType::Ifname.encode(&ex(json!("a-name-far-too-long"))),
        None
    );
    assert_eq!(
        DataType::Ipv6Addr
            .encode(&ex(json!("fd00::1")))
            .unwrap()
            .len(),
        16
    );
    assert_eq!(
        DataType::InetProto.encode(&ex(json!("udp"))),
        Some(vec![17])
    );
}

#[test]
fn verdicts_carry_their_kernel_codes() {
    let g = verdict(json!({"goto": {"target": "fe_3"}})).unwrap();
    assert_eq!((g.code(), g.chain()), (-4, Some("fe_3")));
    let j = verdict(json!({"jump": {"target": "x"}})).unwrap();
    assert_eq!(j.code(), -3);
    assert_eq!(verdict(json!({"accept": null})).unwrap().code(), 1);
    assert_eq!(verdict(json!({"drop": null})).unwrap().code(), 0);
    assert_eq!(verdict(json!({"goto": {"target": ""}})), None);
    assert_eq!(verdict(json!({"queue": 1})), None);
}

#[test]
fn only_batches_of_encodable_element_changes_go_over_netlink() {
    let d = declared();
    let ops = ops_of(
        &d,
        json!({"nftables": [
            {"delete": {"element": {"family": "ip", "table": "t", "name": "fe_addr",
                "elem": [[{"concat": ["10.96.0.1", 6, 80, 0]}, "10.0.0.5"]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "fe_addr",
                "elem": [[{"concat": ["10.96.0.1", 6, 80, 0]}, "10.0.0.6"]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "frontends",
                "elem": [[{"concat": ["10.96.0.1", 6, 80]}, {"goto": {"target": "fe_1"}}]]}}},
            {"add": {"element": {"family": "ip", "table": "t", "name": "plain",
                "elem": ["10.1.1.1", "10.1.1.2"]}}},
        ]}),
    )
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

    let refused = |b: Value| ops_of(&d, json!({"nftables": [b]}));
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
    assert!(ops_of(&d, add.clone()).is_some());
    observe(
        &mut d,
        json!({"nftables": [{"delete": {"set": {"family": "ip", "table": "t", "name": "plain", "type": "ipv4_addr"}}}]}),
    );
    assert!(ops_of(&d, add.clone()).is_none());
    let mut d = declared();
    observe(
        &mut d,
        json!({"nftables": [{"delete": {"table": {"family": "ip", "name": "t"}}}]}),
    );
    assert!(ops_of(&d, add.clone()).is_none());
    let mut d = declared();
    d.forget("ip", "t");
    assert!(ops_of(&d, add.clone()).is_none());
}

#[test]
fn a_batch_is_framed_by_begin_and_end_and_splits_large_element_lists() {
    let d = declared();
    let elems: Vec<Value> = (0..600)
        .map(|i| json!(format!("10.2.{}.{}", i / 256, i % 256)))
        .collect();
    let ops = ops_of(&d, json!({"nftables": [{"add": {"element": {"family": "ip", "table": "t", "name": "plain", "elem": elems}}}]}))
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
fn interval_concatenations_are_declared_and_filled_with_boxes() {
    let d = Declarations::default();
    let ops = ops_of(&d, json!({"nftables": [
            {"add": {"set": {"family": "inet", "table": "t", "name": "r", "flags": ["interval"],
                "type": ["ipv4_addr", "inet_proto", "inet_service"],
                "elem": [{"concat": [{"range": ["10.0.0.1", "10.0.0.5"]}, 6, {"range": [80, 90]}]}]}}},
            {"delete": {"element": {"family": "inet", "table": "t", "name": "r",
                "elem": [{"concat": ["10.0.0.9", {"range": [0, 255]}, 80]}]}}},
            {"add": {"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [
                {"match": {"op": "==", "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}},
                {"match": {"op": "==", "left": {"concat": [
                    {"payload": {"protocol": "ip", "field": "daddr"}}, {"meta": {"key": "l4proto"}},
                    {"payload": {"protocol": "th", "field": "dport"}}]}, "right": "@r"}}]}}},
            {"delete": {"set": {"family": "inet", "table": "t", "name": "r", "type": ["ipv4_addr", "inet_proto", "inet_service"], "flags": ["interval"]}}},
        ]}))
        .expect("encodable");
    let Op::AddSet(decl) = &ops[0] else {
        panic!("{ops:?}")
    };
    assert!(decl.interval);
    let Op::RangeElements(add) = &ops[1] else {
        panic!("{ops:?}")
    };
    assert_eq!(
        add.elems[0],
        message::RangeElem {
            key: vec![10, 0, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0],
            key_end: vec![10, 0, 0, 5, 6, 0, 0, 0, 0, 90, 0, 0],
        }
    );
    let Op::RangeElements(del) = &ops[2] else {
        panic!("{ops:?}")
    };
    assert!(!del.add);
    assert_eq!(del.elems[0].key[4..8], [0, 0, 0, 0]);
    assert_eq!(del.elems[0].key_end[4..8], [255, 0, 0, 0]);
    assert!(matches!(&ops[3], Op::AddRule(_, e) if e.len() == 7));
    assert!(matches!(ops[4], Op::DeleteSet(_)));

    // After the delete, the set is unknown to the rest of the batch.
    let refused = |cmds: Value| ops_of(&d, json!({"nftables": cmds})).is_none();
    assert!(refused(json!([
        {"add": {"set": {"family": "inet", "table": "t", "name": "r", "type": "ipv4_addr"}}},
        {"delete": {"set": {"family": "inet", "table": "t", "name": "r", "type": "ipv4_addr"}}},
        {"add": {"element": {"family": "inet", "table": "t", "name": "r", "elem": ["10.0.0.1"]}}},
    ])));
    // Flags and types not checked against nft, a set's other keys, an
    // empty range, a one-type interval set: all left to nft.
    for set in [
        json!({"family": "inet", "table": "t", "name": "s", "type": "ipv4_addr", "flags": ["interval"]}),
        json!({"family": "inet", "table": "t", "name": "s", "type": "ipv4_addr", "flags": ["timeout"]}),
        json!({"family": "inet", "table": "t", "name": "s", "type": "inet_service"}),
        json!({"family": "inet", "table": "t", "name": "s", "type": "ipv4_addr", "size": 10}),
        json!({"family": "inet", "table": "t", "name": "s", "type": ["ipv4_addr", "inet_proto"],
            "flags": ["interval"], "elem": [{"concat": [{"range": ["10.0.0.5", "10.0.0.1"]}, 6]}]}),
        json!({"family": "inet", "table": "t", "name": "s", "type": ["ipv4_addr", "inet_proto"],
            "flags": ["interval"], "elem": []}),
    ] {
        assert!(refused(json!([{"add": {"set": set}}])), "{set}");
    }
    // A set known with another type keeps it: left to nft.
    let mut d = Declarations::default();
    observe(
        &mut d,
        json!({"nftables": [{"add": {"set": {"family": "inet", "table": "t", "name": "s", "type": "ipv4_addr"}}}]}),
    );
    assert!(ops_of(&d, json!({"nftables": [{"add": {"set": {"family": "inet", "table": "t", "name": "s", "type": "ipv6_addr"}}}]})).is_none());
    assert!(ops_of(&d, json!({"nftables": [{"add": {"set": {"family": "inet", "table": "t", "name": "s", "type": "ipv4_addr"}}}]})).is_some());
}
