//! A [`Ruleset`] as a [`Transaction`] of the typed nftables model: the
//! whole table (replaced in one transaction), or the difference between
//! two rulesets.
//!
//! The fixed part of table `inet tartan`:
//!
//! ```text
//! chain forward { type filter hook forward priority filter; policy accept;
//!     ct state established,related accept
//!     iifname "tar*" iifname != "tartan*" ct state invalid drop  # to and from pods only:
//!     oifname "tar*" oifname != "tartan*" ct state invalid drop  # transit is routed as a router would
//!     iifname "tar*" iifname != "tartan*" jump from_endpoint   # egress of the sending pod
//! }
//! chain forward_in { type filter hook forward priority filter + 1; policy accept;
//!     ct state established,related accept
//!     oifname "tar*" oifname != "tartan*" jump to_endpoint     # ingress of the receiving pod
//! }
//! chain prerouting { type filter hook prerouting priority raw; policy accept;
//!     iifname "tar*" iifname != "tartan*" fib saddr . iif oif missing drop  # spoofed
//! }
//! chain from_endpoint { iifname vmap @from_endpoint; drop }  # unknown: fail closed
//! chain to_endpoint { oifname vmap @to_endpoint; drop }
//! chain open { }
//! chain input { type filter hook input priority filter; policy accept;
//!     ct state established,related accept
//!     iifname "lo" accept
//!     iifname vmap @host_in                      # a named host endpoint's ingress
//!     iifname != "tar*" jump host_all_in         # a `*` host endpoint's (goto hi…)
//! }
//! chain output { type filter hook output priority filter; policy accept;
//!     ct state established,related accept
//!     oifname "lo" accept
//!     oifname vmap @host_out
//!     oifname != "tar*" jump host_all_out
//! }
//! ```
//!
//! With no host endpoint (and in the table felix writes before it has
//! read the datastore) the host's maps are empty and `host_all_*` hold
//! nothing: the host's own traffic is not governed (see
//! [`super::host`]).
//!
//! A pod's packets must come from an address routed back through its own
//! interface (the CNI plugin's host route): policy knows peers by
//! address, so a pod sending as another pod, or as an address made up,
//! is dropped before anything else, in both families and whatever the
//! host's `rp_filter` says (IPv6 has no such sysctl). This is the strict
//! reverse-path check, done by the kernel's FIB lookup.
//!
//! Only forwarded packets meet policy: traffic between a pod and its own
//! node (input and output) is always allowed, as Kubernetes defines it.
//!
//! Egress and ingress are two base chains so that a profile can end its
//! direction with `accept` (the packet goes on to the next base chain):
//! an allowed packet leaves at once, with no mark to set and test.
//!
//! The `nftables` crate has no `verdict` map type, so the two verdict
//! maps are declared with tartan-nft's [`VerdictMap`]; everything else
//! goes through the crate's types.

use std::borrow::Cow;
use std::collections::BTreeMap;

use nftables::expr::{Expression, MetaKey, Verdict};
use nftables::schema::{
    Chain, Element as NftElement, FlushObject, NfCmd, NfListObject, Rule, Set, SetType,
    SetTypeValue, Table,
};
use nftables::stmt::{JumpTarget, Statement, VerdictMap as VmapStatement};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook};
use tartan_nft::model::VerdictMap;
use tartan_nft::{Command, Transaction};

use super::stmt::*;
use super::{Element, OPEN_CHAIN, Ruleset, SetDef, SetKind};

pub const TABLE: &str = "tartan";
pub const FORWARD: &str = "forward";
pub const FORWARD_IN: &str = "forward_in";
/// Every packet from a pod, before conntrack and NAT: only the source
/// check. In prerouting because kernels before 5.19 take a `fib ... oif`
/// lookup in no other hook, and refuse the whole table otherwise.
pub const PREROUTING: &str = "prerouting";
pub const FROM_ENDPOINT: &str = "from_endpoint";
/// Base chains of the host's own traffic (host endpoints).
pub const INPUT: &str = "input";
pub const OUTPUT: &str = "output";
/// Maps: host interface → its host endpoint's chain, per direction.
pub const HOST_IN: &str = "host_in";
pub const HOST_OUT: &str = "host_out";
/// Chains holding the `goto` to a `*` host endpoint's chains, if any.
pub const HOST_ALL_IN: &str = "host_all_in";
pub const HOST_ALL_OUT: &str = "host_all_out";
pub const TO_ENDPOINT: &str = "to_endpoint";
/// Interfaces of pods start with this (the CNI plugin names them).
pub const INTERFACE_PREFIX: &str = "tar";
/// Tartan's own devices (`tartan.vxlan`, `tartan.ipip`) share the prefix
/// but are not pods ("t" is no hex digit, so no pod's interface starts
/// with this).
pub const DEVICE_PREFIX: &str = "tartan";

