//! The packets and cluster both sides decide over, and an interpreter of
//! a compiled ruleset that walks its chains and sets as nftables would.

use std::net::IpAddr;

use ipnet::IpNet;
use nftables::expr::{Expression, Meta, MetaKey, NamedExpression, Payload, SetItem};
use nftables::stmt::{Operator, Statement};

use crate::compile::{
    Element, Endpoint, NamespaceLabels, NetSet, OPEN_CHAIN, Ruleset, SetDef, SetKind,
};
use crate::ir::Side;

// ---------------------------------------------------------------------
// Packets

#[derive(Debug, Clone)]
pub(super) struct Packet {
    pub(super) src: IpAddr,
    pub(super) dst: IpAddr,
    pub(super) proto: u8,
    /// (source, destination), for protocols with ports.
    pub(super) ports: Option<(u16, u16)>,
    /// (type, code), for ICMP and ICMPv6.
    pub(super) icmp: Option<(u8, u8)>,
}

impl Packet {
    pub(super) fn v6(&self) -> bool {
        self.src.is_ipv6()
    }

    pub(super) fn addr(&self, side: Side) -> IpAddr {
        match side {
            Side::Source => self.src,
            Side::Destination => self.dst,
        }
    }

    pub(super) fn port(&self, side: Side) -> Option<u16> {
        self.ports.map(|(s, d)| match side {
            Side::Source => s,
            Side::Destination => d,
        })
    }
}

/// What happened to a packet: allowed or not, and the prefixes of the
/// logs written on the way, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) allowed: bool,
    pub(super) logs: Vec<String>,
}

#[derive(Debug, Clone)]
pub(super) struct Cluster {
    pub(super) namespaces: NamespaceLabels,
    pub(super) endpoints: Vec<Endpoint>,
    /// NetworkSets and GlobalNetworkSets.
    pub(super) net_sets: Vec<NetSet>,
}

impl Cluster {
    pub(super) fn holder(&self, a: IpAddr) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.addrs.contains(&a))
    }

    pub(super) fn local(&self, a: IpAddr) -> Option<&Endpoint> {
        self.holder(a).filter(|e| e.interface.is_some())
    }
}

// ---------------------------------------------------------------------
// The interpreter of a compiled ruleset

/// A value read from a packet, or written on the right of a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    Num(u32),
    Addr(IpAddr),
    /// `meta nfproto`: IPv6 or not.
    Family(bool),
}

/// The packet's value for a field; `None` when the packet has no such
/// header (nftables then breaks the rule: it does not match, whatever
/// the operator).
fn field(e: &Expression<'_>, p: &Packet) -> Option<Val> {
    let Expression::Named(named) = e else {
        panic!("interpreter: unknown field expression {e:?}");
    };
    match named {
        NamedExpression::Meta(Meta { key }) => match key {
            MetaKey::Nfproto => Some(Val::Family(p.v6())),
            MetaKey::L4proto => Some(Val::Num(u32::from(p.proto))),
            other => panic!("interpreter: unknown meta key {other:?}"),
        },
        NamedExpression::Payload(Payload::PayloadField(f)) => {
            let (v6, proto) = (p.v6(), p.proto);
            match (f.protocol.as_ref(), f.field.as_ref()) {
                ("ip", "saddr") => (!v6).then_some(Val::Addr(p.src)),
                ("ip", "daddr") => (!v6).then_some(Val::Addr(p.dst)),
                ("ip6", "saddr") => v6.then_some(Val::Addr(p.src)),
                ("ip6", "daddr") => v6.then_some(Val::Addr(p.dst)),
                ("th", "sport") => p.ports.map(|(s, _)| Val::Num(u32::from(s))),
                ("th", "dport") => p.ports.map(|(_, d)| Val::Num(u32::from(d))),
                (hdr @ ("icmp" | "icmpv6"), f) => {
                    let want = if hdr == "icmpv6" {
                        (true, 58)
                    } else {
                        (false, 1)
                    };
                    if (v6, proto) != want {
                        return None;
                    }
                    let (t, c) = p.icmp.expect("an ICMP packet has a type and code");
                    match f {
                        "type" => Some(Val::Num(u32::from(t))),
                        "code" => Some(Val::Num(u32::from(c))),
                        other => panic!("interpreter: unknown ICMP field {other}"),
                    }
                }
                other => panic!("interpreter: unknown payload field {other:?}"),
            }
        }
        other => panic!("interpreter: unknown field expression {other:?}"),
    }
}

