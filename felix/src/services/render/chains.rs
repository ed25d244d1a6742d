//! The declarations of the named sets and maps, and the fixed chains
//! with their rules (dispatch, DNAT, filter, masquerade).

use std::borrow::Cow;

use nftables::expr::{BinaryOperation, CT, Expression, MetaKey, NamedExpression};
use nftables::schema::{Chain, Map, NfListObject, Set, SetType, SetTypeValue};
use nftables::stmt::{NAT, Operator, Reject, RejectType, Statement};
use nftables::types::{NfChainType, NfHook, RejectCode};
use tartan_nft::Command;
use tartan_nft::model::VerdictMap;
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::{concat, goto, meta, payload, s};

use super::objects::*;
use super::picker::*;
use crate::services::{Fam, TCP};

/// The named sets and maps: name, key type, value type (`None`: a set;
/// `Some(None)`: a verdict map, declared in plain JSON since the crate
/// has no verdict type).
/// Value type of a declaration: `None` a set, `Some(None)` a verdict
/// map, `Some(Some(t))` a map to `t`.
pub(super) type MapValue = Option<Option<SetType>>;

pub(super) fn declarations(f: Fam) -> Vec<(&'static str, Vec<SetType>, MapValue)> {
    let fe = fe_type(f);
    let addr = f.addr_type();
    vec![
        ("frontends", fe.clone(), Some(Some(SetType::Mark))),
        ("node_ports", NP.to_vec(), Some(Some(SetType::Mark))),
        ("frontends_in", fe.clone(), Some(Some(SetType::Mark))),
        ("node_ports_in", NP.to_vec(), Some(Some(SetType::Mark))),
        ("fe_pickers", vec![SetType::Mark], Some(None)),
        ("np_pickers", vec![SetType::Mark], Some(None)),
        ("fe_addr", fe_slot_type(f), Some(Some(addr))),
        ("fe_port", fe_slot_type(f), Some(Some(SetType::InetService))),
        ("np_addr", NP_SLOT.to_vec(), Some(Some(addr))),
        (
            "np_port",
            NP_SLOT.to_vec(),
            Some(Some(SetType::InetService)),
        ),
        ("reject_fe", fe.clone(), None),
        ("drop_fe", fe.clone(), None),
        ("reject_np", NP.to_vec(), None),
        ("drop_np", NP.to_vec(), None),
        ("hairpin", vec![addr, addr], None),
        ("lb_limited", fe, None),
        ("cluster_ips", vec![addr], None),
    ]
}

pub(super) fn declare(f: Fam, name: &str, key: &[SetType], value: MapValue) -> Command {
    let o = match value {
        None => NfListObject::Set(Box::new(Set {
            family: f.nf(),
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(name.to_string()),
            set_type: types(key),
            ..Set::default()
        })),
        Some(None) => {
            return Command::AddVerdictMap(VerdictMap {
                family: f.nf(),
                table: TABLE.to_string(),
                name: name.to_string(),
                key: key.to_vec(),
            });
        }
        Some(Some(v)) => NfListObject::Map(Box::new(Map {
            family: f.nf(),
            table: Cow::Borrowed(TABLE),
            name: Cow::Owned(name.to_string()),
            set_type: types(key),
            map: SetTypeValue::Single(v),
            ..Map::default()
        })),
    };
    add(o)
}

pub(super) fn dnat_rules(f: Fam, kind: Kind) -> Vec<Statement<'static>> {
    let (key, addr, port) = match kind {
        Kind::Frontend => (
            vec![
                payload(f.payload(), "daddr"),
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
        family: Some(f.nat()),
        port: Some(lookup(concat(key), port)),
        flags: None,
    }))]
}

/// The rules refusing new connections whose `key` is in `set`: dropped
/// for a `drop_*` set, else rejected (TCP reset, ICMP or ICMPv6 port
/// unreachable); with `local`, only those to the node's own addresses.
pub(super) fn reject_rules(
    f: Fam,
    set: &str,
    key: Expression<'static>,
    local: bool,
) -> Vec<Vec<Statement<'static>>> {
    // New connections only, as kube-proxy checks them: a reply to the
    // node's own connection from a local port that is a NodePort (or to
    // a frontend's address and port) must pass.
    let mut m = vec![ct_is("state", "new")];
    if local {
        m.extend(local_destination(f));
    }
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
    if set.starts_with("drop") {
        m.push(Statement::Drop(None));
        vec![m]
    } else {
        let mut a = m.clone();
        a.extend([tcp, reject(RejectType::TCPReset, None)]);
        let mut b = m;
        b.extend([not_tcp, reject(f.icmp(), Some(RejectCode::PortUnreach))]);
        vec![a, b]
    }
}

