//! Element changes written over netlink land in the kernel exactly as the
//! same batch written by `nft` does: two identical tables, one written each
//! way, list the same. A refused element change applies nothing.

use std::process::Command;

use serde_json::{Value, json};
use tartan_felix::dataplane::nft::{NftWriter, Via};

mod common;
use common::{in_new_netns, nft_list, tx};

fn list(family: &str, table: &str) -> Value {
    let v = nft_list(family, table);
    // Keep the sets and maps (name, elements), sorted, table name left out.
    let mut sets: Vec<Value> = v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o.get("set").or_else(|| o.get("map")))
        .map(|s| {
            let mut elems: Vec<String> = s["elem"]
                .as_array()
                .map(|a| a.iter().map(|e| e.to_string()).collect())
                .unwrap_or_default();
            elems.sort();
            json!({"name": s["name"], "elem": elems})
        })
        .collect();
    sets.sort_by_key(|s| s["name"].to_string());
    Value::Array(sets)
}

/// The declarations of a table in each family felix writes, with every
/// key and value type felix uses.
fn declare(family: &str, table: &str) -> Value {
    let (addr, proto_key) = if family == "ip" {
        (
            "ipv4_addr",
            json!(["ipv4_addr", "inet_proto", "inet_service"]),
        )
    } else {
        (
            "ipv6_addr",
            json!(["ipv6_addr", "inet_proto", "inet_service"]),
        )
    };
    json!({"nftables": [
        {"add": {"table": {"family": family, "name": table}}},
        {"delete": {"table": {"family": family, "name": table}}},
        {"add": {"table": {"family": family, "name": table}}},
        {"add": {"chain": {"family": family, "table": table, "name": "one"}}},
        {"add": {"chain": {"family": family, "table": table, "name": "two"}}},
        {"add": {"map": {"family": family, "table": table, "name": "by_if", "type": "ifname", "map": "verdict"}}},
        {"add": {"map": {"family": family, "table": table, "name": "frontends", "type": proto_key, "map": "verdict"}}},
        {"add": {"map": {"family": family, "table": table, "name": "slot_addr",
            "type": [addr, "inet_proto", "inet_service", "mark"], "map": addr}}},
        {"add": {"map": {"family": family, "table": table, "name": "slot_port",
            "type": ["inet_proto", "inet_service", "mark"], "map": "inet_service"}}},
        {"add": {"set": {"family": family, "table": table, "name": "addrs", "type": addr}}},
        {"add": {"set": {"family": family, "table": table, "name": "ports", "type": proto_key}}},
    ]})
}

fn elements(family: &str, table: &str, verb: &str, a: &str, b: &str) -> Value {
    let el = |name: &str, elem: Value| json!({verb: {"element": {"family": family, "table": table, "name": name, "elem": elem}}});
    json!({"nftables": [
        el("by_if", json!([["tar0a1b2c", {"goto": {"target": "one"}}], ["tarffff", {"jump": {"target": "two"}}], ["lo", {"accept": null}]])),
        el("frontends", json!([[{"concat": [a, 6, 80]}, {"goto": {"target": "one"}}], [{"concat": [b, 17, 53]}, {"drop": null}]])),
        el("slot_addr", json!([[{"concat": [a, 6, 80, 0]}, b], [{"concat": [a, 6, 80, 3]}, a], [{"concat": [b, 132, 65535, 4000000000u32]}, a]])),
        el("slot_port", json!([[{"concat": [6, 30080, 1]}, 8080], [{"concat": [17, 1, 0]}, 1]])),
        el("addrs", json!([a, b])),
        el("ports", json!([{"concat": [a, 6, 443]}, {"concat": [b, 17, 53]}])),
    ]})
}

#[test]
fn netlink_element_writes_match_nft_in_both_families() {
    in_new_netns(|| {
        for (family, a, b) in [
            ("ip", "10.96.0.1", "192.0.2.254"),
            ("inet", "fd00::1", "2001:db8::ff"),
        ] {
            let mut fast = NftWriter::default().netlink(true);
            let mut slow = NftWriter::default().netlink(false);
            assert_eq!(
                fast.write(&tx(&declare(family, "fast")), family, "fast")
                    .unwrap(),
                Via::Nft
            );
            assert_eq!(
                slow.write(&tx(&declare(family, "slow")), family, "slow")
                    .unwrap(),
                Via::Nft
            );

            let add = |t| elements(family, t, "add", a, b);
            assert_eq!(
                fast.write(&tx(&add("fast")), family, "fast").unwrap(),
                Via::Netlink
            );
            assert_eq!(
                slow.write(&tx(&add("slow")), family, "slow").unwrap(),
                Via::Nft
            );
            let listed = list(family, "fast");
            assert_eq!(
                listed,
                list(family, "slow"),
                "{family}: netlink and nft disagree"
            );
            assert!(listed.to_string().contains("tar0a1b2c"), "{listed}");

            // Deleting them again, map elements by key and value as felix
            // writes them, empties both.
            let del = |t| elements(family, t, "delete", a, b);
            assert_eq!(
                fast.write(&tx(&del("fast")), family, "fast").unwrap(),
                Via::Netlink
            );
            assert_eq!(
                slow.write(&tx(&del("slow")), family, "slow").unwrap(),
                Via::Nft
            );
            let empty = list(family, "fast");
            assert_eq!(empty, list(family, "slow"));
            assert!(!empty.to_string().contains(a), "{empty}");
        }
    });
}

