//! Interval sets of one type (`type ipv4_addr; flags interval`) changed
//! over netlink leave the kernel holding exactly what `nft` leaves for
//! the same transactions: the same listing, and the same elements as the
//! kernel stores them (start and end elements, the end element at 0,
//! open ranges at the top), step by step. Each backend writes into a
//! fresh network namespace of its own (needs root).

use std::process::Command;

use proptest::prelude::*;
use serde_json::{Value, json};
use tartan_nft::backend::Backend;
use tartan_nft::backend::netlink::commit::Netlink;
use tartan_nft::backend::program::Program;
use tartan_nft::{Error, Transaction};

mod common;

use common::{in_new_netns, tx};

const SETS: [(&str, &str); 7] = [
    ("a", "ipv4_addr"),
    ("b", "ipv6_addr"),
    ("p", "inet_service"),
    ("q", "inet_proto"),
    ("x", "ipv4_addr"),
    ("y", "ipv4_addr"),
    ("z", "ipv4_addr"),
];

/// The table, made anew (as felix's whole-table writes do), with empty
/// interval sets of one type.
fn skeleton() -> Transaction {
    tx(Value::Array(rebuild(&[])))
}

/// The commands that make the table anew, with the interval sets of
/// one type, those named in `inline` with those elements given in
/// `add set`.
fn rebuild(inline: &[(&str, Value)]) -> Vec<Value> {
    let mut cmds = vec![
        json!({"add": {"table": {"family": "inet", "name": "t"}}}),
        json!({"delete": {"table": {"family": "inet", "name": "t"}}}),
        json!({"add": {"table": {"family": "inet", "name": "t"}}}),
    ];
    for (name, ty) in SETS {
        let mut set = json!({"family": "inet", "table": "t", "name": name,
            "type": ty, "flags": ["interval"]});
        if let Some((_, elem)) = inline.iter().find(|(n, _)| *n == name) {
            set["elem"] = elem.clone();
        }
        cmds.push(json!({"add": {"set": set}}));
    }
    cmds
}

fn elements(op: &str, set: &str, elem: Value) -> Value {
    json!({op: {"element": {"family": "inet", "table": "t", "name": set, "elem": elem}}})
}

fn add(set: &str, elem: Value) -> Value {
    elements("add", set, elem)
}

fn del(set: &str, elem: Value) -> Value {
    elements("delete", set, elem)
}

fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().unwrap();
    assert!(out.status.success(), "{:?}", out);
    String::from_utf8(out.stdout).unwrap()
}

/// The table as `nft list` shows it, and each set's elements as the
/// kernel stores them (`nft --debug=netlink` prints them raw).
fn listing() -> String {
    let mut out = nft(&["list", "table", "inet", "t"]);
    for (name, _) in SETS {
        let raw = nft(&["--debug=netlink", "list", "set", "inet", "t", name]);
        out.push_str(&format!("raw {name}:"));
        for l in raw.lines().filter(|l| l.contains("element")) {
            out.push_str(&l.split_whitespace().collect::<Vec<_>>().join(" "));
            out.push('|');
        }
        out.push('\n');
    }
    out
}

fn prefix(addr: &str, len: u32) -> Value {
    json!({"prefix": {"addr": addr, "len": len}})
}

fn range(lo: Value, hi: Value) -> Value {
    json!({"range": [lo, hi]})
}