/// `ct <key> <value>`: the connection's state or status has the flag.
fn ct_is(key: &'static str, value: &'static str) -> Statement<'static> {
    is(
        Expression::Named(NamedExpression::CT(CT {
            key: Cow::Borrowed(key),
            family: None,
            dir: None,
        })),
        s(value),
        Operator::IN,
    )
}

/// The bits of a slot mark that say which group of pickers chose it
/// (plain, [`INSIDE_SLOTS`], [`MASQ_SLOTS`]).
const SLOT_GROUP: u32 = 0xff00_0000;

/// A new connection to a LoadBalancer frontend limited by
/// `loadBalancerSourceRanges` from a client outside them is dropped.
fn source_ranges_rule(f: Fam) -> Vec<Statement<'static>> {
    vec![
        ct_is("state", "new"),
        is(frontend_key(f), s("@lb_limited"), Operator::EQ),
        is(
            concat(vec![
                payload(f.payload(), "daddr"),
                meta(MetaKey::L4proto),
                payload("th", "dport"),
                payload(f.payload(), "saddr"),
            ]),
            s("@lb_allowed"),
            Operator::NEQ,
        ),
        Statement::Drop(None),
    ]
}

/// The fixed chains and their rules, for the table of family `f`.
pub(super) fn fixed(f: Fam) -> Vec<(Chain<'static>, Vec<Vec<Statement<'static>>>)> {
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
        fe_in.extend(pick(frontend_key(f), "frontends_in", "fe_pickers"));
        let mut np_in = inside;
        np_in.extend(local_destination(f));
        np_in.extend(pick(node_port_key(), "node_ports_in", "np_pickers"));
        let mut np = local_destination(f);
        np.extend(pick(node_port_key(), "node_ports", "np_pickers"));
        vec![
            fe_in,
            pick(frontend_key(f), "frontends", "fe_pickers"),
            np_in,
            np,
        ]
    };
    let dnat_status = || ct_is("status", "dnat");
    let filter = |name: &str, hook| {
        let mut rules = Vec::new();
        rules.extend(reject_rules(f, "reject_fe", frontend_key(f), false));
        rules.extend(reject_rules(f, "drop_fe", frontend_key(f), false));
        if hook != NfHook::Forward {
            rules.extend(reject_rules(f, "reject_np", node_port_key(), true));
            rules.extend(reject_rules(f, "drop_np", node_port_key(), true));
        }
        // These chains run after DNAT (priority -10 against -100): a new
        // connection still addressed to a ClusterIP is to a port its
        // Service does not declare. Refused rather than routed on by the
        // default route, where it would hang (kube-proxy's
        // `cluster-ips-check`). A ClusterIP is not local, so not in input.
        if hook != NfHook::Input {
            rules.extend(reject_rules(
                f,
                "cluster_ips",
                payload(f.payload(), "daddr"),
                false,
            ));
        }
        (base(f, name, NfChainType::Filter, hook, -10), rules)
    };
    vec![
        (
            base(f, "prerouting", NfChainType::NAT, NfHook::Prerouting, -100),
            dispatch(from_pod()),
        ),
        (
            base(f, "output", NfChainType::NAT, NfHook::Output, -100),
            dispatch(vec![]),
        ),
        (
            base(f, "postrouting", NfChainType::NAT, NfHook::Postrouting, 100),
            vec![
                vec![
                    dnat_status(),
                    is(
                        concat(vec![
                            payload(f.payload(), "saddr"),
                            payload(f.payload(), "daddr"),
                        ]),
                        s("@hairpin"),
                        Operator::EQ,
                    ),
                    Statement::Masquerade(None),
                ],
                // Picked by a masquerading picker: through an external
                // frontend or node port of a Service with
                // `externalTrafficPolicy: Cluster`.
                vec![
                    dnat_status(),
                    is(
                        Expression::BinaryOperation(Box::new(BinaryOperation::AND(
                            meta(MetaKey::Mark),
                            Expression::Number(SLOT_GROUP),
                        ))),
                        Expression::Number(MASQ_SLOTS),
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
            chain(f, "masq_external"),
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
        // New connections only, as kube-proxy's firewall check: a
        // connection already made is not cut by a change of ranges. The
        // node's own connections are checked too (from the address it
        // sends from), as kube-proxy checks them in its output chain.
        (
            base(
                f,
                "filter_prerouting",
                NfChainType::Filter,
                NfHook::Prerouting,
                -110,
            ),
            vec![source_ranges_rule(f)],
        ),
        (
            base(
                f,
                "filter_output_ranges",
                NfChainType::Filter,
                NfHook::Output,
                -110,
            ),
            vec![source_ranges_rule(f)],
        ),
        (chain(f, "fe_dnat"), vec![dnat_rules(f, Kind::Frontend)]),
        (chain(f, "np_dnat"), vec![dnat_rules(f, Kind::NodePort)]),
        filter("filter_input", NfHook::Input),
        filter("filter_forward", NfHook::Forward),
        filter("filter_output", NfHook::Output),
    ]
}
