//! The service table `ip tartan-svc` as transactions of the typed
//! nftables model (tartan-nft).
//!
//! The chain count does not grow with Services or endpoints: the map
//! `frontends` keyed by `address . protocol . port` gives a new
//! connection's picker id (into the mark), and the verdict map
//! `fe_pickers` sends it to a chain per endpoint *count* (`fe_3`: pick
//! slot `numgen random mod 3`),
//! and two maps keyed by `frontend . slot` give the endpoint's address
//! and port for the DNAT. nft 1.0.6 cannot load maps whose value is a
//! concatenation from JSON, hence two maps with scalar values. NodePorts
//! have the same shape keyed by `protocol . port`.
//!
//! ```text
//! chain prerouting { type nat hook prerouting priority dstnat
//!   iifname "tar*" iifname != "tartan*"            # from this node's pods
//!     meta mark set ip daddr . meta l4proto . th dport map @frontends_in meta mark vmap @fe_pickers
//!   meta mark set ip daddr . meta l4proto . th dport map @frontends meta mark vmap @fe_pickers
//!   iifname "tar*" iifname != "tartan*" fib daddr type local ip daddr != 127.0.0.0/8
//!     meta mark set meta l4proto . th dport map @node_ports_in meta mark vmap @np_pickers
//!   fib daddr type local ip daddr != 127.0.0.0/8
//!     meta mark set meta l4proto . th dport map @node_ports meta mark vmap @np_pickers }
//! chain output      { the same, for the node's own connections (all inside) }
//! chain fe_2        { meta mark set numgen random mod 2; goto fe_dnat }
//! chain fe_dnat     { dnat ip to <fe_addr[daddr.proto.dport.mark]> : <fe_port[…]> }
//! chain postrouting { type nat hook postrouting priority srcnat
//!   ct status dnat ip saddr . ip daddr @hairpin masquerade     # a pod reaching itself
//!   ct status dnat goto masq_external }   # from outside (not a pod), on to another node (not a pod)
//! chain filter_prerouting { type filter hook prerouting priority -110
//!   a LoadBalancer IP with loadBalancerSourceRanges drops other clients }
//! chain input/forward/local { type filter …: frontends without endpoints
//!   rejected (TCP reset, ICMP port unreachable); those whose traffic
//!   policy allows no endpoint here dropped }
//! ```
//!
//! Session affinity: dynamic sets `aff_<slot>` of `client . frontend`
//! with the Service's timeout; a chain per (count, timeout) looks the
//! client up in each slot's set before picking at random, and records
//! the pick.
//!
//! The slot is carried in the packet mark (only in the NAT chains, on a
//! connection's first packet).
//!
//! `externalTrafficPolicy: Local` governs external clients only: the maps
//! `frontends_in` and `node_ports_in` send this node's pods and the node
//! itself to the cluster-wide endpoints of such a Service (kube-proxy's
//! short-circuit). Their picking chains (`fe_3_in`) pick slots from
//! [`INSIDE_SLOTS`] up, so both endpoint lists share the slot maps.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use nftables::expr::{
    CT, Elem, Expression, Fib, FibFlag, FibResult, MetaKey, NamedExpression, NgMode, Numgen,
    Prefix, Verdict,
};
use nftables::schema::{
    Chain, Element, FlushObject, Map, NfCmd, NfListObject, Rule, Set, SetFlag, SetType,
    SetTypeValue, Table,
};
use nftables::stmt::{
    JumpTarget, Mangle, Match, NAT, NATFamily, Operator, Reject, RejectType, SetOp, Statement,
};
use nftables::types::{NfChainPolicy, NfChainType, NfFamily, NfHook, RejectCode};
use tartan_nft::model::VerdictMap;
use tartan_nft::{Command, Transaction};
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::{concat, goto, meta, payload, s};

use super::{Backend, Dispatch, ServiceTable, TCP};

pub const TABLE: &str = "tartan-svc";

type Frontend = (Ipv4Addr, u8, u16);
type NodePort = (u8, u16);

/// Where the slots of inside pickers start ([`Picker::inside`]): above
/// any endpoint count, below the picker id's flag bits.
pub const INSIDE_SLOTS: u32 = 1 << 24;

/// Which map family a chain serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Frontend,
    NodePort,
}

/// A picking chain: for `count` endpoints, with session affinity of
/// `affinity` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Picker {
    pub kind: Kind,
    pub count: u32,
    pub affinity: Option<u32>,
    /// For clients inside the cluster of an external frontend with
    /// `externalTrafficPolicy: Local`: picks slots from [`INSIDE_SLOTS`].
    pub inside: bool,
}

/// Endpoints a Service with session affinity can have in its picker id.
pub const MAX_AFFINITY_ENDPOINTS: usize = (1 << 13) - 1;