/// Element changes of every kind felix and the model can make.
fn steps() -> Vec<Transaction> {
    [
        // Into bare sets: nft sends an end element at 0 first.
        json!([
            add(
                "a",
                json!([
                    prefix("10.0.0.0", 24),
                    "10.0.2.5",
                    range(json!("10.0.5.1"), json!("10.0.5.9"))
                ])
            ),
            add("b", json!([prefix("fd00::", 64), "fd00:1::5"])),
            add(
                "p",
                json!([
                    80,
                    range(json!(1000), json!(2000)),
                    range(json!(65000), json!(65535))
                ])
            ),
            add("q", json!([6, range(json!(17), json!(20))])),
            // Starting at 0: no end element at 0.
            add("z", json!([range(json!("0.0.0.0"), json!("0.0.0.9"))])),
        ]),
        // Into a set holding a range from 0 (and so no end element at
        // 0): nft sends none.
        json!([
            add("z", json!(["10.1.1.1"])),
            add("z", json!([prefix("10.2.0.0", 16)])),
        ]),
        // Touching ranges: after one held, then before another.
        json!([add("a", json!([prefix("10.0.1.0", 24)]))]),
        json!([add("a", json!([prefix("9.255.255.0", 24)]))]),
        json!([add("b", json!([prefix("fd00:0:0:1::", 64)]))]),
        // From 0, and to the top of the type.
        json!([
            add("a", json!([prefix("0.0.0.0", 8), prefix("128.0.0.0", 1)])),
            add(
                "b",
                json!([
                    prefix("ffff::", 16),
                    "::",
                    range(json!("::2"), json!("::ff"))
                ])
            ),
            add("p", json!([0])),
        ]),
        // A range held again: nft sends it, the kernel keeps the one held.
        json!([add("a", json!(["10.0.2.5"]))]),
        // One of two touching ranges.
        json!([del("a", json!([prefix("10.0.1.0", 24)]))]),
        json!([
            del("a", json!([prefix("128.0.0.0", 1), prefix("0.0.0.0", 8)])),
            del("b", json!([prefix("ffff::", 16), "::"])),
            del("p", json!([range(json!(65000), json!(65535))])),
        ]),
        // A range that grows: deleted and added anew in one batch.
        json!([
            del("a", json!([prefix("10.0.0.0", 24)])),
            add("a", json!([prefix("10.0.0.0", 23)])),
        ]),
        // Emptied (the end element at 0 stays), then filled again.
        json!([
            del(
                "a",
                json!([
                    prefix("10.0.0.0", 23),
                    "10.0.2.5",
                    range(json!("10.0.5.1"), json!("10.0.5.9")),
                    prefix("9.255.255.0", 24)
                ])
            ),
            del(
                "b",
                json!([
                    prefix("fd00::", 64),
                    "fd00:1::5",
                    prefix("fd00:0:0:1::", 64),
                    range(json!("::2"), json!("::ff"))
                ])
            ),
            del("p", json!([80, 0, range(json!(1000), json!(2000))])),
            del(
                "z",
                json!([
                    range(json!("0.0.0.0"), json!("0.0.0.9")),
                    "10.1.1.1",
                    prefix("10.2.0.0", 16)
                ])
            ),
        ]),
        json!([
            add("a", json!([prefix("192.168.0.0", 16), "255.255.255.255"])),
            add("b", json!([prefix("::", 0)])),
            add("p", json!([range(json!(0), json!(65535))])),
            add("z", json!([prefix("0.0.0.0", 0)])),
        ]),
        // Two commands on sets bare when the batch began: nft judges
        // each by the set as the batch began, so each that does not
        // start at 0 sends its own end element at 0, also after one
        // that started at 0 (and left none).
        json!([
            add("x", json!(["10.1.1.1"])),
            add("x", json!([prefix("10.2.0.0", 16)])),
            add("y", json!([range(json!("0.0.0.0"), json!("0.0.0.9"))])),
            add("y", json!(["10.1.1.1"])),
        ]),
        // A protocol set: from 0, to the top, one of its ranges deleted.
        json!([
            add("q", json!([0, 255])),
            del("q", json!([range(json!(17), json!(20))])),
        ]),
    ]
    .into_iter()
    .map(tx)
    .collect()
}

/// The listings after the skeleton and after each step: through `nft`
/// alone, or with the steps over netlink (each must be encoded).
fn run(steps: Vec<Transaction>, netlink: bool) -> Vec<String> {
    let steps = std::iter::once((Via::Nft, skeleton()))
        .chain(steps.into_iter().map(|s| (Via::Netlink, s)))
        .collect();
    run_mixed(steps, netlink).0
}

/// How a step is written when netlink is used.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Via {
    /// Through `nft`, and observed.
    Nft,
    /// Over netlink: it must be encoded.
    Netlink,
    /// Over netlink when it is encoded, else through `nft`.
    Either,
}

