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
fn profile_rules_become_mark_and_verdict_expressions() {
    use super::rules::{CmpOp, META_MARK, REG};
    let none = |_: &str| None;
    let mark = json!({"meta": {"key": "mark"}});
    let clear = json!({"mangle": {"key": mark, "value": {"&": [mark, 0xfcff_ffffu32]}}});
    let set = json!({"mangle": {"key": mark, "value": {"|": [mark, 0x0100_0000u32]}}});
    let test = json!({"match": {"left": {"&": [mark, 0x0200_0000u32]}, "op": "==", "right": 0}});
    let load = Expr::MetaLoad {
        key: META_MARK,
        reg: REG,
    };
    let store = Expr::MetaStore {
        key: META_MARK,
        reg: REG,
    };
    let bits = |mask: u32, xor: u32| Expr::Bitwise {
        reg: REG,
        mask: mask.to_ne_bytes().to_vec(),
        xor: xor.to_ne_bytes().to_vec(),
    };
    assert_eq!(
        parse(
            &[
                clear,
                set,
                test,
                json!({"jump": {"target": "pi1"}}),
                json!({"return": null})
            ],
            "inet",
            &none
        )
        .unwrap(),
        vec![
            load.clone(),
            bits(0xfcff_ffff, 0),
            store.clone(),
            load.clone(),
            bits(!0x0100_0000, 0x0100_0000),
            store,
            load,
            bits(0x0200_0000, 0),
            Expr::Cmp {
                reg: REG,
                op: CmpOp::Eq,
                data: vec![0; 4]
            },
            Expr::Verdict(Verdict::Jump("pi1".into())),
            Expr::Verdict(Verdict::Return),
        ]
    );
    // Other keys, operators and statements are not for netlink.
    let refused = |st: Value| parse(&[st], "inet", &none).is_none();
    assert!(refused(
        json!({"mangle": {"key": {"meta": {"key": "priority"}}, "value": 1}})
    ));
    assert!(refused(
        json!({"match": {"left": {"&": [mark, 1]}, "op": "<", "right": 0}})
    ));
    assert!(refused(json!({"log": {"prefix": "x", "group": 2}})));
    assert!(refused(json!({"log": {"level": "audit"}})));
    assert!(refused(json!({"counter": null})));
}

fn payload(protocol: &str, field: &str) -> Value {
    json!({"payload": {"protocol": protocol, "field": field}})
}

fn m(left: Value, op: &str, right: Value) -> Value {
    json!({"match": {"op": op, "left": left, "right": right}})
}

fn nfproto(f: &str) -> Value {
    m(json!({"meta": {"key": "nfproto"}}), "==", json!(f))
}

#[test]
fn prefixes_load_their_bytes_or_mask_the_whole_address() {
    use super::rules::CmpOp;
    let none = |_: &str| None;
    let rule = |right: Value| {
        parse(
            &[nfproto("ipv4"), m(payload("ip", "saddr"), "==", right)],
            "inet",
            &none,
        )
        .unwrap()
        .split_off(2)
    };
    let load = |len| Expr::Payload {
        base: 1,
        offset: 12,
        len,
        reg: 1,
    };
    let cmp = |data: &[u8]| Expr::Cmp {
        reg: 1,
        op: CmpOp::Eq,
        data: data.to_vec(),
    };
    // A byte-aligned prefix loads only its bytes; host bits are cleared.
    assert_eq!(
        rule(json!({"prefix": {"addr": "10.1.2.3", "len": 16}})),
        vec![load(2), cmp(&[10, 1])]
    );
    assert_eq!(rule(json!("10.1.2.3")), vec![load(4), cmp(&[10, 1, 2, 3])]);
    // Any other, /0 included, loads all four and masks them.
    let masked = |mask: [u8; 4], data: [u8; 4]| {
        vec![
            load(4),
            Expr::Bitwise {
                reg: 1,
                mask: mask.to_vec(),
                xor: vec![0; 4],
            },
            cmp(&data),
        ]
    };
    assert_eq!(
        rule(json!({"prefix": {"addr": "10.17.0.0", "len": 12}})),
        masked([255, 240, 0, 0], [10, 16, 0, 0])
    );
    assert_eq!(
        rule(json!({"prefix": {"addr": "0.0.0.0", "len": 0}})),
        masked([0; 4], [0; 4])
    );
    // Longer than the address, or of the other family: nft's to judge.
    assert!(
        parse(
            &[
                nfproto("ipv4"),
                m(
                    payload("ip", "saddr"),
                    "==",
                    json!({"prefix": {"addr": "10.0.0.0", "len": 33}})
                )
            ],
            "inet",
            &none
        )
        .is_none()
    );
    assert!(
        parse(
            &[
                nfproto("ipv4"),
                m(payload("ip", "saddr"), "==", json!("fd00::1"))
            ],
            "inet",
            &none
        )
        .is_none()
    );
}