#[test]
fn a_refused_element_change_applies_nothing() {
    in_new_netns(|| {
        let mut w = NftWriter::default().netlink(true);
        w.write(&tx(&declare("ip", "t")), "ip", "t").unwrap();
        let one = json!({"nftables": [{"add": {"element": {"family": "ip", "table": "t", "name": "addrs", "elem": ["10.0.0.1"]}}}]});
        assert_eq!(w.write(&tx(&one), "ip", "t").unwrap(), Via::Netlink);
        // Add one, delete one that is not there: the kernel refuses the
        // batch and the add must not stay.
        let bad = json!({"nftables": [
            {"add": {"element": {"family": "ip", "table": "t", "name": "addrs", "elem": ["10.0.0.2"]}}},
            {"delete": {"element": {"family": "ip", "table": "t", "name": "addrs", "elem": ["10.0.0.9"]}}},
        ]});
        let err = w.write(&tx(&bad), "ip", "t").unwrap_err().to_string();
        assert!(err.contains("refused"), "{err}");
        let listed = list("ip", "t").to_string();
        assert!(
            listed.contains("10.0.0.1") && !listed.contains("10.0.0.2"),
            "{listed}"
        );
        // A chain that does not exist as a verdict target is refused too.
        let dangling = json!({"nftables": [{"add": {"element": {"family": "ip", "table": "t", "name": "by_if",
            "elem": [["tarx", {"goto": {"target": "missing"}}]]}}}]});
        assert!(w.write(&tx(&dangling), "ip", "t").is_err());
    });
}

/// A table built from nothing gets its elements over netlink, after nft
/// made the rest, and ends up as nft alone would make it; a table already
/// there is replaced by nft in one transaction.
#[test]
fn a_new_table_gets_its_elements_over_netlink_an_existing_one_through_nft() {
    in_new_netns(|| {
        let whole = |t: &str| {
            let mut b = declare("ip", t);
            let els = elements("ip", t, "add", "10.96.0.1", "192.0.2.254");
            b["nftables"]
                .as_array_mut()
                .unwrap()
                .extend(els["nftables"].as_array().unwrap().iter().cloned());
            b
        };
        let mut fast = NftWriter::default().netlink(true);
        let mut slow = NftWriter::default().netlink(false);
        assert_eq!(
            fast.write_new(tx(&whole("fast")), "ip", "fast").unwrap(),
            Via::Netlink
        );
        assert_eq!(
            slow.write_new(tx(&whole("slow")), "ip", "slow").unwrap(),
            Via::Nft
        );
        let listed = list("ip", "fast");
        assert_eq!(listed, list("ip", "slow"));
        assert!(listed.to_string().contains("192.0.2.254"), "{listed}");
        // Now it exists: replaced whole by nft.
        assert_eq!(
            fast.write_new(tx(&whole("fast")), "ip", "fast").unwrap(),
            Via::Nft
        );
        assert_eq!(list("ip", "fast"), listed);
        // Elements the kernel refuses (a verdict to a chain that does not
        // exist) leave no table behind.
        let mut bad = whole("bad");
        bad["nftables"]
            .as_array_mut()
            .unwrap()
            .push(json!({"add": {"element": {"family": "ip", "table": "bad",
            "name": "by_if", "elem": [["tarx", {"goto": {"target": "missing"}}]]}}}));
        assert!(fast.write_new(tx(&bad), "ip", "bad").is_err());
        let tables = Command::new("nft")
            .args(["list", "tables"])
            .output()
            .unwrap();
        let tables = String::from_utf8_lossy(&tables.stdout).to_string();
        assert!(!tables.contains("bad"), "{tables}");
    });
}

/// A new table with 150,000 elements (about 10 MB of netlink) goes in as
/// one transaction, every element there.
#[test]
fn a_large_new_table_goes_in_whole() {
    in_new_netns(|| {
        let n: u32 = 75_000;
        let mut b = declare("ip", "big");
        let addr = |i: u32| std::net::Ipv4Addr::from(0x0a00_0000 + i).to_string();
        let addrs: Vec<Value> = (0..n).map(|i| json!(addr(i))).collect();
        let slots: Vec<Value> = (0..n)
            .map(|i| json!([{"concat": [addr(i), 6, 80, i % 16]}, addr(i + 1)]))
            .collect();
        let cmds = b["nftables"].as_array_mut().unwrap();
        cmds.push(json!({"add": {"element": {"family": "ip", "table": "big", "name": "addrs", "elem": addrs}}}));
        cmds.push(json!({"add": {"element": {"family": "ip", "table": "big", "name": "slot_addr", "elem": slots}}}));
        let mut w = NftWriter::default().netlink(true);
        assert_eq!(w.write_new(tx(&b), "ip", "big").unwrap(), Via::Netlink);
        let listed = list("ip", "big");
        let count = |name: &str| {
            listed
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == name)
                .map_or(0, |s| s["elem"].as_array().unwrap().len())
        };
        assert_eq!(count("addrs"), n as usize);
        assert_eq!(count("slot_addr"), n as usize);
    });
}