/// The listings after each step, and for each whether netlink wrote it:
/// through `nft` alone (`netlink` false), or each as its [`Via`] says.
fn run_mixed(steps: Vec<(Via, Transaction)>, netlink: bool) -> (Vec<String>, Vec<bool>) {
    in_new_netns(move || {
        let mut n = Netlink::new();
        let (mut out, mut encoded) = (vec![], vec![]);
        for (i, (via, s)) in steps.iter().enumerate() {
            let by_netlink = match (netlink, via) {
                (false, _) | (true, Via::Nft) => false,
                (true, Via::Netlink) => {
                    n.commit(s)
                        .unwrap_or_else(|e| panic!("step {i} over netlink: {e}: {s}"));
                    true
                }
                (true, Via::Either) => match n.commit(s) {
                    Ok(()) => true,
                    Err(Error::Unsupported(_)) => false,
                    Err(e) => panic!("step {i} over netlink: {e}: {s}"),
                },
            };
            if !by_netlink {
                Program.commit(s).unwrap();
                n.observe(s);
            }
            encoded.push(by_netlink);
            out.push(listing());
        }
        (out, encoded)
    })
}

fn compare(by_nft: &[String], by_netlink: &[String]) {
    assert_eq!(by_nft.len(), by_netlink.len());
    for (i, (a, b)) in by_nft.iter().zip(by_netlink).enumerate() {
        assert_eq!(b, a, "after step {i}");
    }
}

#[test]
fn element_changes_over_netlink_leave_the_sets_nft_leaves() {
    let by_nft = run(steps(), false);
    let by_netlink = run(steps(), true);
    // The end element at 0 and the open range at the top are there.
    assert!(
        by_nft[1].contains("element 00000000 : 1 [end]"),
        "{}",
        by_nft[1]
    );
    assert!(by_nft[6].contains("userdata"), "{}", by_nft[6]);
    compare(&by_nft, &by_netlink);
}

#[test]
fn what_nft_would_refuse_or_change_is_left_to_it() {
    in_new_netns(|| {
        let mut n = Netlink::new();
        Program.commit(&skeleton()).unwrap();
        n.observe(&skeleton());
        n.commit(&tx(json!([add(
            "a",
            json!([prefix("10.0.0.0", 24), prefix("10.0.1.0", 24)])
        )])))
        .unwrap();
        let before = listing();
        let refused = |n: &mut Netlink, v: Value| {
            let e = n.commit(&tx(json!([v]))).unwrap_err();
            assert!(matches!(e, Error::Unsupported(_)), "{e}");
        };
        // Part of a range, two touching ranges as one, a range not held.
        refused(&mut n, del("a", json!(["10.0.0.5"])));
        refused(&mut n, del("a", json!([prefix("10.0.0.0", 23)])));
        refused(&mut n, del("a", json!([prefix("10.9.0.0", 24)])));
        // Overlaps, with a range held or within the command; a prefix
        // with host bits (nft clears them).
        refused(&mut n, add("a", json!([prefix("10.0.0.128", 25)])));
        refused(
            &mut n,
            add("a", json!([prefix("10.8.0.0", 16), "10.8.1.1"])),
        );
        refused(&mut n, add("a", json!([prefix("10.8.0.1", 16)])));
        assert_eq!(listing(), before);
        // Changed behind the encoder's back (observed as unknown): left
        // to nft until the set is flushed.
        let tweak = tx(
            json!([{"create": {"element": {"family": "inet", "table": "t",
            "name": "a", "elem": ["10.5.5.5"]}}}]),
        );
        Program.commit(&tweak).unwrap();
        n.observe(&tweak);
        refused(&mut n, add("a", json!(["10.6.6.6"])));
        let flush = tx(
            json!([{"flush": {"set": {"family": "inet", "table": "t", "name": "a",
            "type": "ipv4_addr", "flags": ["interval"]}}}]),
        );
        Program.commit(&flush).unwrap();
        n.observe(&flush);
        n.commit(&tx(json!([add("a", json!(["10.6.6.6"]))])))
            .unwrap();
        // A set of a table not observed made anew: its content is not
        // known.
        let mut fresh = Netlink::new();
        let decl = tx(
            json!([{"add": {"set": {"family": "inet", "table": "t", "name": "a",
            "type": "ipv4_addr", "flags": ["interval"]}}}]),
        );
        fresh.observe(&decl);
        refused(&mut fresh, add("a", json!(["10.7.7.7"])));
        // Elements that expire (the flag, or a default timeout): the
        // content is not known even in a table made anew.
        for set in [
            json!({"flags": ["interval", "timeout"]}),
            json!({"flags": ["interval"], "timeout": 60}),
        ] {
            let mut cmds = rebuild(&[]);
            for (k, v) in set.as_object().unwrap() {
                cmds[3]["add"]["set"][k] = v.clone();
            }
            let mut timed = Netlink::new();
            timed.observe(&tx(Value::Array(cmds)));
            refused(&mut timed, add("a", json!(["10.7.7.7"])));
        }
    });
}

