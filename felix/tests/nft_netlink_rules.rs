//! Sets, rules and interval elements of the policy table written over
//! netlink end up in the kernel exactly as `nft` writes the same JSON:
//! the same commands go once through `nft` and once over netlink, each
//! into a fresh network namespace, and both the listing (`nft -j list
//! table`) and the kernel's expressions and element bytes (`nft
//! --debug=netlink list table`) must be equal.

use std::process::Command;

use serde_json::{Value, json};
use tartan_felix::dataplane::nft::{NftWriter, Via};

mod common;
use common::{in_new_netns, nft_list, tx};

const T: &str = "tartan";

/// `nft -j list table inet tartan` without handles.
fn listing() -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("handle");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = nft_list("inet", T);
    strip(&mut v);
    v
}

/// The kernel's expressions of every rule and the bytes of every set
/// element, as `nft --debug=netlink` prints them, rule handles left out
/// and each set's elements sorted (a hash set's order is its own).
fn bytecode() -> String {
    let out = Command::new("nft")
        .args(["--debug=netlink", "list", "table", "inet", T])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let mut out: Vec<String> = vec![];
    let mut elems: Vec<String> = vec![];
    for l in text.lines() {
        if l.starts_with("\telement ") {
            elems.push(l.to_string());
            continue;
        }
        elems.sort();
        out.append(&mut elems);
        // `inet tartan CHAIN HANDLE [POSITION]` heads a rule.
        let words: Vec<&str> = l.split(' ').collect();
        out.push(if words.len() > 3 && words[..2] == ["inet", T] {
            words[..3].join(" ")
        } else {
            l.to_string()
        });
    }
    elems.sort();
    out.append(&mut elems);
    out.join("\n")
}

fn batch(cmds: Vec<Value>) -> Value {
    json!({ "nftables": cmds })
}

fn set(name: &str, ty: Value, interval: bool, elem: Option<Value>) -> Value {
    let mut s = json!({"family": "inet", "table": T, "name": name, "type": ty});
    if interval {
        s["flags"] = json!(["interval"]);
    }
    if let Some(e) = elem {
        s["elem"] = e;
    }
    json!({"add": {"set": s}})
}

fn elements(verb: &str, name: &str, elem: Value) -> Value {
    json!({verb: {"element": {"family": "inet", "table": T, "name": name, "elem": elem}}})
}

fn rule(chain: &str, expr: Vec<Value>) -> Value {
    json!({"add": {"rule": {"family": "inet", "table": T, "chain": chain, "expr": expr}}})
}

fn chain(name: &str) -> Value {
    json!({"add": {"chain": {"family": "inet", "table": T, "name": name}}})
}

fn payload(protocol: &str, field: &str) -> Value {
    json!({"payload": {"protocol": protocol, "field": field}})
}

fn meta(key: &str) -> Value {
    json!({"meta": {"key": key}})
}

fn m(left: Value, op: &str, right: Value) -> Value {
    json!({"match": {"op": op, "left": left, "right": right}})
}

fn prefix(addr: &str, len: u32) -> Value {
    json!({"prefix": {"addr": addr, "len": len}})
}

fn range(a: Value, b: Value) -> Value {
    json!({ "range": [a, b] })
}

fn concat(parts: Vec<Value>) -> Value {
    json!({ "concat": parts })
}

fn v4() -> Value {
    m(meta("nfproto"), "==", json!("ipv4"))
}

fn v6() -> Value {
    m(meta("nfproto"), "==", json!("ipv6"))
}

fn addr_t(v6: bool) -> &'static str {
    if v6 { "ipv6_addr" } else { "ipv4_addr" }
}

/// The table and chains, written by nft on both sides.
fn base() -> Value {
    batch(vec![
        json!({"add": {"table": {"family": "inet", "name": T}}}),
        chain("c"),
        chain("other"),
    ])
}

/// A set of every kind the policy table declares, some with elements.
fn sets() -> Value {
    let mut cmds = vec![];
    for v6 in [false, true] {
        let x = if v6 { "6" } else { "4" };
        let a = addr_t(v6);
        let (lo, hi, one) = if v6 {
            ("fd00::1", "fd00::ff", "2001:db8::7")
        } else {
            ("10.0.0.1", "10.0.0.5", "192.0.2.7")
        };
        cmds.extend([
            set(&format!("a{x}"), json!(a), false, Some(json!([one]))),
            set(
                &format!("np{x}"),
                json!([a, "inet_proto", "inet_service"]),
                false,
                None,
            ),
            set(&format!("npb{x}"), json!([a, "inet_proto"]), false, None),
            set(
                &format!("ic{x}"),
                json!([a, "inet_proto", "inet_service"]),
                true,
                Some(json!([
                    concat(vec![
                        range(json!(lo), json!(hi)),
                        json!(6),
                        range(json!(80), json!(90))
                    ]),
                    concat(vec![json!(one), json!(17), json!(53)]),
                ])),
            ),
            set(&format!("icb{x}"), json!([a, "inet_proto"]), true, None),
        ]);
    }
    cmds.push(set("spare", json!("ipv4_addr"), false, None));
    batch(cmds)
}

