//! The netlink and `nft` program backends leave the same ruleset in the
//! kernel (`nft list ruleset`) for the shapes felix writes over netlink:
//! regular chains, plain and interval sets with elements, verdict map
//! elements, and rules of the policy table's kinds. Each backend writes
//! into a fresh network namespace of its own (needs root).

use std::process::Command;

use serde_json::{Value, json};
use tartan_nft::Transaction;
use tartan_nft::backend::Backend;
use tartan_nft::backend::netlink::commit::Netlink;
use tartan_nft::backend::program::Program;

mod common;

use common::{in_new_netns, tx};

/// What only `nft` writes: the table, a base chain, a verdict map.
fn skeleton() -> Transaction {
    tx(json!([
        {"add": {"table": {"family": "inet", "name": "p"}}},
        {"add": {"chain": {"family": "inet", "table": "p", "name": "fwd",
            "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}},
        {"add": {"map": {"family": "inet", "table": "p", "name": "to_ep",
            "type": "ifname", "map": "verdict"}}},
    ]))
}

fn payload(protocol: &str, field: &str) -> Value {
    json!({"payload": {"protocol": protocol, "field": field}})
}

fn m(left: Value, op: &str, right: Value) -> Value {
    json!({"match": {"op": op, "left": left, "right": right}})
}

/// What both backends write: chains, sets, elements, rules.
fn content() -> Transaction {
    let nfproto = m(json!({"meta": {"key": "nfproto"}}), "==", json!("ipv4"));
    tx(json!([
        {"add": {"chain": {"family": "inet", "table": "p", "name": "q1"}}},
        {"add": {"chain": {"family": "inet", "table": "p", "name": "x1"}}},
        {"add": {"set": {"family": "inet", "table": "p", "name": "peers", "type": "ipv4_addr",
            "elem": ["10.0.0.1", "10.0.0.2"]}}},
        {"add": {"set": {"family": "inet", "table": "p", "name": "runs", "flags": ["interval"],
            "type": ["ipv4_addr", "inet_proto", "inet_service"],
            "elem": [{"concat": [{"range": ["10.0.1.0", "10.0.1.255"]}, 6, {"range": [80, 90]}]}]}}},
        {"add": {"rule": {"family": "inet", "table": "p", "chain": "x1", "expr": [
            nfproto.clone(),
            m(payload("ip", "saddr"), "==", json!("@peers")),
            m(payload("th", "dport"), "==", json!(443)),
            {"accept": null}]}}},
        {"add": {"rule": {"family": "inet", "table": "p", "chain": "x1", "expr": [
            nfproto.clone(),
            m(json!({"concat": [payload("ip", "saddr"), {"meta": {"key": "l4proto"}},
                payload("th", "dport")]}), "==", json!("@runs")),
            {"log": {"prefix": "allowed ", "level": "info"}},
            {"accept": null}]}}},
        {"add": {"rule": {"family": "inet", "table": "p", "chain": "q1", "expr": [
            nfproto,
            m(payload("ip", "daddr"), "!=", json!({"prefix": {"addr": "10.96.0.0", "len": 12}})),
            {"jump": {"target": "x1"}}]}}},
        {"add": {"rule": {"family": "inet", "table": "p", "chain": "q1", "expr": [{"drop": null}]}}},
        {"add": {"element": {"family": "inet", "table": "p", "name": "to_ep",
            "elem": [["tar1a2b", {"goto": {"target": "q1"}}], ["tar3c4d", {"drop": null}]]}}},
    ]))
}

fn ruleset() -> String {
    let out = Command::new("nft")
        .args(["list", "ruleset"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn netlink_and_nft_leave_the_same_ruleset() {
    let by_nft = in_new_netns(|| {
        let mut p = Program;
        p.commit(&skeleton()).unwrap();
        p.commit(&content()).unwrap();
        ruleset()
    });
    let by_netlink = in_new_netns(|| {
        Program.commit(&skeleton()).unwrap();
        let mut n = Netlink::new();
        n.observe(&skeleton());
        n.commit(&content()).expect("every command encoded");
        ruleset()
    });
    assert!(by_nft.contains("tar1a2b"), "{by_nft}");
    assert_eq!(by_netlink, by_nft);
}

#[test]
fn the_netlink_backend_refuses_what_it_does_not_encode() {
    in_new_netns(|| {
        let mut n = Netlink::new();
        let e = n.commit(&skeleton()).unwrap_err();
        assert!(matches!(e, tartan_nft::Error::Unsupported(_)), "{e}");
        assert!(!ruleset().contains("table inet p"));
    });
}
