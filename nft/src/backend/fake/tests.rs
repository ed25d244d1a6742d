//! The fake backend applies transactions as nft does: all or nothing.

use serde_json::json;

use super::Fake;
use crate::Transaction;
use crate::backend::Backend;

fn tx(v: serde_json::Value) -> Transaction {
    Transaction::from_json(&v).unwrap()
}

#[test]
fn a_transaction_builds_tables_chains_rules_and_elements() {
    let mut f = Fake::new();
    f.commit(&tx(json!({"nftables": [
        {"add": {"table": {"family": "inet", "name": "t"}}},
        {"add": {"chain": {"family": "inet", "table": "t", "name": "fw",
            "type": "filter", "hook": "forward", "prio": 0, "policy": "accept"}}},
        {"add": {"chain": {"family": "inet", "table": "t", "name": "x"}}},
        {"add": {"set": {"family": "inet", "table": "t", "name": "a", "type": "ipv4_addr",
            "elem": ["10.0.0.1"]}}},
        {"add": {"map": {"family": "inet", "table": "t", "name": "m", "type": "ifname", "map": "verdict"}}},
        {"add": {"element": {"family": "inet", "table": "t", "name": "m",
            "elem": [["tar1", {"goto": {"target": "x"}}]]}}},
        {"add": {"rule": {"family": "inet", "table": "t", "chain": "x", "expr": [
            {"match": {"left": {"payload": {"protocol": "ip", "field": "saddr"}}, "op": "==", "right": "@a"}},
            {"accept": null}]}}},
    ]})))
    .unwrap();
    assert_eq!(
        f.rules("inet", "t", "x").unwrap(),
        ["ip saddr == @a accept"]
    );
    assert_eq!(
        f.elements("inet", "t", "m").unwrap()["tar1"].as_deref(),
        Some("goto x")
    );
    let listing = f.list();
    assert!(
        listing.contains("type filter hook forward priority 0; policy accept;"),
        "{listing}"
    );
    assert!(listing.contains("elements = { 10.0.0.1 }"), "{listing}");
}

#[test]
fn a_refused_command_leaves_the_ruleset_as_it_was() {
    let mut f = Fake::new();
    f.commit(&tx(json!({"nftables": [
        {"add": {"table": {"family": "ip", "name": "t"}}},
        {"add": {"set": {"family": "ip", "table": "t", "name": "a", "type": "ipv4_addr"}}},
    ]})))
    .unwrap();
    let before = f.clone();
    let bad = tx(json!({"nftables": [
        {"add": {"element": {"family": "ip", "table": "t", "name": "a", "elem": ["10.0.0.1"]}}},
        {"delete": {"element": {"family": "ip", "table": "t", "name": "a", "elem": ["10.0.0.2"]}}},
    ]}));
    assert!(f.commit(&bad).is_err());
    assert_eq!(f, before);
    // A chain with rules cannot be deleted, an emptied one can.
    f.commit(&tx(json!({"nftables": [
        {"add": {"chain": {"family": "ip", "table": "t", "name": "c"}}},
        {"add": {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": [{"drop": null}]}}},
    ]})))
    .unwrap();
    let del = json!({"delete": {"chain": {"family": "ip", "table": "t", "name": "c"}}});
    assert!(f.commit(&tx(json!({"nftables": [del.clone()]}))).is_err());
    let flush = json!({"flush": {"chain": {"family": "ip", "table": "t", "name": "c"}}});
    f.commit(&tx(json!({"nftables": [flush, del]}))).unwrap();
    assert!(f.table("ip", "t").unwrap().chains.is_empty());
}