/// Elements for each set: plain, concatenated, and boxes with ranged and
/// plain fields.
fn fill() -> Value {
    let mut cmds = vec![];
    for v6 in [false, true] {
        let x = if v6 { "6" } else { "4" };
        let (a, b, lo, hi) = if v6 {
            ("fd00::10", "2001:db8::1", "fd01::", "fd01::ffff:ffff")
        } else {
            ("10.1.0.1", "192.0.2.1", "10.2.0.0", "10.2.255.255")
        };
        cmds.extend([
            elements("add", &format!("a{x}"), json!([a, b])),
            elements(
                "add",
                &format!("np{x}"),
                json!([
                    concat(vec![json!(a), json!(6), json!(443)]),
                    concat(vec![json!(b), json!(132), json!(65535)])
                ]),
            ),
            elements(
                "add",
                &format!("npb{x}"),
                json!([concat(vec![json!(a), json!(17)])]),
            ),
            elements(
                "add",
                &format!("ic{x}"),
                json!([
                    concat(vec![json!(a), range(json!(0), json!(255)), json!(8080)]),
                    concat(vec![
                        range(json!(lo), json!(hi)),
                        json!(17),
                        range(json!(1), json!(1023))
                    ]),
                    concat(vec![json!(b), json!(6), json!(22)]),
                ]),
            ),
            elements(
                "add",
                &format!("icb{x}"),
                json!([
                    concat(vec![range(json!(lo), json!(hi)), json!(6)]),
                    concat(vec![json!(a), range(json!(6), json!(17))]),
                    concat(vec![json!(b), range(json!(0), json!(255))]),
                ]),
            ),
        ]);
    }
    batch(cmds)
}