impl Picker {
    /// The number `frontends` and `node_ports` map a frontend to, and the
    /// `fe_pickers`/`np_pickers` key of this chain: the count, or with
    /// affinity bit 31, the timeout (at most a day: 17 bits) from bit 13
    /// and the count (below 8,192) under it; bit 30 for an inside picker.
    pub fn id(&self) -> u32 {
        let id = match self.affinity {
            None => self.count & (INSIDE_SLOTS - 1),
            Some(t) => {
                0x8000_0000
                    | (t.min(super::MAX_AFFINITY_SECONDS) << 13)
                    | (self.count & MAX_AFFINITY_ENDPOINTS as u32)
            }
        };
        if self.inside { id | 0x4000_0000 } else { id }
    }

    /// The first slot this chain picks.
    pub fn first_slot(&self) -> u32 {
        if self.inside { INSIDE_SLOTS } else { 0 }
    }

    pub fn chain(&self) -> String {
        let k = match self.kind {
            Kind::Frontend => "fe",
            Kind::NodePort => "np",
        };
        let inside = if self.inside { "_in" } else { "" };
        match self.affinity {
            None => format!("{k}_{}{inside}", self.count),
            Some(t) => format!("{k}_{}_a{t}{inside}", self.count),
        }
    }
}

/// Picking chains without affinity for 1 to this many endpoints are
/// always in the table, used or not: an endpoint added to or removed from
/// a Service then only repoints its frontend (map elements, written over
/// netlink in microseconds), where making or removing a chain costs an
/// `nft` run (20–30 ms). 64 chains of two rules cost nothing to keep.
pub const STANDING_PICKERS: u32 = 32;

/// The picking chains the table holds: those in use and the standing ones.
pub fn written_pickers(used: &BTreeSet<Picker>) -> BTreeSet<Picker> {
    let mut all = used.clone();
    for kind in [Kind::Frontend, Kind::NodePort] {
        for count in 1..=STANDING_PICKERS {
            all.insert(Picker {
                kind,
                count,
                affinity: None,
                inside: false,
            });
        }
    }
    all
}

/// The endpoints a frontend picks from: all of them, or with session
/// affinity the first [`MAX_AFFINITY_ENDPOINTS`] (the picker id has room
/// for no more).
fn capped(backends: &[Backend], affinity: Option<u32>) -> &[Backend] {
    match affinity {
        Some(_) => &backends[..backends.len().min(MAX_AFFINITY_ENDPOINTS)],
        None => backends,
    }
}

/// The table as flat maps, sets and chains, for writing and diffing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SvcNft {
    /// Frontend → its picking chain (written as the chain's id).
    pub frontends: BTreeMap<Frontend, Picker>,
    pub node_ports: BTreeMap<NodePort, Picker>,
    /// Inside clients' pickers of `Local` external frontends (their slots
    /// from [`INSIDE_SLOTS`] in `fe_slots` / `np_slots`).
    pub frontends_in: BTreeMap<Frontend, Picker>,
    pub node_ports_in: BTreeMap<NodePort, Picker>,
    pub fe_slots: BTreeMap<(Frontend, u32), Backend>,
    pub np_slots: BTreeMap<(NodePort, u32), Backend>,
    pub reject_fe: BTreeSet<Frontend>,
    pub drop_fe: BTreeSet<Frontend>,
    pub reject_np: BTreeSet<NodePort>,
    pub drop_np: BTreeSet<NodePort>,
    pub hairpin: BTreeSet<Ipv4Addr>,
    /// Frontends limited to some client networks, and each allowed
    /// (frontend, network).
    pub lb_limited: BTreeSet<Frontend>,
    pub lb_allowed: BTreeSet<(Frontend, Ipv4Net)>,
    pub pickers: BTreeSet<Picker>,
    /// How many `aff_<slot>` sets (the largest count with affinity).
    pub affinity_slots: u32,
}

impl SvcNft {
    pub fn from_table(t: &ServiceTable) -> SvcNft {
        let mut n = SvcNft {
            hairpin: t.local_pods.clone(),
            ..SvcNft::default()
        };
        for (fe, d) in &t.frontends {
            match d {
                Dispatch::Reject => {
                    n.reject_fe.insert(*fe);
                }
                Dispatch::Drop => {
                    n.drop_fe.insert(*fe);
                }
                Dispatch::Backends { backends, affinity } => {
                    let backends = capped(backends, *affinity);
                    let p = n.picker(Kind::Frontend, backends.len(), *affinity, false);
                    n.frontends.insert(*fe, p);
                    for (i, b) in backends.iter().enumerate() {
                        n.fe_slots.insert((*fe, i as u32), *b);
                    }
                }
            }
        }
        for (fe, d) in &t.frontends_in {
            if let Dispatch::Backends { backends, affinity } = d {
                let backends = capped(backends, *affinity);
                let p = n.picker(Kind::Frontend, backends.len(), *affinity, true);
                n.frontends_in.insert(*fe, p);
                for (i, b) in backends.iter().enumerate() {
                    n.fe_slots.insert((*fe, INSIDE_SLOTS + i as u32), *b);
                }
            }
        }
        for (np, d) in &t.node_ports_in {
            if let Dispatch::Backends { backends, affinity } = d {
                let backends = capped(backends, *affinity);
                let p = n.picker(Kind::NodePort, backends.len(), *affinity, true);
                n.node_ports_in.insert(*np, p);
                for (i, b) in backends.iter().enumerate() {
                    n.np_slots.insert((*np, INSIDE_SLOTS + i as u32), *b);
                }
            }
        }
        for (fe, nets) in &t.source_ranges {
            n.lb_limited.insert(*fe);
            n.lb_allowed.extend(nets.iter().map(|net| (*fe, *net)));
        }
        for (np, d) in &t.node_ports {
            match d {
                Dispatch::Reject => {
                    n.reject_np.insert(*np);
                }
                Dispatch::Drop => {
                    n.drop_np.insert(*np);
                }
                Dispatch::Backends { backends, affinity } => {
                    let backends = capped(backends, *affinity);
                    let p = n.picker(Kind::NodePort, backends.len(), *affinity, false);
                    n.node_ports.insert(*np, p);
                    for (i, b) in backends.iter().enumerate() {
                        n.np_slots.insert((*np, i as u32), *b);
                    }
                }
            }
        }
        n
    }