fn chain(name: &str) -> Chain<'static> {
    Chain {
        family: NfFamily::INet,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        ..Chain::default()
    }
}

fn rule(chain: &str, expr: Stmts) -> Command {
    Command::Nft(NfCmd::Add(NfListObject::Rule(Rule {
        family: NfFamily::INet,
        table: Cow::Borrowed(TABLE),
        chain: Cow::Owned(chain.to_string()),
        expr: Cow::Owned(expr),
        ..Rule::default()
    })))
}

fn add(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Add(o))
}

fn del(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Delete(o))
}

fn flush(name: &str) -> Command {
    Command::Nft(NfCmd::Flush(FlushObject::Chain(chain(name))))
}

fn set_type(kind: SetKind) -> SetTypeValue<'static> {
    use nftables::schema::SetType;
    let addr = |v6| {
        if v6 {
            SetType::Ipv6Addr
        } else {
            SetType::Ipv4Addr
        }
    };
    match kind {
        SetKind::Addr { v6, .. } => SetTypeValue::Single(addr(v6)),
        SetKind::Port { v6 } | SetKind::Run { v6, ports: true } => {
            SetTypeValue::Concatenated(Cow::Owned(vec![
                addr(v6),
                SetType::InetProto,
                SetType::InetService,
            ]))
        }
        SetKind::Run { v6, ports: false } => {
            SetTypeValue::Concatenated(Cow::Owned(vec![addr(v6), SetType::InetProto]))
        }
    }
}

fn element(e: &Element) -> Expression<'static> {
    match e {
        Element::Range(lo, hi) => span(s(lo.to_string()), s(hi.to_string()), lo == hi),
        Element::Port(a, proto, port) => concat(vec![
            s(a.to_string()),
            Expression::Number(u32::from(*proto)),
            Expression::Number(u32::from(*port)),
        ]),
        Element::Span {
            addrs,
            protos,
            ports,
        } => {
            let mut parts = vec![
                span(
                    s(addrs.0.to_string()),
                    s(addrs.1.to_string()),
                    addrs.0 == addrs.1,
                ),
                span(
                    Expression::Number(u32::from(protos.0)),
                    Expression::Number(u32::from(protos.1)),
                    protos.0 == protos.1,
                ),
            ];
            if let Some((a, b)) = ports {
                parts.push(port_range(*a, *b));
            }
            concat(parts)
        }
    }
}

/// One value, or a range of them.
fn span(lo: Expression<'static>, hi: Expression<'static>, one: bool) -> Expression<'static> {
    if one {
        lo
    } else {
        Expression::Range(Box::new(nftables::expr::Range { range: [lo, hi] }))
    }
}

/// Whether sets of `kind` are interval sets: the address sets of
/// selectors in their range form (they hold networks) and the runs' sets
/// of boxes.
fn interval(kind: SetKind) -> bool {
    matches!(
        kind,
        SetKind::Addr { ranges: true, .. } | SetKind::Run { .. }
    )
}

fn set_object(name: &str, def: &SetDef, with_elements: bool) -> NfListObject<'static> {
    let elem: Vec<Expression<'static>> = def.elements.iter().map(element).collect();
    NfListObject::Set(Box::new(Set {
        family: NfFamily::INet,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        set_type: set_type(def.kind),
        flags: interval(def.kind).then(|| [nftables::schema::SetFlag::Interval].into()),
        elem: (with_elements && !elem.is_empty()).then(|| Cow::Owned(elem)),
        ..Set::default()
    }))
}