/// An immediate on the right of a match: a number or an address.
fn immediate(e: &Expression<'_>) -> Val {
    match e {
        Expression::Number(n) => Val::Num(*n),
        Expression::String(s) => match s.as_ref() {
            "ipv4" => Val::Family(false),
            "ipv6" => Val::Family(true),
            text => Val::Addr(
                text.parse()
                    .unwrap_or_else(|_| panic!("interpreter: unknown string {text:?}")),
            ),
        },
        other => panic!("interpreter: unknown immediate {other:?}"),
    }
}

/// `a <= b` for values of one kind (addresses of one family).
fn at_most(a: Val, b: Val) -> bool {
    match (a, b) {
        (Val::Num(x), Val::Num(y)) => x <= y,
        (Val::Addr(x), Val::Addr(y)) if x.is_ipv6() == y.is_ipv6() => x <= y,
        _ => panic!("interpreter: comparing {a:?} with {b:?}"),
    }
}

fn same_kind(a: Val, b: Val) -> bool {
    match (a, b) {
        (Val::Num(_), Val::Num(_)) | (Val::Family(_), Val::Family(_)) => true,
        (Val::Addr(x), Val::Addr(y)) => x.is_ipv6() == y.is_ipv6(),
        _ => false,
    }
}

/// Whether one value matches one item: a value, a prefix or a range.
fn value_matches(item: &Expression<'_>, v: Val) -> bool {
    match item {
        Expression::Named(NamedExpression::Prefix(pf)) => {
            let Val::Addr(base) = immediate(&pf.addr) else {
                panic!("interpreter: prefix of a non-address {pf:?}");
            };
            let net = IpNet::new(base, pf.len as u8).expect("a valid prefix");
            let Val::Addr(a) = v else {
                panic!("interpreter: prefix {pf:?} against {v:?}");
            };
            assert_eq!(a.is_ipv6(), base.is_ipv6(), "prefix of the wrong family");
            net.contains(&a)
        }
        Expression::Range(r) => {
            let (lo, hi) = (immediate(&r.range[0]), immediate(&r.range[1]));
            at_most(lo, v) && at_most(v, hi)
        }
        other => {
            let w = immediate(other);
            assert!(same_kind(v, w), "interpreter: comparing {v:?} with {w:?}");
            v == w
        }
    }
}

/// Whether the key `vals` matches one element of an anonymous set (or
/// the right side of a match when it is no set).
fn element_matches(e: &Expression<'_>, vals: &[Val]) -> bool {
    match e {
        Expression::Named(NamedExpression::Concat(parts)) => {
            assert_eq!(parts.len(), vals.len(), "interpreter: key width {e:?}");
            parts.iter().zip(vals).all(|(p, v)| value_matches(p, *v))
        }
        other => {
            assert_eq!(vals.len(), 1, "interpreter: key width {other:?}");
            value_matches(other, vals[0])
        }
    }
}

fn in_span<T: PartialOrd + Copy>(v: T, (lo, hi): (T, T)) -> bool {
    lo <= v && v <= hi
}