#[test]
fn rules_whose_dependencies_nft_would_change_are_left_to_nft() {
    let none = |_: &str| None;
    let ok = |stmts: &[Value]| parse(stmts, "inet", &none);
    let icmp = m(payload("icmp", "type"), "==", json!(8));
    // An address match needs the family stated first, in an inet table.
    assert!(ok(&[m(payload("ip", "saddr"), "==", json!("10.0.0.1"))]).is_none());
    assert!(
        ok(&[
            nfproto("ipv6"),
            m(payload("ip", "saddr"), "==", json!("10.0.0.1"))
        ])
        .is_none()
    );
    assert!(
        parse(
            &[
                nfproto("ipv4"),
                m(payload("ip", "saddr"), "==", json!("10.0.0.1"))
            ],
            "ip",
            &none
        )
        .is_none()
    );
    // ICMP gets nft's `meta l4proto icmp` unless the rule says it.
    let l4 = |op: &str, p: u8| m(json!({"meta": {"key": "l4proto"}}), op, json!(p));
    assert_eq!(ok(&[nfproto("ipv4"), icmp.clone()]).unwrap().len(), 6);
    assert_eq!(
        ok(&[nfproto("ipv4"), l4("==", 1), icmp.clone()])
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        ok(&[nfproto("ipv4"), l4("!=", 1), icmp.clone()])
            .unwrap()
            .len(),
        8
    );
    assert!(ok(&[nfproto("ipv4"), l4("==", 6), icmp.clone()]).is_none());
    assert!(ok(&[nfproto("ipv6"), icmp.clone()]).is_none());
    // nft merges adjacent payload compares into one load.
    assert!(
        ok(&[
            nfproto("ipv4"),
            icmp.clone(),
            m(payload("icmp", "code"), "==", json!(0))
        ])
        .is_none()
    );
    assert!(
        ok(&[
            m(payload("th", "sport"), "==", json!(1)),
            m(payload("th", "dport"), "==", json!(2))
        ])
        .is_none()
    );
    // nft 1.0.6 refuses a concatenation compared with a value.
    assert!(
        ok(&[
            nfproto("ipv4"),
            m(
                json!({"concat": [payload("icmp", "type"), payload("icmp", "code")]}),
                "!=",
                json!({"concat": [8, 0]})
            )
        ])
        .is_none()
    );
    // Ports: a value, an inclusive range (two compares), its negation
    // (one range expression).
    let range = ok(&[m(payload("th", "dport"), "!=", json!({"range": [80, 90]}))]).unwrap();
    assert!(
        matches!(range[1], Expr::Range { equal: false, .. }),
        "{range:?}"
    );
    assert_eq!(
        ok(&[m(payload("th", "dport"), "==", json!({"range": [80, 90]}))])
            .unwrap()
            .len(),
        3
    );
    assert!(ok(&[m(payload("th", "dport"), "==", json!({"range": [90, 80]}))]).is_none());
    assert!(ok(&[m(payload("th", "dport"), "==", json!(70000))]).is_none());
}

#[test]
fn lookups_need_a_set_of_the_matching_type() {
    use super::rules::reg;
    use super::types::DataType::*;
    let sets = |name: &str| match name {
        "a4" => Some(SetInfo {
            key: vec![Ipv4Addr],
            interval: false,
            id: None,
        }),
        "r6" => Some(SetInfo {
            key: vec![Ipv6Addr, InetProto, InetService],
            interval: true,
            id: Some(3),
        }),
        _ => None,
    };
    let concat = |v6: bool| {
        let p = if v6 { "ip6" } else { "ip" };
        json!({"concat": [payload(p, "saddr"), {"meta": {"key": "l4proto"}}, payload("th", "dport")]})
    };
    let e = parse(
        &[nfproto("ipv6"), m(concat(true), "!=", json!("@r6"))],
        "inet",
        &sets,
    )
    .unwrap();
    // 16 bytes of address in NFT_REG_1; the protocol in the next 16-byte
    // register, turned to network order for the interval set; the port in
    // the 32-bit register after it.
    assert_eq!(
        e[2..],
        [
            Expr::Payload {
                base: 1,
                offset: 8,
                len: 16,
                reg: 1
            },
            Expr::MetaLoad { key: 16, reg: 2 },
            Expr::Hton {
                reg: 2,
                len: 1,
                size: 2
            },
            Expr::Payload {
                base: 2,
                offset: 2,
                len: 2,
                reg: 13
            },
            Expr::Lookup {
                reg: 1,
                set: "r6".into(),
                set_id: Some(3),
                invert: true
            },
        ]
    );
    assert_eq!((reg(0), reg(1), reg(2), reg(4), reg(5)), (1, 9, 10, 2, 13));
    // Wrong type, unknown set, a set of addresses for a concatenation.
    let refused = |st: Value, f: &str| parse(&[nfproto(f), st], "inet", &sets).is_none();
    assert!(refused(m(concat(false), "==", json!("@r6")), "ipv4"));
    assert!(refused(
        m(payload("ip", "saddr"), "==", json!("@nope")),
        "ipv4"
    ));
    assert!(refused(m(concat(false), "==", json!("@a4")), "ipv4"));
    assert!(!refused(
        m(payload("ip", "saddr"), "!=", json!("@a4")),
        "ipv4"
    ));
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

proptest! {
    /// Whatever a batch holds, encoding it never panics.
    #[test]
    fn encoding_any_rule_never_panics(
        port in any::<u32>(),
        len in any::<u32>(),
        a in "[0-9a-f:.]{0,20}",
        op in prop::sample::select(vec!["==", "!=", "<"]),
    ) {
        let d = declared();
        let rule = json!({"nftables": [{"add": {"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [
            {"match": {"op": op, "left": {"meta": {"key": "nfproto"}}, "right": "ipv4"}},
            {"match": {"op": op, "left": payload("ip", "saddr"), "right": {"prefix": {"addr": a, "len": len}}}},
            {"match": {"op": op, "left": payload("th", "dport"), "right": {"range": [port, len]}}},
        ]}}}]});
        if let Some(ops) = ops_of(&d, rule) {
            let _ = batch(&ops, 1);
        }
    }
}