fn elements<'a>(
    name: &str,
    items: impl IntoIterator<Item = &'a Element>,
) -> Option<NfListObject<'static>> {
    let elem: Vec<Expression<'static>> = items.into_iter().map(element).collect();
    (!elem.is_empty()).then(|| {
        NfListObject::Element(NftElement {
            family: NfFamily::INet,
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(name.to_string()),
            elem: Cow::Owned(elem),
        })
    })
}

fn map_elements<'a>(
    map: &str,
    items: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Option<NfListObject<'static>> {
    let elem: Vec<Expression<'static>> = items
        .into_iter()
        .map(|(iface, target)| {
            Expression::List(vec![
                s(iface.clone()),
                Expression::Verdict(Verdict::Goto(JumpTarget {
                    target: Cow::Owned(target.clone()),
                })),
            ])
        })
        .collect();
    (!elem.is_empty()).then(|| {
        NfListObject::Element(NftElement {
            family: NfFamily::INet,
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(map.to_string()),
            elem: Cow::Owned(elem),
        })
    })
}

fn declare_vmap(name: &str) -> Command {
    Command::AddVerdictMap(VerdictMap {
        family: NfFamily::INet,
        table: TABLE.to_string(),
        name: name.to_string(),
        key: vec![SetType::Ifname],
    })
}

fn fixed_rules() -> Vec<Command> {
    let ifname = |k| meta(k);
    let wildcard = || s(format!("{INTERFACE_PREFIX}*"));
    let devices = || s(format!("{DEVICE_PREFIX}*"));
    // The packet comes in on (`Iifname`) or goes out of (`Oifname`) a
    // pod's interface, followed by `tail`.
    let pod = |key: MetaKey, tail: Stmts| {
        let mut v = vec![
            matches(ifname(key), wildcard(), true),
            matches(ifname(key), devices(), false),
        ];
        v.extend(tail);
        v
    };
    let established = || {
        vec![
            flags_set(
                ct("state"),
                Expression::List(vec![s("established"), s("related")]),
            ),
            accept(),
        ]
    };
    let invalid = || vec![flags_set(ct("state"), s("invalid")), drop()];
    use MetaKey::{Iifname, Oifname};
    vec![
        // Before conntrack, so before an established flow is let through:
        // a pod may not slip packets into another pod's connection either.
        rule(PREROUTING, pod(Iifname, vec![no_route_back(), drop()])),
        rule(FORWARD, established()),
        // Invalid packets are dropped to and from pods only. A node also
        // routes transit traffic it never saw the start of (a reply that a
        // top-of-rack router's ECMP sent to this node for a pod on
        // another): conntrack calls that invalid here, and dropping it
        // would break the flow.
        rule(FORWARD, pod(Iifname, invalid())),
        rule(FORWARD, pod(Oifname, invalid())),
        rule(FORWARD, pod(Iifname, vec![jump(FROM_ENDPOINT)])),
        rule(FORWARD_IN, established()),
        rule(FORWARD_IN, pod(Oifname, vec![jump(TO_ENDPOINT)])),
        rule(
            FROM_ENDPOINT,
            vec![Statement::VerdictMap(VmapStatement {
                key: meta(MetaKey::Iifname),
                data: s(format!("@{FROM_ENDPOINT}")),
            })],
        ),
        rule(FROM_ENDPOINT, vec![drop()]),
        rule(
            TO_ENDPOINT,
            vec![Statement::VerdictMap(VmapStatement {
                key: meta(MetaKey::Oifname),
                data: s(format!("@{TO_ENDPOINT}")),
            })],
        ),
        rule(TO_ENDPOINT, vec![drop()]),
        rule(INPUT, established()),
        rule(
            INPUT,
            vec![matches(ifname(Iifname), s("lo"), true), accept()],
        ),
        rule(
            INPUT,
            vec![Statement::VerdictMap(VmapStatement {
                key: meta(Iifname),
                data: s(format!("@{HOST_IN}")),
            })],
        ),
        rule(
            INPUT,
            vec![
                matches(ifname(Iifname), wildcard(), false),
                jump(HOST_ALL_IN),
            ],
        ),
        rule(OUTPUT, established()),
        rule(
            OUTPUT,
            vec![matches(ifname(Oifname), s("lo"), true), accept()],
        ),
        rule(
            OUTPUT,
            vec![Statement::VerdictMap(VmapStatement {
                key: meta(Oifname),
                data: s(format!("@{HOST_OUT}")),
            })],
        ),
        rule(
            OUTPUT,
            vec![
                matches(ifname(Oifname), wildcard(), false),
                jump(HOST_ALL_OUT),
            ],
        ),
    ]
}