    /// Take `part`'s entries out (those it holds with the same value).
    pub fn remove(&mut self, part: &SvcNft) {
        fn out<K: Ord, V: PartialEq>(m: &mut BTreeMap<K, V>, part: &BTreeMap<K, V>) {
            for (k, v) in part {
                if m.get(k) == Some(v) {
                    m.remove(k);
                }
            }
        }
        out(&mut self.frontends, &part.frontends);
        out(&mut self.node_ports, &part.node_ports);
        out(&mut self.frontends_in, &part.frontends_in);
        out(&mut self.node_ports_in, &part.node_ports_in);
        out(&mut self.fe_slots, &part.fe_slots);
        out(&mut self.np_slots, &part.np_slots);
        for (set, p) in [
            (&mut self.reject_fe, &part.reject_fe),
            (&mut self.drop_fe, &part.drop_fe),
        ] {
            set.retain(|k| !p.contains(k));
        }
        for (set, p) in [
            (&mut self.reject_np, &part.reject_np),
            (&mut self.drop_np, &part.drop_np),
        ] {
            set.retain(|k| !p.contains(k));
        }
        self.lb_limited.retain(|k| !part.lb_limited.contains(k));
        self.lb_allowed.retain(|k| !part.lb_allowed.contains(k));
    }

    /// Put `part`'s entries in (its pickers are counted by the caller).
    pub fn add(&mut self, part: &SvcNft) {
        self.frontends.extend(part.frontends.clone());
        self.node_ports.extend(part.node_ports.clone());
        self.frontends_in.extend(part.frontends_in.clone());
        self.node_ports_in.extend(part.node_ports_in.clone());
        self.fe_slots.extend(part.fe_slots.clone());
        self.np_slots.extend(part.np_slots.clone());
        self.reject_fe.extend(part.reject_fe.iter().copied());
        self.drop_fe.extend(part.drop_fe.iter().copied());
        self.reject_np.extend(part.reject_np.iter().copied());
        self.drop_np.extend(part.drop_np.iter().copied());
        self.lb_limited.extend(part.lb_limited.iter().copied());
        self.lb_allowed.extend(part.lb_allowed.iter().copied());
    }

    fn picker(&mut self, kind: Kind, count: usize, affinity: Option<u32>, inside: bool) -> Picker {
        let p = Picker {
            kind,
            count: count as u32,
            affinity,
            inside,
        };
        if affinity.is_some() {
            self.affinity_slots = self.affinity_slots.max(p.count);
        }
        self.pickers.insert(p);
        p
    }
}

fn n(v: u32) -> Expression<'static> {
    Expression::Number(v)
}

fn lookup(key: Expression<'static>, map: &str) -> Expression<'static> {
    Expression::Named(NamedExpression::Map(Box::new(nftables::expr::Map {
        key,
        data: s(format!("@{map}")),
    })))
}

fn is(left: Expression<'static>, right: Expression<'static>, op: Operator) -> Statement<'static> {
    Statement::Match(Match { left, right, op })
}

/// `ip daddr . meta l4proto . th dport`.
fn frontend_key() -> Expression<'static> {
    concat(vec![
        payload("ip", "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

fn node_port_key() -> Expression<'static> {
    concat(vec![meta(MetaKey::L4proto), payload("th", "dport")])
}

fn local_destination() -> Vec<Statement<'static>> {
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

fn fe_elem(fe: &Frontend) -> Vec<Expression<'static>> {
    vec![s(fe.0.to_string()), n(u32::from(fe.1)), n(u32::from(fe.2))]
}

fn np_elem(np: &NodePort) -> Vec<Expression<'static>> {
    vec![n(u32::from(np.0)), n(u32::from(np.1))]
}

fn key_of(parts: Vec<Expression<'static>>) -> Expression<'static> {
    if parts.len() == 1 {
        parts.into_iter().next().unwrap_or(n(0))
    } else {
        concat(parts)
    }
}

fn mapping(key: Vec<Expression<'static>>, value: Expression<'static>) -> Expression<'static> {
    Expression::List(vec![key_of(key), value])
}

