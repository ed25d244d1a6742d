//! The picking chains: one per endpoint count (and affinity timeout),
//! shared by every frontend with that many endpoints; their ids, their
//! rules, and their entries in the verdict maps.

use std::borrow::Cow;
use std::collections::BTreeSet;

use nftables::expr::{Elem, Expression, MetaKey, NamedExpression, NgMode, Numgen};
use nftables::schema::{NfListObject, Set, SetFlag};
use nftables::stmt::{Operator, SetOp, Statement};
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::{goto, meta, s};

use super::objects::*;
use crate::services::Fam;

/// Where the slots of inside pickers start ([`Picker::inside`]): above
/// any endpoint count, below the picker id's flag bits.
pub const INSIDE_SLOTS: u32 = 1 << 24;

/// Where the slots of masquerading pickers start ([`Picker::masq`]): the
/// packet mark of a connection they pick for is in
/// `MASQ_SLOTS..MASQ_SLOTS + INSIDE_SLOTS`, which `postrouting` reads.
pub const MASQ_SLOTS: u32 = 1 << 25;

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
    /// For the external frontends and node ports of a Service with
    /// `externalTrafficPolicy: Cluster`, whose every connection is
    /// masqueraded (as kube-proxy does): picks slots from [`MASQ_SLOTS`].
    pub masq: bool,
}

/// Endpoints a Service with session affinity can have in its picker id.
pub const MAX_AFFINITY_ENDPOINTS: usize = (1 << 12) - 1;

impl Picker {
    /// The number `frontends` and `node_ports` map a frontend to, and the
    /// `fe_pickers`/`np_pickers` key of this chain: the count, or with
    /// affinity bit 31, the timeout (at most a day: 17 bits) from bit 12
    /// and the count (below 4,096) under it; bit 30 for an inside picker,
    /// bit 29 for a masquerading one.
    pub fn id(&self) -> u32 {
        let id = match self.affinity {
            None => self.count & (INSIDE_SLOTS - 1),
            Some(t) => {
                0x8000_0000
                    | (t.min(crate::services::MAX_AFFINITY_SECONDS) << 12)
                    | (self.count & MAX_AFFINITY_ENDPOINTS as u32)
            }
        };
        let id = if self.inside { id | 0x4000_0000 } else { id };
        if self.masq { id | 0x2000_0000 } else { id }
    }

    /// The first slot this chain picks.
    pub fn first_slot(&self) -> u32 {
        if self.inside {
            INSIDE_SLOTS
        } else if self.masq {
            MASQ_SLOTS
        } else {
            0
        }
    }

    pub fn chain(&self) -> String {
        let k = match self.kind {
            Kind::Frontend => "fe",
            Kind::NodePort => "np",
        };
        let group = if self.inside {
            "_in"
        } else if self.masq {
            "_masq"
        } else {
            ""
        };
        match self.affinity {
            None => format!("{k}_{}{group}", self.count),
            Some(t) => format!("{k}_{}_a{t}{group}", self.count),
        }
    }
}

/// Picking chains without affinity for 1 to this many endpoints are
/// always in the table, used or not: an endpoint added to or removed from
/// a Service then only repoints its frontend (map elements, written over
/// netlink in microseconds), where making or removing a chain costs an
/// `nft` run (20–30 ms). 128 chains of two rules cost nothing to keep.
pub const STANDING_PICKERS: u32 = 32;

/// The picking chains the table holds: those in use and the standing ones
/// (plain and masquerading: a ClusterIP picks with the first, a NodePort
/// with `externalTrafficPolicy: Cluster` with the second).
pub fn written_pickers(used: &BTreeSet<Picker>) -> BTreeSet<Picker> {
    let mut all = used.clone();
    for kind in [Kind::Frontend, Kind::NodePort] {
        for count in 1..=STANDING_PICKERS {
            for masq in [false, true] {
                all.insert(Picker {
                    kind,
                    count,
                    affinity: None,
                    inside: false,
                    masq,
                });
            }
        }
    }
    all
}

/// A picking chain's entry in `fe_pickers` / `np_pickers`.
pub(super) fn picker_entry(f: Fam, p: &Picker) -> NfListObject<'static> {
    let map = match p.kind {
        Kind::Frontend => "fe_pickers",
        Kind::NodePort => "np_pickers",
    };
    element_cmd(
        f,
        map,
        vec![mapping(vec![n(p.id())], goto_value(&p.chain()))],
    )
}

pub(super) fn affinity_set(f: Fam, i: u32) -> NfListObject<'static> {
    NfListObject::Set(Box::new(Set {
        family: f.nf(),
        table: Cow::Borrowed(TABLE),
        name: Cow::Owned(format!("aff_{i}")),
        set_type: types(&client_fe_type(f)),
        flags: Some([SetFlag::Timeout].into()),
        ..Set::default()
    }))
}

pub(super) fn remember(f: Fam, slot: u32, timeout: u32) -> Statement<'static> {
    Statement::Set(nftables::stmt::Set {
        op: SetOp::Update,
        elem: Expression::Named(NamedExpression::Elem(Elem {
            val: Box::new(client_key(f)),
            timeout: Some(timeout),
            ..Elem::default()
        })),
        set: Cow::Owned(format!("@aff_{slot}")),
    })
}

pub(super) fn dnat_chain(kind: Kind) -> &'static str {
    match kind {
        Kind::Frontend => "fe_dnat",
        Kind::NodePort => "np_dnat",
    }
}

pub(super) fn picker_rules(f: Fam, p: &Picker) -> Vec<Vec<Statement<'static>>> {
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
            is(client_key(f), s(format!("@aff_{i}")), Operator::EQ),
            set_mark(n(first + i)),
            remember(f, i, t),
            dnat.clone(),
        ]);
    }
    out.push(vec![random]);
    for i in 0..p.count {
        out.push(vec![
            is(meta(MetaKey::Mark), n(first + i), Operator::EQ),
            remember(f, i, t),
        ]);
    }
    out.push(vec![dnat]);
    out
}