/// Run `steps` through nft alone and as each says, check the listings
/// are the same after each; whether netlink wrote each step.
fn same_as_nft(steps: impl Fn() -> Vec<(Via, Transaction)>) -> Vec<bool> {
    let (by_nft, _) = run_mixed(steps(), false);
    let (by_netlink, encoded) = run_mixed(steps(), true);
    compare(&by_nft, &by_netlink);
    encoded
}

/// felix's path: the table written whole through nft (made anew, the
/// sets given their elements with `add set`), then element changes
/// over netlink, and the table written whole again; each listing as
/// nft alone leaves it.
#[test]
fn sets_written_whole_by_nft_then_changed_over_netlink() {
    let steps = || {
        let whole = |inline: &[(&str, Value)]| (Via::Nft, tx(Value::Array(rebuild(inline))));
        let over = |v: Value| (Via::Netlink, tx(v));
        vec![
            whole(&[
                ("a", json!([prefix("10.0.0.0", 24), "10.0.2.5"])),
                // From 0: no end element at 0.
                ("z", json!([prefix("0.0.0.0", 8)])),
                ("p", json!([80, range(json!(65000), json!(65535))])),
                ("q", json!([6])),
            ]),
            over(json!([
                add("a", json!([prefix("10.0.1.0", 24)])),
                del("a", json!(["10.0.2.5"])),
                add("z", json!(["10.1.1.1"])),
                add("b", json!([prefix("fd00::", 64)])),
                add("q", json!([17])),
            ])),
            // Emptied: what is left (the end element at 0 or not) decides
            // whether the next add sends one.
            over(json!([
                del("a", json!([prefix("10.0.0.0", 24), prefix("10.0.1.0", 24)])),
                del("z", json!([prefix("0.0.0.0", 8), "10.1.1.1"])),
                del("p", json!([80, range(json!(65000), json!(65535))])),
            ])),
            over(json!([
                add("a", json!(["10.9.9.9"])),
                add("z", json!(["10.9.9.9"])),
                add("p", json!([443])),
            ])),
            whole(&[("a", json!(["10.3.3.3"])), ("z", json!(["0.0.0.0"]))]),
            over(json!([
                del("a", json!(["10.3.3.3"])),
                del("z", json!(["0.0.0.0"])),
            ])),
            over(json!([
                add("a", json!(["10.4.4.4"])),
                add("z", json!(["10.4.4.4"]))
            ])),
        ]
    };
    same_as_nft(steps);
}

/// Steps through nft between steps over netlink, element commands among
/// them: the sets they change are followed (or left to nft), and the
/// kernel ends as nft alone leaves it.
#[test]
fn nft_and_netlink_steps_mixed_leave_what_nft_leaves() {
    let steps = || {
        vec![
            (Via::Nft, skeleton()),
            (
                Via::Netlink,
                tx(json!([add("a", json!([prefix("10.0.0.0", 24)]))])),
            ),
            (
                Via::Nft,
                tx(json!([
                    add("a", json!(["10.1.1.1"])),
                    add("z", json!([range(json!("0.0.0.0"), json!("0.0.0.9"))])),
                ])),
            ),
            (
                Via::Netlink,
                tx(json!([
                    del("a", json!([prefix("10.0.0.0", 24)])),
                    add("z", json!(["10.2.2.2"])),
                ])),
            ),
            (
                Via::Nft,
                tx(json!([
                    del("a", json!(["10.1.1.1"])),
                    del("z", json!([range(json!("0.0.0.0"), json!("0.0.0.9"))])),
                ])),
            ),
            (
                Via::Netlink,
                tx(json!([
                    add("a", json!(["10.3.3.3"])),
                    del("z", json!(["10.2.2.2"]))
                ])),
            ),
            (Via::Netlink, tx(json!([add("z", json!(["10.4.4.4"]))]))),
        ]
    };
    same_as_nft(steps);
}