/// One rule of every statement form the policy compiler writes.
fn rules() -> Value {
    let mark = meta("mark");
    let mut r: Vec<Vec<Value>> = vec![
        vec![v4()],
        vec![v6()],
        vec![m(meta("l4proto"), "==", json!(6))],
        vec![m(meta("l4proto"), "!=", json!(17))],
        // Ports: a value, its negation, ranges either way, a range of one.
        vec![m(payload("th", "dport"), "==", json!(80))],
        vec![m(payload("th", "dport"), "!=", json!(80))],
        vec![m(payload("th", "sport"), "==", range(json!(80), json!(90)))],
        vec![m(
            payload("th", "dport"),
            "!=",
            range(json!(1000), json!(2000)),
        )],
        vec![m(payload("th", "dport"), "==", range(json!(53), json!(53)))],
        // ICMP: nft's own `meta l4proto` dependency, or the rule's.
        vec![v4(), m(payload("icmp", "type"), "==", json!(8))],
        vec![v4(), m(payload("icmp", "code"), "==", json!(0))],
        vec![v4(), m(payload("icmp", "type"), "!=", json!(3))],
        vec![v6(), m(payload("icmpv6", "type"), "==", json!(128))],
        vec![v6(), m(payload("icmpv6", "code"), "!=", json!(1))],
        vec![
            v4(),
            m(meta("l4proto"), "==", json!(1)),
            m(payload("icmp", "type"), "==", json!(8)),
        ],
        vec![
            v4(),
            m(meta("l4proto"), "!=", json!(1)),
            m(payload("icmp", "type"), "==", json!(0)),
        ],
        vec![
            v6(),
            m(payload("th", "dport"), "==", json!(80)),
            m(meta("l4proto"), "==", json!(6)),
        ],
        // Log.
        vec![json!({"log": {"prefix": "tartan knp:ns/name in: ", "level": "info"}})],
        vec![json!({"log": {"prefix": "p"}})],
        vec![json!({"log": {"level": "warn"}})],
        // Verdicts and marks, as the profile chains write them.
        vec![json!({"accept": null})],
        vec![json!({"drop": null})],
        vec![json!({"return": null})],
        vec![json!({"jump": {"target": "other"}})],
        vec![json!({"goto": {"target": "other"}})],
        vec![json!({"mangle": {"key": mark, "value": {"&": [mark, 0xfcff_ffffu32]}}})],
        vec![
            m(json!({"&": [mark, 0x0200_0000u32]}), "==", json!(0)),
            json!({"mangle": {"key": mark, "value": {"|": [mark, 0x0100_0000u32]}}}),
            json!({"return": null}),
        ],
    ];
    for (v6, nf) in [(false, v4()), (true, v6())] {
        let x = if v6 { "6" } else { "4" };
        let ip = if v6 { "ip6" } else { "ip" };
        let (one, net) = if v6 {
            ("fd00::1", "fd00::")
        } else {
            ("10.1.2.3", "10.0.0.0")
        };
        let lens: &[u32] = if v6 {
            &[128, 127, 65, 64, 48, 16, 7, 1, 0]
        } else {
            &[32, 31, 24, 16, 12, 9, 8, 7, 1, 0]
        };
        for field in ["saddr", "daddr"] {
            r.push(vec![nf.clone(), m(payload(ip, field), "==", json!(one))]);
            r.push(vec![nf.clone(), m(payload(ip, field), "!=", json!(one))]);
            r.push(vec![
                nf.clone(),
                m(payload(ip, field), "==", json!(format!("@a{x}"))),
            ]);
            r.push(vec![
                nf.clone(),
                m(payload(ip, field), "!=", json!(format!("@a{x}"))),
            ]);
            for op in ["==", "!="] {
                let lookup3 = concat(vec![
                    payload(ip, field),
                    meta("l4proto"),
                    payload("th", "dport"),
                ]);
                let lookup2 = concat(vec![payload(ip, field), meta("l4proto")]);
                for (left, set) in [
                    (&lookup3, "np"),
                    (&lookup2, "npb"),
                    (&lookup3, "ic"),
                    (&lookup2, "icb"),
                ] {
                    r.push(vec![
                        nf.clone(),
                        m(left.clone(), op, json!(format!("@{set}{x}"))),
                    ]);
                }
            }
        }
        r.push(vec![
            nf.clone(),
            m(
                concat(vec![
                    payload(ip, "saddr"),
                    meta("l4proto"),
                    payload("th", "sport"),
                ]),
                "==",
                json!(format!("@ic{x}")),
            ),
        ]);
        for &len in lens {
            // Host bits set too: nft clears them.
            let a = if len == 0 || len == lens[0] { net } else { one };
            for op in ["==", "!="] {
                r.push(vec![
                    nf.clone(),
                    m(payload(ip, "saddr"), op, prefix(a, len)),
                ]);
            }
        }
        // A whole policy rule: family, source, protocol, ports, verdict.
        r.push(vec![
            nf.clone(),
            m(payload(ip, "saddr"), "==", prefix(net, 8)),
            m(meta("l4proto"), "==", json!(6)),
            m(payload("th", "dport"), "==", range(json!(81), json!(90))),
            json!({"mangle": {"key": mark, "value": {"|": [mark, 0x0100_0000u32]}}}),
            json!({"return": null}),
        ]);
        r.push(vec![
            nf.clone(),
            m(payload(ip, "daddr"), "==", json!(format!("@a{x}"))),
            m(
                concat(vec![
                    payload(ip, "saddr"),
                    meta("l4proto"),
                    payload("th", "dport"),
                ]),
                "!=",
                json!(format!("@ic{x}")),
            ),
            json!({"log": {"prefix": "tartan gnp:x out: ", "level": "info"}}),
            json!({"drop": null}),
        ]);
    }
    batch(r.into_iter().map(|e| rule("c", e)).collect())
}

/// Elements removed from the interval sets (boxes and points), one
/// removed from a plain set, and a set deleted.
fn removals() -> Value {
    batch(vec![
        elements(
            "delete",
            "ic4",
            json!([
                concat(vec![
                    json!("10.1.0.1"),
                    range(json!(0), json!(255)),
                    json!(8080)
                ]),
                concat(vec![
                    range(json!("10.2.0.0"), json!("10.2.255.255")),
                    json!(17),
                    range(json!(1), json!(1023))
                ]),
            ]),
        ),
        elements(
            "delete",
            "icb4",
            json!([concat(vec![
                json!("192.0.2.1"),
                range(json!(0), json!(255))
            ])]),
        ),
        elements(
            "delete",
            "ic6",
            json!([concat(vec![json!("2001:db8::7"), json!(17), json!(53)])]),
        ),
        elements("delete", "a4", json!(["10.1.0.1"])),
        json!({"delete": {"set": {"family": "inet", "table": T, "name": "spare", "type": "ipv4_addr"}}}),
    ])
}