/// A picking chain's entry in `fe_pickers` / `np_pickers`.
fn picker_entry(p: &Picker) -> NfListObject<'static> {
    let map = match p.kind {
        Kind::Frontend => "fe_pickers",
        Kind::NodePort => "np_pickers",
    };
    element_cmd(map, vec![mapping(vec![n(p.id())], goto_value(&p.chain()))])
}

fn goto_value(chain: &str) -> Expression<'static> {
    Expression::Verdict(Verdict::Goto(JumpTarget {
        target: Cow::Owned(chain.to_string()),
    }))
}

/// Render one map's entries.
fn map_elems<'a, K: 'a, V: 'a>(
    items: impl IntoIterator<Item = (&'a K, &'a V)>,
    key: impl Fn(&K) -> Vec<Expression<'static>>,
    value: impl Fn(&V) -> Expression<'static>,
) -> Vec<Expression<'static>> {
    items
        .into_iter()
        .map(|(k, v)| mapping(key(k), value(v)))
        .collect()
}

fn slot_key<K>(
    base: impl Fn(&K) -> Vec<Expression<'static>>,
) -> impl Fn(&(K, u32)) -> Vec<Expression<'static>> {
    move |(k, i)| {
        let mut key = base(k);
        key.push(n(*i));
        key
    }
}

fn hairpin_elem(a: &Ipv4Addr) -> Vec<Expression<'static>> {
    vec![s(a.to_string()), s(a.to_string())]
}

/// Entries of `new` that `old` lacks or holds with another value, and
/// entries of `old` that `new` lacks or holds with another value.
type Entries<'a, K, V> = Vec<(&'a K, &'a V)>;

fn changed<'a, K: Ord, V: PartialEq>(
    old: &'a BTreeMap<K, V>,
    new: &'a BTreeMap<K, V>,
) -> (Entries<'a, K, V>, Entries<'a, K, V>) {
    let gone = old
        .iter()
        .filter(|(k, v)| new.get(*k) != Some(*v))
        .collect();
    let came = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .collect();
    (gone, came)
}

/// Per named set or map: the elements to delete and to add to go from
/// `old` to `new` (with `old` empty: every element of `new`).
fn element_changes(
    old: &SvcNft,
    new: &SvcNft,
) -> Vec<(
    &'static str,
    Vec<Expression<'static>>,
    Vec<Expression<'static>>,
)> {
    let mut out = Vec::new();
    let id = |p: &Picker| n(p.id());
    let addr = |b: &Backend| s(b.addr.to_string());
    let port = |b: &Backend| n(u32::from(b.port));
    let (g, c) = changed(&old.frontends, &new.frontends);
    out.push((
        "frontends",
        map_elems(g, fe_elem, id),
        map_elems(c, fe_elem, id),
    ));
    let (g, c) = changed(&old.node_ports, &new.node_ports);
    out.push((
        "node_ports",
        map_elems(g, np_elem, id),
        map_elems(c, np_elem, id),
    ));
    let (g, c) = changed(&old.frontends_in, &new.frontends_in);
    out.push((
        "frontends_in",
        map_elems(g, fe_elem, id),
        map_elems(c, fe_elem, id),
    ));
    let (g, c) = changed(&old.node_ports_in, &new.node_ports_in);
    out.push((
        "node_ports_in",
        map_elems(g, np_elem, id),
        map_elems(c, np_elem, id),
    ));
    let (g, c) = changed(&old.fe_slots, &new.fe_slots);
    out.push((
        "fe_addr",
        map_elems(g.clone(), slot_key(fe_elem), addr),
        map_elems(c.clone(), slot_key(fe_elem), addr),
    ));
    out.push((
        "fe_port",
        map_elems(g, slot_key(fe_elem), port),
        map_elems(c, slot_key(fe_elem), port),
    ));
    let (g, c) = changed(&old.np_slots, &new.np_slots);
    out.push((
        "np_addr",
        map_elems(g.clone(), slot_key(np_elem), addr),
        map_elems(c.clone(), slot_key(np_elem), addr),
    ));
    out.push((
        "np_port",
        map_elems(g, slot_key(np_elem), port),
        map_elems(c, slot_key(np_elem), port),
    ));
    fn set_changes<K: Ord>(
        name: &'static str,
        old: &BTreeSet<K>,
        new: &BTreeSet<K>,
        key: impl Fn(&K) -> Vec<Expression<'static>>,
    ) -> (
        &'static str,
        Vec<Expression<'static>>,
        Vec<Expression<'static>>,
    ) {
        (
            name,
            old.difference(new).map(|k| key_of(key(k))).collect(),
            new.difference(old).map(|k| key_of(key(k))).collect(),
        )
    }
    out.push(set_changes(
        "reject_fe",
        &old.reject_fe,
        &new.reject_fe,
        fe_elem,
    ));
    out.push(set_changes("drop_fe", &old.drop_fe, &new.drop_fe, fe_elem));
    out.push(set_changes(
        "reject_np",
        &old.reject_np,
        &new.reject_np,
        np_elem,
    ));
    out.push(set_changes("drop_np", &old.drop_np, &new.drop_np, np_elem));
    out.push(set_changes(
        "hairpin",
        &old.hairpin,
        &new.hairpin,
        hairpin_elem,
    ));
    out.push(set_changes(
        "lb_limited",
        &old.lb_limited,
        &new.lb_limited,
        fe_elem,
    ));
    out.push(set_changes(
        "lb_allowed",
        &old.lb_allowed,
        &new.lb_allowed,
        |(fe, net)| {
            let mut k = fe_elem(fe);
            k.push(Expression::Named(NamedExpression::Prefix(Prefix {
                addr: Box::new(s(net.network().to_string())),
                len: u32::from(net.prefix_len()),
            })));
            k
        },
    ));
    out
}