/// A set given elements with `add set` and by element commands in one
/// transaction: nft sends no end element at 0 where a range starts at 0,
/// which the encoder does not follow; the set's changes are left to nft
/// until it is made anew, and the kernel ends as nft alone leaves it.
#[test]
fn a_set_given_elements_both_ways_in_one_transaction_is_left_to_nft() {
    let steps = || {
        let mut made = rebuild(&[("a", json!([prefix("0.0.0.0", 8)]))]);
        made.push(add("a", json!(["10.0.0.1"])));
        // The same, with the set made empty: nft sends what the set is
        // given in the transaction with its `add set`.
        made.push(add("x", json!([prefix("0.0.0.0", 8)])));
        made.push(add("x", json!(["10.0.0.1"])));
        let either = |v: Value| (Via::Either, tx(v));
        vec![
            (Via::Nft, tx(Value::Array(made))),
            either(json!([
                del("a", json!([prefix("0.0.0.0", 8), "10.0.0.1"])),
                del("x", json!([prefix("0.0.0.0", 8), "10.0.0.1"])),
            ])),
            either(json!([
                add("a", json!(["10.5.5.5"])),
                add("x", json!(["10.5.5.5"]))
            ])),
            (Via::Nft, skeleton()),
            either(json!([add("a", json!(["10.5.5.5"]))])),
        ]
    };
    let encoded = same_as_nft(steps);
    assert_eq!(encoded, [false, false, false, false, true]);
}

/// Values 0..16 as addresses: 0 and 15 are the ends of the IPv4 space.
fn addr(v: u8) -> String {
    match v {
        0 => "0.0.0.0".into(),
        15 => "255.255.255.255".into(),
        v => format!("10.0.0.{v}"),
    }
}

fn span(lo: u8, hi: u8) -> Value {
    if lo == hi {
        json!(addr(lo))
    } else {
        range(json!(addr(lo)), json!(addr(hi)))
    }
}

/// Batches of adds of ranges that overlap nothing held and deletes of
/// ranges held, from a list of wishes: (add, lo, len) for an add, (del,
/// index) for a delete of the index-th range held.
fn batches(wishes: &[(bool, u8, u8)]) -> Vec<Transaction> {
    let mut held: Vec<(u8, u8)> = Vec::new();
    let mut out = Vec::new();
    for chunk in wishes.chunks(2) {
        let mut cmds = Vec::new();
        for &(is_add, a, b) in chunk {
            if is_add {
                let (lo, hi) = (a % 16, (a % 16).saturating_add(b % 6).min(15));
                if held.iter().any(|&(l, h)| l <= hi && lo <= h) {
                    continue;
                }
                held.push((lo, hi));
                cmds.push(add("a", json!([span(lo, hi)])));
            } else if !held.is_empty() {
                let (lo, hi) = held.remove(usize::from(a) % held.len());
                cmds.push(del("a", json!([span(lo, hi)])));
            }
        }
        if !cmds.is_empty() {
            out.push(tx(Value::Array(cmds)));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random sequences of adds and deletes (touching ranges, ranges at 0
    /// and at the top, a set emptied and filled again) leave the same
    /// kernel set over netlink as through nft.
    #[test]
    fn random_range_changes_match_nft(
        wishes in proptest::collection::vec((any::<bool>(), any::<u8>(), any::<u8>()), 4..16)
    ) {
        let steps = batches(&wishes);
        let by_nft = run(steps.clone(), false);
        let by_netlink = run(steps, true);
        compare(&by_nft, &by_netlink);
    }
}
