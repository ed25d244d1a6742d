//! The element changes between two tables, per named set or map.

use std::collections::{BTreeMap, BTreeSet};

use nftables::expr::{Expression, NamedExpression, Prefix};
// The expression helpers the policy compiler already has.
use tartan_policy::compile::stmt::s;

use super::objects::*;
use super::picker::*;
use super::table::*;
use crate::services::{Backend, Family};

/// Entries of `new` that `old` lacks or holds with another value, and
/// entries of `old` that `new` lacks or holds with another value.
pub(super) type Entries<'a, K, V> = Vec<(&'a K, &'a V)>;

pub(super) fn changed<'a, K: Ord, V: PartialEq>(
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
pub(super) fn element_changes<A: Family>(
    old: &SvcNft<A>,
    new: &SvcNft<A>,
) -> Vec<(
    &'static str,
    Vec<Expression<'static>>,
    Vec<Expression<'static>>,
)> {
    let mut out = Vec::new();
    let id = |p: &Picker| n(p.id());
    let addr = |b: &Backend<A>| s(b.addr.to_string());
    let port = |b: &Backend<A>| n(u32::from(b.port));
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
        "cluster_ips",
        &old.cluster_ips,
        &new.cluster_ips,
        |a| vec![s(a.to_string())],
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
            let net: ipnet::IpNet = (*net).into();
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
