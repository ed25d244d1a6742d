//! Rules as kernel expressions: mark statements and verdicts, prefixes,
//! the dependencies nft adds or merges, set lookups.

use super::*;

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