/// Whether the key `vals` is in the named set `def`.
fn set_contains(name: &str, def: &SetDef, vals: &[Val]) -> bool {
    let (v6, width) = match def.kind {
        SetKind::Addr { v6, .. } => (v6, 1),
        SetKind::Port { v6 } => (v6, 3),
        SetKind::Run { v6, ports } => (v6, if ports { 3 } else { 2 }),
    };
    assert_eq!(
        vals.len(),
        width,
        "interpreter: key {vals:?} for set {name}"
    );
    let Val::Addr(a) = vals[0] else {
        panic!("interpreter: key {vals:?} for set {name}");
    };
    assert_eq!(a.is_ipv6(), v6, "interpreter: key {vals:?} for set {name}");
    let num = |i: usize| match vals[i] {
        Val::Num(n) => n,
        other => panic!("interpreter: {other:?} in key for set {name}"),
    };
    def.elements.iter().any(|e| match (e, def.kind) {
        (Element::Range(lo, hi), SetKind::Addr { .. }) => {
            assert_eq!(
                (lo.is_ipv6(), hi.is_ipv6()),
                (v6, v6),
                "element {e:?} in set {name}"
            );
            in_span(a, (*lo, *hi))
        }
        (Element::Port(x, proto, port), SetKind::Port { .. }) => {
            a == *x && num(1) == u32::from(*proto) && num(2) == u32::from(*port)
        }
        (
            Element::Span {
                addrs,
                protos,
                ports,
            },
            SetKind::Run { ports: ported, .. },
        ) => {
            assert_eq!(ports.is_some(), ported, "element {e:?} in set {name}");
            in_span(a, *addrs)
                && in_span(num(1), (u32::from(protos.0), u32::from(protos.1)))
                && ports.is_none_or(|(lo, hi)| in_span(num(2), (u32::from(lo), u32::from(hi))))
        }
        _ => panic!(
            "interpreter: element {e:?} in set {name} of kind {:?}",
            def.kind
        ),
    })
}

/// Whether the right side of a match holds the key `vals`.
fn right_matches(rs: &Ruleset, right: &Expression<'_>, vals: &[Val]) -> bool {
    match right {
        Expression::String(s) if s.starts_with('@') => {
            let name = &s[1..];
            let def = rs
                .sets
                .get(name)
                .unwrap_or_else(|| panic!("interpreter: no set {name}"));
            set_contains(name, def, vals)
        }
        Expression::Named(NamedExpression::Set(items)) => items.iter().any(|it| match it {
            SetItem::Element(e) => element_matches(e, vals),
            other => panic!("interpreter: unknown set item {other:?}"),
        }),
        other => element_matches(other, vals),
    }
}

/// How a rule ends.
enum Flow {
    /// It did not match, or matched without a verdict: the next rule.
    Next,
    /// A `goto` whose chain ended without a verdict: the calling chain
    /// ends too.
    Return,
    Verdict(bool),
}

struct Interpreter<'a> {
    rs: &'a Ruleset,
    logs: Vec<String>,
    /// The chains entered, for the statistics.
    entered: Vec<String>,
}

impl Interpreter<'_> {
    /// Walks `chain`: `Some(accept)` for a verdict, `None` when it ends
    /// without one.
    fn chain(&mut self, name: &str, p: &Packet, depth: usize) -> Option<bool> {
        assert!(depth < 16, "interpreter: chains nested too deep at {name}");
        if name == OPEN_CHAIN {
            assert!(!self.rs.chains.contains_key(name));
            return None;
        }
        let rules = self
            .rs
            .chains
            .get(name)
            .unwrap_or_else(|| panic!("interpreter: no chain {name}"))
            .clone();
        self.entered.push(name.to_string());
        for rule in rules.iter() {
            match self.rule(rule, p, depth) {
                Flow::Next => {}
                Flow::Return => return None,
                Flow::Verdict(v) => return Some(v),
            }
        }
        None
    }

    fn rule(&mut self, rule: &[Statement<'_>], p: &Packet, depth: usize) -> Flow {
        for (i, st) in rule.iter().enumerate() {
            let last = i + 1 == rule.len();
            let verdict = |what: &str| {
                assert!(last, "interpreter: {what} before the end of {rule:?}");
            };
            match st {
                Statement::Match(m) => {
                    let key: Option<Vec<Val>> = match &m.left {
                        Expression::Named(NamedExpression::Concat(parts)) => {
                            parts.iter().map(|f| field(f, p)).collect()
                        }
                        single => field(single, p).map(|v| vec![v]),
                    };
                    let Some(key) = key else {
                        return Flow::Next;
                    };
                    let hit = right_matches(self.rs, &m.right, &key);
                    let holds = match m.op {
                        Operator::EQ => hit,
                        Operator::NEQ => !hit,
                        other => panic!("interpreter: unknown operator {other:?}"),
                    };
                    if !holds {
                        return Flow::Next;
                    }
                }
                Statement::Log(l) => self.logs.push(
                    l.as_ref()
                        .and_then(|l| l.prefix.as_deref())
                        .unwrap_or("")
                        .to_string(),
                ),
                Statement::Accept(None) => {
                    verdict("accept");
                    return Flow::Verdict(true);
                }
                Statement::Drop(None) => {
                    verdict("drop");
                    return Flow::Verdict(false);
                }
                Statement::Jump(t) => {
                    verdict("jump");
                    return match self.chain(&t.target, p, depth + 1) {
                        Some(v) => Flow::Verdict(v),
                        None => Flow::Next,
                    };
                }
                Statement::Goto(t) => {
                    verdict("goto");
                    return match self.chain(&t.target, p, depth + 1) {
                        Some(v) => Flow::Verdict(v),
                        None => Flow::Return,
                    };
                }
                other => panic!("interpreter: unknown statement {other:?}"),
            }
        }
        Flow::Next
    }
}

