//! The pieces every part of the table is built from: its name, the key
//! types of its sets and maps, the nft objects (table, chains, rules,
//! elements) and the expressions its rules and elements are made of.

use std::borrow::Cow;

use nftables::expr::{
    Expression, Fib, FibFlag, FibResult, MetaKey, NamedExpression, Prefix, Verdict,
};
use nftables::schema::{Chain, Element, NfCmd, NfListObject, Rule, SetType, SetTypeValue, Table};
use nftables::stmt::{JumpTarget, Mangle, Match, Operator, Statement};
use nftables::types::{NfChainPolicy, NfChainType, NfHook};
use tartan_nft::{Command, Transaction};
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::{concat, meta, payload, s};

use crate::services::{Fam, Family};

pub const TABLE: &str = "tartan-svc";

pub(super) type Frontend<A> = (A, u8, u16);
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

/// `ip daddr . meta l4proto . th dport` (`ip6 daddr` in IPv6).
pub(super) fn frontend_key(f: Fam) -> Expression<'static> {
    concat(vec![
        payload(f.payload(), "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

pub(super) fn node_port_key() -> Expression<'static> {
    concat(vec![meta(MetaKey::L4proto), payload("th", "dport")])
}

/// To one of the node's own addresses, not loopback; in IPv6 not
/// link-local either (`fe80::/10`: kube-proxy's default NodePort
/// addresses, the node's primary IPs, never include one).
pub(super) fn local_destination(f: Fam) -> Vec<Statement<'static>> {
    let not_in = |(net, len): (&'static str, u32)| {
        is(
            payload(f.payload(), "daddr"),
            Expression::Named(NamedExpression::Prefix(Prefix {
                addr: Box::new(s(net)),
                len,
            })),
            Operator::NEQ,
        )
    };
    let mut v = vec![
        is(
            Expression::Named(NamedExpression::Fib(Fib {
                result: FibResult::Type,
                flags: [FibFlag::Daddr].into(),
            })),
            s("local"),
            Operator::EQ,
        ),
        not_in(f.loopback()),
    ];
    if f == Fam::V6 {
        v.push(not_in(("fe80::", 10)));
    }
    v
}

pub(super) fn fe_elem<A: Family>(fe: &Frontend<A>) -> Vec<Expression<'static>> {
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

pub(super) fn hairpin_elem<A: Family>(a: &A) -> Vec<Expression<'static>> {
    vec![s(a.to_string()), s(a.to_string())]
}

pub(super) fn types(parts: &[SetType]) -> SetTypeValue<'static> {
    if parts.len() == 1 {
        SetTypeValue::Single(parts[0])
    } else {
        SetTypeValue::Concatenated(Cow::Owned(parts.to_vec()))
    }
}

/// `address . protocol . port`.
pub(super) fn fe_type(f: Fam) -> Vec<SetType> {
    vec![f.addr_type(), SetType::InetProto, SetType::InetService]
}

/// A frontend and a slot.
pub(super) fn fe_slot_type(f: Fam) -> Vec<SetType> {
    let mut t = fe_type(f);
    t.push(SetType::Mark);
    t
}

pub(super) const NP: &[SetType] = &[SetType::InetProto, SetType::InetService];
pub(super) const NP_SLOT: &[SetType] = &[SetType::InetProto, SetType::InetService, SetType::Mark];

/// A LoadBalancer frontend and a client network.
pub(super) fn fe_client_net_type(f: Fam) -> Vec<SetType> {
    let mut t = fe_type(f);
    t.push(f.addr_type());
    t
}

/// A client and a frontend (the affinity sets).
pub(super) fn client_fe_type(f: Fam) -> Vec<SetType> {
    let mut t = vec![f.addr_type()];
    t.extend(fe_type(f));
    t
}

pub(super) fn table(f: Fam) -> Table<'static> {
    Table {
        family: f.nf(),
        name: Cow::Borrowed(TABLE),
        handle: None,
    }
}

pub(super) fn chain(f: Fam, name: &str) -> Chain<'static> {
    Chain {
        family: f.nf(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        ..Chain::default()
    }
}

pub(super) fn base(f: Fam, name: &str, t: NfChainType, hook: NfHook, prio: i32) -> Chain<'static> {
    Chain {
        _type: Some(t),
        hook: Some(hook),
        prio: Some(prio),
        policy: Some(NfChainPolicy::Accept),
        ..chain(f, name)
    }
}

pub(super) fn rule(f: Fam, chain: &str, expr: Vec<Statement<'static>>) -> Command {
    add(NfListObject::Rule(Rule {
        family: f.nf(),
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

pub(super) fn element_cmd(
    f: Fam,
    name: &str,
    elem: Vec<Expression<'static>>,
) -> NfListObject<'static> {
    NfListObject::Element(Element {
        family: f.nf(),
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
pub(super) fn client_key(f: Fam) -> Expression<'static> {
    concat(vec![
        payload(f.payload(), "saddr"),
        payload(f.payload(), "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

pub(super) fn tx(objs: Vec<Command>) -> Transaction {
    objs.into_iter().collect()
}