fn types(parts: &[SetType]) -> SetTypeValue<'static> {
    if parts.len() == 1 {
        SetTypeValue::Single(parts[0])
    } else {
        SetTypeValue::Concatenated(Cow::Owned(parts.to_vec()))
    }
}

const FE: &[SetType] = &[SetType::Ipv4Addr, SetType::InetProto, SetType::InetService];
const FE_SLOT: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
    SetType::Mark,
];
const NP: &[SetType] = &[SetType::InetProto, SetType::InetService];
const NP_SLOT: &[SetType] = &[SetType::InetProto, SetType::InetService, SetType::Mark];
/// A LoadBalancer frontend and a client network.
const FE_CLIENT_NET: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
    SetType::Ipv4Addr,
];
const CLIENT_FE: &[SetType] = &[
    SetType::Ipv4Addr,
    SetType::Ipv4Addr,
    SetType::InetProto,
    SetType::InetService,
];

fn table() -> Table<'static> {
    Table {
        family: NfFamily::IP,
        name: Cow::Borrowed(TABLE),
        handle: None,
    }
}

fn chain(name: &str) -> Chain<'static> {
    Chain {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        ..Chain::default()
    }
}

fn base(name: &str, t: NfChainType, hook: NfHook, prio: i32) -> Chain<'static> {
    Chain {
        _type: Some(t),
        hook: Some(hook),
        prio: Some(prio),
        policy: Some(NfChainPolicy::Accept),
        ..chain(name)
    }
}

fn rule(chain: &str, expr: Vec<Statement<'static>>) -> Command {
    add(NfListObject::Rule(Rule {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        chain: Cow::Owned(chain.to_string()),
        expr: Cow::Owned(expr),
        ..Rule::default()
    }))
}

fn add(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Add(o))
}

fn del(o: NfListObject<'static>) -> Command {
    Command::Nft(NfCmd::Delete(o))
}

fn element_cmd(name: &str, elem: Vec<Expression<'static>>) -> NfListObject<'static> {
    NfListObject::Element(Element {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(name.to_string()),
        elem: Cow::Owned(elem),
    })
}

/// The named sets and maps: name, key type, value type (`None`: a set;
/// `Some(None)`: a verdict map, declared in plain JSON since the crate
/// has no verdict type).
/// Value type of a declaration: `None` a set, `Some(None)` a verdict
/// map, `Some(Some(t))` a map to `t`.
type MapValue = Option<Option<SetType>>;

fn declarations() -> Vec<(&'static str, &'static [SetType], MapValue)> {
    vec![
        ("frontends", FE, Some(Some(SetType::Mark))),
        ("node_ports", NP, Some(Some(SetType::Mark))),
        ("frontends_in", FE, Some(Some(SetType::Mark))),
        ("node_ports_in", NP, Some(Some(SetType::Mark))),
        ("fe_pickers", &[SetType::Mark], Some(None)),
        ("np_pickers", &[SetType::Mark], Some(None)),
        ("fe_addr", FE_SLOT, Some(Some(SetType::Ipv4Addr))),
        ("fe_port", FE_SLOT, Some(Some(SetType::InetService))),
        ("np_addr", NP_SLOT, Some(Some(SetType::Ipv4Addr))),
        ("np_port", NP_SLOT, Some(Some(SetType::InetService))),
        ("reject_fe", FE, None),
        ("drop_fe", FE, None),
        ("reject_np", NP, None),
        ("drop_np", NP, None),
        ("hairpin", &[SetType::Ipv4Addr, SetType::Ipv4Addr], None),
        ("lb_limited", FE, None),
    ]
}

fn declare(name: &str, key: &[SetType], value: MapValue) -> Command {
    let o = match value {
        None => NfListObject::Set(Box::new(Set {
            family: NfFamily::IP,
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(name.to_string()),
            set_type: types(key),
            ..Set::default()
        })),
        Some(None) => {
            return Command::AddVerdictMap(VerdictMap {
                family: NfFamily::IP,
                table: TABLE.to_string(),
                name: name.to_string(),
                key: key.to_vec(),
            });
        }
        Some(Some(v)) => NfListObject::Map(Box::new(Map {
            family: NfFamily::IP,
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(name.to_string()),
            set_type: types(key),
            map: SetTypeValue::Single(v),
            ..Map::default()
        })),
    };
    add(o)
}

fn affinity_set(i: u32) -> NfListObject<'static> {
    NfListObject::Set(Box::new(Set {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(format!("aff_{i}")),
        set_type: types(CLIENT_FE),
        flags: Some([SetFlag::Timeout].into()),
        ..Set::default()
    }))
}

