//! The NAT tables `ip tartan-nat` and `ip6 tartan-nat`: a postrouting chain
//! masquerading pool traffic bound outside the pools. Each change replaces
//! the tables in one nft transaction (add, delete, add: atomic, and valid
//! whether or not they existed), so a packet never sees half a ruleset.

use std::borrow::Cow;

use ipnet::IpNet;
use nftables::expr::{Expression, NamedExpression, Payload, PayloadField, Prefix, SetItem};
use nftables::schema::{Chain, NfListObject, Rule, Table};
use nftables::stmt::{Match, Operator, Statement};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook};
use tartan_nft::Transaction;
use tartan_nft::backend::program;

use super::DataplaneError;
use crate::calc::nat::Nat;

pub const TABLE: &str = "tartan-nat";
const CHAIN: &str = "postrouting";

fn prefix(n: &IpNet) -> Expression<'static> {
    Expression::Named(NamedExpression::Prefix(Prefix {
        addr: Box::new(Expression::String(Cow::Owned(n.network().to_string()))),
        len: u32::from(n.prefix_len()),
    }))
}

fn field(protocol: &'static str, field: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::Payload(Payload::PayloadField(
        PayloadField {
            protocol: Cow::Borrowed(protocol),
            field: Cow::Borrowed(field),
        },
    )))
}

/// The commands that make one family's table equal `nat`.
fn family_batch(
    batch: &mut Transaction,
    family: NfFamily,
    proto: &'static str,
    nat: &Nat,
    v6: bool,
) {
    let table = Table {
        family,
        name: Cow::Borrowed(TABLE),
        handle: None,
    };
    batch.add(NfListObject::Table(table.clone()));
    batch.delete(NfListObject::Table(table.clone()));
    batch.add(NfListObject::Table(table));
    batch.add(NfListObject::Chain(Chain {
        family,
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed(CHAIN),
        _type: Some(NfChainType::NAT),
        hook: Some(NfHook::Postrouting),
        prio: Some(100),
        policy: Some(NfChainPolicy::Accept),
        ..Chain::default()
    }));
    let of_family = |n: &&IpNet| matches!(n, IpNet::V6(_)) == v6;
    let pools: Vec<SetItem<'static>> = nat
        .pools
        .iter()
        .filter(of_family)
        .map(|p| SetItem::Element(prefix(p)))
        .collect();
    for from in nat.from.iter().filter(of_family) {
        let mut expr = vec![Statement::Match(Match {
            left: field(proto, "saddr"),
            right: prefix(from),
            op: Operator::EQ,
        })];
        if !pools.is_empty() {
            expr.push(Statement::Match(Match {
                left: field(proto, "daddr"),
                right: Expression::Named(NamedExpression::Set(pools.clone())),
                op: Operator::NEQ,
            }));
        }
        expr.push(Statement::Masquerade(None));
        batch.add(NfListObject::Rule(Rule {
            family,
            table: Cow::Borrowed(TABLE),
            chain: Cow::Borrowed(CHAIN),
            expr: Cow::Owned(expr),
            ..Rule::default()
        }));
    }
}

/// The whole transaction for `nat`, both families.
pub fn ruleset(nat: &Nat) -> Transaction {
    let mut b = Transaction::new();
    family_batch(&mut b, NfFamily::IP, "ip", nat, false);
    family_batch(&mut b, NfFamily::IP6, "ip6", nat, true);
    b
}

/// Replace both tables with `nat` in one transaction.
pub fn apply(nat: &Nat) -> Result<(), DataplaneError> {
    program::run(&ruleset(nat)).map_err(|e| DataplaneError::Refused {
        what: format!("nftables table {TABLE}"),
        detail: e.to_string(),
    })
}

/// Whether the IPv4 table is there (it goes missing if someone flushes the
/// ruleset by hand).
pub fn present() -> bool {
    super::nft::table_present("ip", TABLE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transaction_replaces_both_tables() {
        let nat = Nat {
            from: vec!["10.244.0.0/16".parse().unwrap()],
            pools: vec![
                "10.244.0.0/16".parse().unwrap(),
                "fd00::/64".parse().unwrap(),
            ],
        };
        let j = ruleset(&nat).to_json();
        let cmds = j["nftables"].as_array().unwrap();
        let verbs: Vec<String> = cmds
            .iter()
            .filter_map(|c| c.as_object()?.keys().next().cloned())
            .collect();
        // Per family: add, delete, add table; add chain; then one rule for
        // the IPv4 pool with natOutgoing.
        assert_eq!(
            verbs,
            [
                "add", "delete", "add", "add", "add", "add", "delete", "add", "add"
            ]
        );
        let text = j.to_string();
        assert!(text.contains("\"masquerade\""), "{text}");
        assert!(text.contains("\"10.244.0.0\""), "{text}");
    }
}
