//! The pieces every part of the table is built from: its name, the key
//! types of its sets and maps, the nft objects (table, chains, rules,
//! elements) and the expressions its rules and elements are made of.

use std::borrow::Cow;
use std::net::Ipv4Addr;

use nftables::expr::{
    Expression, Fib, FibFlag, FibResult, MetaKey, NamedExpression, Prefix, Verdict,
};
use nftables::schema::{Chain, Element, NfCmd, NfListObject, Rule, SetType, SetTypeValue, Table};
use nftables::stmt::{JumpTarget, Mangle, Match, Operator, Statement};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook};
use tartan_nft::{Command, Transaction};
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::{concat, meta, payload, s};

pub const TABLE: &str = "tartan-svc";

pub(super) type Frontend = (Ipv4Addr, u8, u16);
pub(super) type NodePort = (u8, u16);

pub(super) fn n(v: u32) -> Expression<'static> {
    Expression::Number(v)
}

pub(super) fn lookup(key: Expression<'static>, map: &str) -> Expression<'static> {
    Expression::Named(NamedExpression::Map(Box::new(nftables::expr::Map {
        key,
        data: s(format!("@{map}")),
    })))
}

pub(super) fn is(
    left: Expression<'static>,
    right: Expression<'static>,
    op: Operator,
) -> Statement<'static> {
    Statement::Match(Match { left, right, op })
}

/// `ip daddr . meta l4proto . th dport`.
pub(super) fn frontend_key() -> Expression<'static> {
    concat(vec![
        payload("ip", "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

pub(super) fn node_port_key() -> Expression<'static> {
    concat(vec![meta(MetaKey::L4proto), payload("th", "dport")])
}

pub(super) fn local_destination() -> Vec<Statement<'static>> {
    vec![
        is(
            Expression::Named(NamedExpression::Fib(Fib {
                result: FibResult::Type,
                flags: [FibFlag::Daddr].into(),
            })),
            s("local"),
            Operator::EQ,
        ),
        is(
            payload("ip", "daddr"),
            Expression::Named(NamedExpression::Prefix(Prefix {
                addr: Box::new(s("127.0.0.0")),
                len: 8,
            })),
            Operator::NEQ,
        ),
    ]
}

pub(super) fn fe_elem(fe: &Frontend) -> Vec<Expression<'static>> {
    vec![s(fe.0.to_string()), n(u32::from(fe.1)), n(u32::from(fe.2))]
}

pub(super) fn np_elem(np: &NodePort) -> Vec<Expression<'static>> {
    vec![n(u32::from(np.0)), n(u32::from(np.1))]
}

pub(super) fn key_of(parts: Vec<Expression<'static>>) -> Expression<'static> {
    if parts.len() == 1 {
        parts.into_iter().next().unwrap_or(n(0))
    } else {
        concat(parts)
    }
}

pub(super) fn mapping(
    key: Vec<Expression<'static>>,
    value: Expression<'static>,
) -> Expression<'static> {
    Expression::List(vec![key_of(key), value])
}

pub(super) fn goto_value(chain: &str) -> Expression<'static> {
    Expression::Verdict(Verdict::Goto(JumpTarget {
        target: Cow::Owned(chain.to_string()),
    }))
}

/// Render one map's entries.
pub(super) fn map_elems<'a, K: 'a, V: 'a>(
    items: impl IntoIterator<Item = (&'a K, &'a V)>,
    key: impl Fn(&K) -> Vec<Expression<'static>>,
    value: impl Fn(&V) -> Expression<'static>,
) -> Vec<Expression<'static>> {
    items
        .into_iter()
        .map(|(k, v)| mapping(key(k), value(v)))
        .collect()
}

pub(super) fn slot_key<K>(
    base: impl Fn(&K) -> Vec<Expression<'static>>,
) -> impl Fn(&(K, u32)) -> Vec<Expression<'static>> {
    move |(k, i)| {
        let mut key = base(k);
        key.push(n(*i));
        key
    }
}

pub(super) fn hairpin_elem(a: &Ipv4Addr) -> Vec<Expression<'static>> {
    vec![s(a.to_string()), s(a.to_string())]
}

pub(super) fn types(parts: &[SetType]) -> SetTypeValue<'static> {
    if parts.len() == 1 {
        SetTypeValue::Single(parts[0])
    } else {
        SetTypeValue::Concatenated(Cow::Owned(parts.to_vec()))
    }
}

pub(super) const FE: &[SetType] = &[SetType::Ipv4Addr, SetType::InetProto, SetType::InetService];
pub(super) const FE_SLOT: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
    SetType::Mark,
];
pub(super) const NP: &[SetType] = &[SetType::InetProto, SetType::InetService];
pub(super) const NP_SLOT: &[SetType] = &[SetType::InetProto, SetType::InetService, SetType::Mark];
/// A LoadBalancer frontend and a client network.
pub(super) const FE_CLIENT_NET: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
    SetType::Ipv4Addr,
];
pub(super) const CLIENT_FE: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
];

pub(super) fn table() -> Table<'static> {
    Table {
        family: NfFamily::IP,
        name: Cow::Borrowed(TABLE),
        handle: None,
    }
}

pub(super) fn chain(name: &str) -> Chain<'static> {
    Chain {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        ..Chain::default()
    }
}

pub(super) fn base(name: &str, t: NfChainType, hook: NfHook, prio: i32) -> Chain<'static> {
    Chain {
        _type: Some(t),
        hook: Some(hook),
        prio: Some(prio),
        policy: Some(NfChainPolicy::Accept),
        ..chain(name)
    }
}

pub(super) fn rule(chain: &str, expr: Vec<Statement<'static>>) -> Command {
    add(NfListObject::Rule(Rule {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        chain: Cow::Owned(chain.to_string()),
        expr: Cow::Owned(expr),
        ..Rule::default()
    }))
}

pub(super) fn add(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Add(o))
}

pub(super) fn del(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Delete(o))
}

pub(super) fn element_cmd(name: &str, elem: Vec<Expression<'static>>) -> NfListObject<'static> {
    NfListObject::Element(Element {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        elem: Cow::Owned(elem),
    })
}

pub(super) fn set_mark(v: Expression<'static>) -> Statement<'static> {
    Statement::Mangle(Mangle {
        key: meta(MetaKey::Mark),
        value: v,
    })
}

/// The client and frontend of a packet, the key of the affinity sets.
pub(super) fn client_key() -> Expression<'static> {
    concat(vec![
        payload("ip", "saddr"),
        payload("ip", "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

pub(super) fn tx(objs: Vec<Command>) -> Transaction {
    objs.into_iter().collect()
}