/// A set made, filled and used by a rule in one batch.
fn made_and_used() -> Value {
    let key = concat(vec![
        payload("ip", "daddr"),
        meta("l4proto"),
        payload("th", "dport"),
    ]);
    batch(vec![
        set(
            "fresh",
            json!(["ipv4_addr", "inet_proto", "inet_service"]),
            true,
            Some(json!([concat(vec![
                range(json!("10.9.0.0"), json!("10.9.0.255")),
                json!(6),
                json!(443)
            ])])),
        ),
        set("fresh_a", json!("ipv4_addr"), false, None),
        chain("n"),
        elements("add", "fresh_a", json!(["10.8.0.1"])),
        rule(
            "n",
            vec![v4(), m(key, "==", json!("@fresh")), json!({"accept": null})],
        ),
        rule(
            "n",
            vec![
                v4(),
                m(payload("ip", "saddr"), "!=", json!("@fresh_a")),
                json!({"drop": null}),
            ],
        ),
        elements(
            "add",
            "fresh",
            json!([concat(vec![
                json!("10.9.1.1"),
                json!(17),
                range(json!(1), json!(2))
            ])]),
        ),
    ])
}

/// Every step's (listing, bytecode), written by nft or over netlink; the
/// steps after the base must all have gone the chosen way.
fn write_all(netlink: bool) -> Vec<(Value, String)> {
    in_new_netns(move || {
        let mut w = NftWriter::default().netlink(netlink);
        assert_eq!(w.write(&tx(&base()), "inet", T).unwrap(), Via::Nft);
        let want = if netlink { Via::Netlink } else { Via::Nft };
        let mut seen = vec![];
        for (step, b) in [sets(), fill(), rules(), removals(), made_and_used()]
            .into_iter()
            .enumerate()
        {
            let via = w
                .write(&tx(&b), "inet", T)
                .unwrap_or_else(|e| panic!("step {step}: {e}"));
            assert_eq!(via, want, "step {step} went the wrong way");
            seen.push((listing(), bytecode()));
        }
        seen
    })
}

#[test]
fn sets_rules_and_interval_elements_over_netlink_match_nft() {
    let by_nft = write_all(false);
    let by_netlink = write_all(true);
    for (step, ((nft_list, nft_code), (nl_list, nl_code))) in
        by_nft.iter().zip(&by_netlink).enumerate()
    {
        assert_eq!(nl_list, nft_list, "step {step}: listings differ");
        if nl_code != nft_code {
            let diff: Vec<String> = nft_code
                .lines()
                .zip(nl_code.lines())
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .take(10)
                .map(|(i, (a, b))| format!("line {i}: nft {a:?} netlink {b:?}"))
                .collect();
            panic!(
                "step {step}: kernel expressions differ:\n{}",
                diff.join("\n")
            );
        }
    }
    // The steps did what they say: elements of every kind, a rule of every
    // form, deletes, a set made and used at once.
    let (list, code) = &by_netlink[4];
    let text = list.to_string();
    for name in ["ic4", "icb6", "np6", "fresh", "fresh_a"] {
        assert!(text.contains(&format!("\"name\":\"{name}\"")), "{name}");
    }
    assert!(!text.contains("\"spare\""));
    assert!(
        code.contains("byteorder"),
        "interval lookups convert l4proto"
    );
    assert!(code.contains("range neq"));
    assert!(code.contains("[end]"));
    assert!(text.contains("10.9.1.1"), "{text}");
    let rules = list["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o.get("rule").is_some())
        .count();
    assert_eq!(rules, rules_count() + 2);
}

fn rules_count() -> usize {
    rules()["nftables"].as_array().unwrap().len()
}

/// A rule nft would write differently (merged compares) or refuse, and a
/// lookup into a set of another type, are left to nft: the batch then
/// goes through nft whole.
#[test]
fn what_is_not_encoded_goes_to_nft() {
    in_new_netns(|| {
        let mut w = NftWriter::default().netlink(true);
        w.write(&tx(&base()), "inet", T).unwrap();
        assert_eq!(w.write(&tx(&sets()), "inet", T).unwrap(), Via::Netlink);
        let merged = batch(vec![rule(
            "c",
            vec![
                v4(),
                m(payload("icmp", "type"), "==", json!(8)),
                m(payload("icmp", "code"), "==", json!(0)),
            ],
        )]);
        assert_eq!(w.write(&tx(&merged), "inet", T).unwrap(), Via::Nft);
        let wrong_type = batch(vec![rule(
            "c",
            vec![v4(), m(payload("ip", "saddr"), "==", json!("@np4"))],
        )]);
        assert!(
            w.write(&tx(&wrong_type), "inet", T).is_err(),
            "nft refuses it"
        );
        // The compiler's negated ICMP type and code: nft 1.0.6 refuses a
        // concatenation compared with a value, and so it stays refused.
        let icmp_pair = batch(vec![rule(
            "c",
            vec![
                v4(),
                m(
                    concat(vec![payload("icmp", "type"), payload("icmp", "code")]),
                    "!=",
                    concat(vec![json!(8), json!(0)]),
                ),
            ],
        )]);
        assert!(w.write(&tx(&icmp_pair), "inet", T).is_err());
    });
}