/// The rules of `host_all_in` and `host_all_out`.
fn host_all_rules(rs: &Ruleset) -> Vec<Command> {
    match &rs.host_all {
        Some((i, e)) => vec![
            rule(HOST_ALL_IN, vec![goto(i)]),
            rule(HOST_ALL_OUT, vec![goto(e)]),
        ],
        None => vec![],
    }
}

/// The kinds of compiled chain by their first letter, each before the
/// kinds that may go to it: stretches (`x`), their guards (`g`), Pass
/// chains (`k`), profiles (`q`), host endpoints' chains (`h`).
const CHAIN_ORDER: [&str; 5] = ["x", "g", "k", "q", "h"];

/// Replace the whole table with `rs` in one transaction (valid whether
/// or not the table exists).
pub fn full(rs: &Ruleset) -> Transaction {
    let table = Table {
        family: NfFamily::INet,
        name: Cow::Borrowed(TABLE),
        handle: None,
    };
    let mut objs = vec![
        add(NfListObject::Table(table.clone())),
        del(NfListObject::Table(table.clone())),
        add(NfListObject::Table(table)),
        add(NfListObject::Chain(Chain {
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Forward),
            prio: Some(0),
            policy: Some(NfChainPolicy::Accept),
            ..chain(FORWARD)
        })),
        add(NfListObject::Chain(Chain {
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Forward),
            prio: Some(1),
            policy: Some(NfChainPolicy::Accept),
            ..chain(FORWARD_IN)
        })),
        add(NfListObject::Chain(Chain {
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Prerouting),
            // raw
            prio: Some(-300),
            policy: Some(NfChainPolicy::Accept),
            ..chain(PREROUTING)
        })),
        add(NfListObject::Chain(Chain {
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Input),
            prio: Some(0),
            policy: Some(NfChainPolicy::Accept),
            ..chain(INPUT)
        })),
        add(NfListObject::Chain(Chain {
            _type: Some(NfChainType::Filter),
            hook: Some(NfHook::Output),
            prio: Some(0),
            policy: Some(NfChainPolicy::Accept),
            ..chain(OUTPUT)
        })),
    ];
    for c in [
        FROM_ENDPOINT,
        TO_ENDPOINT,
        OPEN_CHAIN,
        HOST_ALL_IN,
        HOST_ALL_OUT,
    ] {
        objs.push(add(NfListObject::Chain(chain(c))));
    }
    for name in rs.chains.keys() {
        objs.push(add(NfListObject::Chain(chain(name))));
    }
    for (name, def) in &rs.sets {
        objs.push(add(set_object(name, def, true)));
    }
    // Chains before the chains that go to them: stretches, their
    // guards, Pass chains, profiles.
    for pass in CHAIN_ORDER {
        for (name, rules) in rs.chains.iter().filter(|(n, _)| n.starts_with(pass)) {
            objs.extend(rules.iter().map(|r| rule(name, r.clone())));
        }
    }
    objs.push(declare_vmap(FROM_ENDPOINT));
    objs.push(declare_vmap(TO_ENDPOINT));
    objs.extend(map_elements(FROM_ENDPOINT, &rs.from_endpoint).map(add));
    objs.extend(map_elements(TO_ENDPOINT, &rs.to_endpoint).map(add));
    objs.push(declare_vmap(HOST_IN));
    objs.push(declare_vmap(HOST_OUT));
    objs.extend(map_elements(HOST_IN, &rs.host_in).map(add));
    objs.extend(map_elements(HOST_OUT, &rs.host_out).map(add));
    objs.extend(host_all_rules(rs));
    objs.extend(fixed_rules());
    objs.into_iter().collect()
}