/// The packet through the table: the sender's egress chain (when it is
/// local), then the receiver's ingress chain (when it is local). A chain
/// ending without a verdict lets the packet go on.
pub(super) fn interpret(rs: &Ruleset, cl: &Cluster, p: &Packet) -> (Outcome, Vec<String>) {
    let mut it = Interpreter {
        rs,
        logs: Vec::new(),
        entered: Vec::new(),
    };
    let mut allowed = true;
    if let Some(ep) = cl.local(p.src) {
        let iface = ep.interface.as_ref().unwrap();
        let chain = rs
            .from_endpoint
            .get(iface)
            .unwrap_or_else(|| panic!("{iface} not in from_endpoint"));
        allowed = it.chain(chain, p, 0) != Some(false);
    }
    if allowed && let Some(ep) = cl.local(p.dst) {
        let iface = ep.interface.as_ref().unwrap();
        let chain = rs
            .to_endpoint
            .get(iface)
            .unwrap_or_else(|| panic!("{iface} not in to_endpoint"));
        allowed = it.chain(chain, p, 0) != Some(false);
    }
    let outcome = Outcome {
        allowed,
        logs: it.logs,
    };
    (outcome, it.entered)
}

/// The kernel refuses overlapping elements in an interval set: every run
/// set's boxes, and every interval address set's ranges, must be disjoint
/// (an address set's ranges are not even adjacent: they are merged). A
/// plain address set holds single addresses only.
pub(super) fn check_disjoint(rs: &Ruleset) -> Result<(), String> {
    for (name, def) in &rs.sets {
        if let SetKind::Addr { ranges: false, .. } = def.kind {
            if let Some(e) = def
                .elements
                .iter()
                .find(|e| !matches!(e, Element::Range(lo, hi) if lo == hi))
            {
                return Err(format!("plain set {name} holds {e:?}"));
            }
            continue;
        }
        let spans: Vec<&Element> = def.elements.iter().collect();
        for (i, a) in spans.iter().enumerate() {
            for b in &spans[i + 1..] {
                let meet = |x: (u32, u32), y: (u32, u32)| x.0 <= y.1 && y.0 <= x.1;
                let clash = match (a, b) {
                    (
                        Element::Span {
                            addrs: a1,
                            protos: p1,
                            ports: q1,
                        },
                        Element::Span {
                            addrs: a2,
                            protos: p2,
                            ports: q2,
                        },
                    ) => {
                        let addrs_meet = a1.0 <= a2.1 && a2.0 <= a1.1;
                        let protos_meet = meet(
                            (u32::from(p1.0), u32::from(p1.1)),
                            (u32::from(p2.0), u32::from(p2.1)),
                        );
                        let ports_meet = match (q1, q2) {
                            (Some(x), Some(y)) => meet(
                                (u32::from(x.0), u32::from(x.1)),
                                (u32::from(y.0), u32::from(y.1)),
                            ),
                            _ => true,
                        };
                        addrs_meet && protos_meet && ports_meet
                    }
                    (Element::Range(lo1, hi1), Element::Range(lo2, hi2)) => {
                        let n = |x: &IpAddr| crate::compile::boxes::addr_number(*x);
                        lo1 > hi1
                            || lo2 > hi2
                            || (n(lo1) <= n(hi2).saturating_add(1)
                                && n(lo2) <= n(hi1).saturating_add(1))
                    }
                    _ => false,
                };
                if clash {
                    return Err(format!("set {name}: {a:?} overlaps or touches {b:?}"));
                }
            }
        }
    }
    Ok(())
}