fn set_mark(v: Expression<'static>) -> Statement<'static> {
    Statement::Mangle(Mangle {
        key: meta(MetaKey::Mark),
        value: v,
    })
}

/// The client and frontend of a packet, the key of the affinity sets.
fn client_key() -> Expression<'static> {
    concat(vec![
        payload("ip", "saddr"),
        payload("ip", "daddr"),
        meta(MetaKey::L4proto),
        payload("th", "dport"),
    ])
}

fn remember(slot: u32, timeout: u32) -> Statement<'static> {
    Statement::Set(nftables::stmt::Set {
        op: SetOp::Update,
        elem: Expression::Named(NamedExpression::Elem(Elem {
            val: Box::new(client_key()),
            timeout: Some(timeout),
            ..Elem::default()
        })),
        set: Cow::Owned(format!("@aff_{slot}")),
    })
}

fn dnat_chain(kind: Kind) -> &'static str {
    match kind {
        Kind::Frontend => "fe_dnat",
        Kind::NodePort => "np_dnat",
    }
}

fn picker_rules(p: &Picker) -> Vec<Vec<Statement<'static>>> {
    let first = p.first_slot();
    let random = set_mark(Expression::Named(NamedExpression::Numgen(Numgen {
        mode: NgMode::Random,
        ng_mod: p.count.max(1),
        offset: (first > 0).then_some(first),
    })));
    let dnat = goto(dnat_chain(p.kind));
    let Some(t) = p.affinity else {
        return vec![vec![random, dnat]];
    };
    let mut out = Vec::new();
    for i in 0..p.count {
        out.push(vec![
            is(client_key(), s(format!("@aff_{i}")), Operator::EQ),
            set_mark(n(first + i)),
            remember(i, t),
            dnat.clone(),
        ]);
    }
    out.push(vec![random]);
    for i in 0..p.count {
        out.push(vec![
            is(meta(MetaKey::Mark), n(first + i), Operator::EQ),
            remember(i, t),
        ]);
    }
    out.push(vec![dnat]);
    out
}

fn dnat_rules(kind: Kind) -> Vec<Statement<'static>> {
    let (key, addr, port) = match kind {
        Kind::Frontend => (
            vec![
                payload("ip", "daddr"),
                meta(MetaKey::L4proto),
                payload("th", "dport"),
                meta(MetaKey::Mark),
            ],
            "fe_addr",
            "fe_port",
        ),
        Kind::NodePort => (
            vec![
                meta(MetaKey::L4proto),
                payload("th", "dport"),
                meta(MetaKey::Mark),
            ],
            "np_addr",
            "np_port",
        ),
    };
    vec![Statement::DNAT(Some(NAT {
        addr: Some(lookup(concat(key.clone()), addr)),
        family: Some(NATFamily::IP),
        port: Some(lookup(concat(key), port)),
        flags: None,
    }))]
}