/// The commands that turn `old` (as applied) into `new`; `None` when
/// they are equal.
pub fn diff(old: &Ruleset, new: &Ruleset) -> Option<Transaction> {
    if old == new {
        return None;
    }
    let mut objs: Vec<Command> = Vec::new();
    // New chains and sets first: what follows refers to them.
    for name in new.chains.keys().filter(|n| !old.chains.contains_key(*n)) {
        objs.push(add(NfListObject::Chain(chain(name))));
    }
    for (name, def) in &new.sets {
        match old.sets.get(name) {
            None => objs.push(add(set_object(name, def, true))),
            Some(was) => {
                // An interval set refuses an element overlapping one
                // still there: what leaves goes first (the transaction
                // is atomic, so no packet sees the gap). Each element
                // deleted is one written before, whole: a range that
                // grew or shrank is deleted and added anew.
                if interval(def.kind) {
                    objs.extend(elements(name, was.elements.difference(&def.elements)).map(del));
                }
                objs.extend(elements(name, def.elements.difference(&was.elements)).map(add));
            }
        }
    }
    for pass in CHAIN_ORDER {
        for (name, rules) in new.chains.iter().filter(|(n, _)| n.starts_with(pass)) {
            match old.chains.get(name) {
                Some(was) if was == rules => continue,
                Some(_) => objs.push(flush(name)),
                None => {}
            }
            objs.extend(rules.iter().map(|r| rule(name, r.clone())));
        }
    }
    for (map, o, n) in [
        (FROM_ENDPOINT, &old.from_endpoint, &new.from_endpoint),
        (TO_ENDPOINT, &old.to_endpoint, &new.to_endpoint),
        (HOST_IN, &old.host_in, &new.host_in),
        (HOST_OUT, &old.host_out, &new.host_out),
    ] {
        let gone = o.iter().filter(|(k, v)| n.get(*k) != Some(*v));
        objs.extend(map_elements(map, gone).map(del));
        let came = n.iter().filter(|(k, v)| o.get(*k) != Some(*v));
        objs.extend(map_elements(map, came).map(add));
    }
    if old.host_all != new.host_all {
        objs.push(flush(HOST_ALL_IN));
        objs.push(flush(HOST_ALL_OUT));
        objs.extend(host_all_rules(new));
    }
    for (name, was) in &old.sets {
        if let Some(def) = new.sets.get(name)
            && !interval(def.kind)
        {
            objs.extend(elements(name, was.elements.difference(&def.elements)).map(del));
        }
    }
    // Chains no longer used: emptied, then removed, each after the
    // chains that go to it; then the sets their rules used.
    for pass in CHAIN_ORDER.iter().rev() {
        for name in old
            .chains
            .keys()
            .filter(|n| n.starts_with(pass) && !new.chains.contains_key(*n))
        {
            objs.push(flush(name));
            objs.push(del(NfListObject::Chain(chain(name))));
        }
    }
    for (name, def) in old.sets.iter().filter(|(n, _)| !new.sets.contains_key(*n)) {
        objs.push(del(set_object(name, def, false)));
    }
    Some(objs.into_iter().collect())
}

/// Each chain with its rule count and each set and map (`@name`) with its
/// element count, as `nft list table` shows them: enough to tell a table
/// edited or emptied by hand from the one written.
pub fn summary(rs: &Ruleset) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    let mut fixed: BTreeMap<String, usize> = BTreeMap::new();
    for o in fixed_rules() {
        if let Command::Nft(NfCmd::Add(NfListObject::Rule(r))) = o {
            *fixed.entry(r.chain.to_string()).or_default() += 1;
        }
    }
    m.extend(fixed);
    m.insert(OPEN_CHAIN.to_string(), 0);
    for (name, rules) in &rs.chains {
        m.insert(name.clone(), rules.len());
    }
    for (name, def) in &rs.sets {
        m.insert(format!("@{name}"), def.elements.len());
    }
    m.insert(format!("@{FROM_ENDPOINT}"), rs.from_endpoint.len());
    m.insert(format!("@{TO_ENDPOINT}"), rs.to_endpoint.len());
    m.insert(format!("@{HOST_IN}"), rs.host_in.len());
    m.insert(format!("@{HOST_OUT}"), rs.host_out.len());
    let all = usize::from(rs.host_all.is_some());
    m.insert(HOST_ALL_IN.to_string(), all);
    m.insert(HOST_ALL_OUT.to_string(), all);
    m
}