fn reject_rules(set: &str, key: Expression<'static>, local: bool) -> Vec<Vec<Statement<'static>>> {
    let mut m = if local { local_destination() } else { vec![] };
    m.push(is(key, s(format!("@{set}")), Operator::EQ));
    let tcp = is(meta(MetaKey::L4proto), n(u32::from(TCP)), Operator::EQ);
    let not_tcp = is(meta(MetaKey::L4proto), n(u32::from(TCP)), Operator::NEQ);
    // nft 1.0.6 crashes on a JSON reject of type icmpx without a code.
    let reject = |t, code| {
        Statement::Reject(Some(Reject {
            _type: Some(t),
            expr: code,
        }))
    };
    if set.starts_with("reject") {
        let mut a = m.clone();
        a.extend([tcp, reject(RejectType::TCPReset, None)]);
        let mut b = m;
        b.extend([
            not_tcp,
            reject(RejectType::ICMP, Some(RejectCode::PortUnreach)),
        ]);
        vec![a, b]
    } else {
        m.push(Statement::Drop(None));
        vec![m]
    }
}

/// The fixed chains and their rules.
fn fixed() -> Vec<(Chain<'static>, Vec<Vec<Statement<'static>>>)> {
    // The frontend's picker id goes into the mark, then the id to its
    // picking chain: a count change rewrites a data element, not a
    // verdict (the kernel checks every chain a verdict map reaches at
    // each commit that adds a jump, in time growing with the map).
    let pick = |key: Expression<'static>, map: &str, pickers: &str| {
        vec![
            set_mark(lookup(key, map)),
            Statement::VerdictMap(nftables::stmt::VerdictMap {
                key: meta(MetaKey::Mark),
                data: s(format!("@{pickers}")),
            }),
        ]
    };
    // Pods' interfaces start with "tar", and so do Tartan's own devices
    // (tartan.vxlan), which are not pods.
    let pods = || s("tar*");
    let devices = || s("tartan*");
    // This node's pods; in `output` every client is inside.
    let from_pod = || {
        vec![
            is(meta(MetaKey::Iifname), pods(), Operator::EQ),
            is(meta(MetaKey::Iifname), devices(), Operator::NEQ),
        ]
    };
    let dispatch = |inside: Vec<Statement<'static>>| {
        let mut fe_in = inside.clone();
        fe_in.extend(pick(frontend_key(), "frontends_in", "fe_pickers"));
        let mut np_in = inside;
        np_in.extend(local_destination());
        np_in.extend(pick(node_port_key(), "node_ports_in", "np_pickers"));
        let mut np = local_destination();
        np.extend(pick(node_port_key(), "node_ports", "np_pickers"));
        vec![
            fe_in,
            pick(frontend_key(), "frontends", "fe_pickers"),
            np_in,
            np,
        ]
    };
    let dnat_status = || {
        is(
            Expression::Named(NamedExpression::CT(CT {
                key: Cow::Borrowed("status"),
                family: None,
                dir: None,
            })),
            s("dnat"),
            Operator::IN,
        )
    };
    let filter = |name: &str, hook| {
        let mut rules = Vec::new();
        rules.extend(reject_rules("reject_fe", frontend_key(), false));
        rules.extend(reject_rules("drop_fe", frontend_key(), false));
        if hook != NfHook::Forward {
            rules.extend(reject_rules("reject_np", node_port_key(), true));
            rules.extend(reject_rules("drop_np", node_port_key(), true));
        }
        (base(name, NfChainType::Filter, hook, -10), rules)
    };
    vec![
        (
            base("prerouting", NfChainType::NAT, NfHook::Prerouting, -100),
            dispatch(from_pod()),
        ),
        (
            base("output", NfChainType::NAT, NfHook::Output, -100),
            dispatch(vec![]),
        ),
        (
            base("postrouting", NfChainType::NAT, NfHook::Postrouting, 100),
            vec![
                vec![
                    dnat_status(),
                    is(
                        concat(vec![payload("ip", "saddr"), payload("ip", "daddr")]),
                        s("@hairpin"),
                        Operator::EQ,
                    ),
                    Statement::Masquerade(None),
                ],
                vec![dnat_status(), goto("masq_external")],
            ],
        ),
        // From outside and on to another node: masquerade, so the reply
        // comes back this way.
        (
            chain("masq_external"),
            vec![
                vec![
                    is(meta(MetaKey::Iifname), pods(), Operator::EQ),
                    is(meta(MetaKey::Iifname), devices(), Operator::NEQ),
                    Statement::Return(None),
                ],
                vec![
                    is(meta(MetaKey::Oifname), pods(), Operator::EQ),
                    is(meta(MetaKey::Oifname), devices(), Operator::NEQ),
                    Statement::Return(None),
                ],
                vec![Statement::Masquerade(None)],
            ],
        ),
        (
            base(
                "filter_prerouting",
                NfChainType::Filter,
                NfHook::Prerouting,
                -110,
            ),
            vec![vec![
                is(frontend_key(), s("@lb_limited"), Operator::EQ),
                is(
                    concat(vec![
                        payload("ip", "daddr"),
                        meta(MetaKey::L4proto),
                        payload("th", "dport"),
                        payload("ip", "saddr"),
                    ]),
                    s("@lb_allowed"),
                    Operator::NEQ,
                ),
                Statement::Drop(None),
            ]],
        ),
        (chain("fe_dnat"), vec![dnat_rules(Kind::Frontend)]),
        (chain("np_dnat"), vec![dnat_rules(Kind::NodePort)]),
        filter("filter_input", NfHook::Input),
        filter("filter_forward", NfHook::Forward),
        filter("filter_output", NfHook::Output),
    ]
}

fn tx(objs: Vec<Command>) -> Transaction {
    objs.into_iter().collect()
}

/// The whole table, replaced in one transaction.
pub fn full(t: &SvcNft) -> Transaction {
    whole(t, t)
}

/// [`full`] without the elements [`super::elements::all`] encodes: what
/// `nft` writes of a table the kernel does not have yet.
pub fn skeleton(t: &SvcNft) -> Transaction {
    let only = SvcNft {
        lb_allowed: t.lb_allowed.clone(),
        ..SvcNft::default()
    };
    whole(t, &only)
}

/// The whole table `t`, with the elements of `elements`.
fn whole(t: &SvcNft, elements: &SvcNft) -> Transaction {
    let mut out = tx(vec![
        add(NfListObject::Table(table())),
        del(NfListObject::Table(table())),
        add(NfListObject::Table(table())),
    ]);
    for (name, key, value) in declarations() {
        out.push(declare(name, key, value));
    }
    let mut objs = vec![add(NfListObject::Set(Box::new(Set {
        family: NfFamily::IP,
        table: Cow::Borrowed(TABLE),
        name: Cow::Borrowed("lb_allowed"),
        set_type: types(FE_CLIENT_NET),
        flags: Some([SetFlag::Interval].into()),
        ..Set::default()
    })))];
    for i in 0..t.affinity_slots {
        objs.push(add(affinity_set(i)));
    }
    let fixed = fixed();
    let pickers = written_pickers(&t.pickers);
    for (c, _) in &fixed {
        objs.push(add(NfListObject::Chain(c.clone())));
    }
    for p in &pickers {
        objs.push(add(NfListObject::Chain(chain(&p.chain()))));
    }
    for (c, rules) in fixed {
        objs.extend(rules.into_iter().map(|r| rule(&c.name, r)));
    }
    for p in &pickers {
        objs.extend(picker_rules(p).into_iter().map(|r| rule(&p.chain(), r)));
    }
    for p in &pickers {
        objs.push(add(picker_entry(p)));
    }
    for (name, _, elems) in element_changes(&SvcNft::default(), elements) {
        if !elems.is_empty() {
            objs.push(add(element_cmd(name, elems)));
        }
    }
    out.extend(objs);
    out
}

/// The commands from `old` (applied) to `new`; `None` when equal.
pub fn diff(old: &SvcNft, new: &SvcNft) -> Option<Transaction> {
    let mut bare_old = old.clone();
    bare_old.hairpin.clear();
    let mut bare_new = new.clone();
    bare_new.hairpin.clear();
    patch(
        &[(bare_old, bare_new)],
        &(old.hairpin.clone(), new.hairpin.clone()),
        &(old.pickers.clone(), new.pickers.clone()),
        (old.affinity_slots, new.affinity_slots),
    )
}

type Before<T> = (T, T);

/// The commands for changed parts of the table: per part (old, new) the
/// elements, and for the whole table the hairpin set, the picking chains
/// and the affinity sets (each as before, after). Deletions come before
/// additions, so a frontend moving between parts is never doubled.
pub fn patch(
    parts: &[(SvcNft, SvcNft)],
    hairpin: &Before<BTreeSet<Ipv4Addr>>,
    pickers: &Before<BTreeSet<Picker>>,
    affinity: Before<u32>,
) -> Option<Transaction> {
    let mut objs = Vec::new();
    for i in affinity.0..affinity.1 {
        objs.push(add(affinity_set(i)));
    }
    let pickers = &(written_pickers(&pickers.0), written_pickers(&pickers.1));
    for p in pickers.1.difference(&pickers.0) {
        objs.push(add(NfListObject::Chain(chain(&p.chain()))));
        objs.extend(picker_rules(p).into_iter().map(|r| rule(&p.chain(), r)));
        objs.push(add(picker_entry(p)));
    }
    let mut changes: Vec<_> = parts
        .iter()
        .flat_map(|(o, n)| element_changes(o, n))
        .collect();
    let hp = |a: &Ipv4Addr| key_of(hairpin_elem(a));
    changes.push((
        "hairpin",
        hairpin.0.difference(&hairpin.1).map(hp).collect(),
        hairpin.1.difference(&hairpin.0).map(hp).collect(),
    ));
    for (name, gone, _) in &changes {
        if !gone.is_empty() {
            objs.push(del(element_cmd(name, gone.clone())));
        }
    }
    for (name, _, came) in changes {
        if !came.is_empty() {
            objs.push(add(element_cmd(name, came)));
        }
    }
    for p in pickers.0.difference(&pickers.1) {
        objs.push(del(picker_entry(p)));
        objs.push(Command::Nft(NfCmd::Flush(FlushObject::Chain(chain(
            &p.chain(),
        )))));
        objs.push(del(NfListObject::Chain(chain(&p.chain()))));
    }
    for i in affinity.1..affinity.0 {
        objs.push(del(affinity_set(i)));
    }
    if objs.is_empty() {
        return None;
    }
    Some(tx(objs))
}

/// Chains with rule counts and sets and maps (`@name`) with element
/// counts, as the kernel shows them; the affinity sets (filled by the
/// packet path) are left out.
pub fn summary(t: &SvcNft) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (c, rules) in fixed() {
        m.insert(c.name.to_string(), rules.len());
    }
    let pickers = written_pickers(&t.pickers);
    for p in &pickers {
        m.insert(p.chain(), picker_rules(p).len());
    }
    for (map, kind) in [
        ("@fe_pickers", Kind::Frontend),
        ("@np_pickers", Kind::NodePort),
    ] {
        m.insert(
            map.to_string(),
            pickers.iter().filter(|p| p.kind == kind).count(),
        );
    }
    for (name, count) in [
        ("frontends", t.frontends.len()),
        ("node_ports", t.node_ports.len()),
        ("frontends_in", t.frontends_in.len()),
        ("node_ports_in", t.node_ports_in.len()),
        ("fe_addr", t.fe_slots.len()),
        ("fe_port", t.fe_slots.len()),
        ("np_addr", t.np_slots.len()),
        ("np_port", t.np_slots.len()),
        ("reject_fe", t.reject_fe.len()),
        ("drop_fe", t.drop_fe.len()),
        ("reject_np", t.reject_np.len()),
        ("drop_np", t.drop_np.len()),
        ("hairpin", t.hairpin.len()),
        ("lb_limited", t.lb_limited.len()),
        ("lb_allowed", t.lb_allowed.len()),
    ] {
        m.insert(format!("@{name}"), count);
    }
    m
}

/// Sets left out of the drift check.
pub fn is_dynamic(set: &str) -> bool {
    set.starts_with("aff_")
}
