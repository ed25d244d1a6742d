//! Every element of the service table as netlink element operations,
//! encoded straight from the table into the batch's bytes
//! ([`tartan_nft::backend::netlink::stream::Stream`]): the path of a
//! whole-table write. Rendering 200,000 elements as JSON only for `nft`
//! to parse them back would cost seconds and hundreds of MiB in felix
//! and in `nft`; the kernel stores them in a fraction of that. The sets
//! `lb_limited` and `lb_allowed` are not here: `nft` writes them with
//! the chains ([`super::render::skeleton`], [`super::render::in_place`]).
//!
//! Keys follow the declarations in [`super::render`]; each part of a
//! concatenation takes a multiple of four bytes.

use std::collections::{BTreeMap, BTreeSet};

use super::render::{Picker, SvcNft, TABLE, written_pickers};
use super::{Backend, Family};
use tartan_nft::backend::netlink::message::{Data, Elem};
use tartan_nft::backend::netlink::stream::Stream;
use tartan_nft::backend::netlink::types::{Verdict, concat};

/// The sets and maps [`write`] empties and fills, in its order.
pub const WRITTEN: &[&str] = &[
    "fe_pickers",
    "np_pickers",
    "fe_addr",
    "fe_port",
    "np_addr",
    "np_port",
    "frontends",
    "node_ports",
    "frontends_in",
    "node_ports_in",
    "reject_fe",
    "drop_fe",
    "reject_np",
    "drop_np",
    "hairpin",
    "cluster_ips",
];

/// An address is 4 or 16 bytes, so its part of a concatenation needs
/// no padding in either family.
fn frontend<A: Family>(fe: &(A, u8, u16)) -> Vec<u8> {
    concat(&[&fe.0.bytes(), &[fe.1], &fe.2.to_be_bytes()])
}

fn node_port(np: &(u8, u16)) -> Vec<u8> {
    concat(&[&[np.0], &np.1.to_be_bytes()])
}

/// A key with the slot (`meta mark`, host byte order) appended.
fn slotted(key: Vec<u8>, slot: u32) -> Vec<u8> {
    let mut k = key;
    k.extend(slot.to_ne_bytes());
    k
}

/// One family's table being written: the stream and the table's
/// netlink family.
struct Out<'a> {
    s: &'a mut Stream,
    family: u8,
}

fn add(o: &mut Out, set: &str, key: Vec<u8>, data: Option<Data>) {
    o.s.add(o.family, TABLE, set, Elem { key, data });
}

fn set<K>(o: &mut Out, name: &str, keys: &BTreeSet<K>, key: impl Fn(&K) -> Vec<u8>) {
    for k in keys {
        add(o, name, key(k), None);
    }
}

/// A frontend's picker id: a mark, host byte order.
fn pickers<K>(o: &mut Out, name: &str, m: &BTreeMap<K, Picker>, key: impl Fn(&K) -> Vec<u8>) {
    for (k, p) in m {
        add(
            o,
            name,
            key(k),
            Some(Data::Bytes(p.id().to_ne_bytes().to_vec())),
        );
    }
}

fn slots<K, A>(
    o: &mut Out,
    name: &str,
    m: &BTreeMap<(K, u32), Backend<A>>,
    key: impl Fn(&K) -> Vec<u8>,
    value: impl Fn(&Backend<A>) -> Vec<u8>,
) {
    for ((k, slot), b) in m {
        add(o, name, slotted(key(k), *slot), Some(Data::Bytes(value(b))));
    }
}

/// Append to `s`: each set and map of [`WRITTEN`] emptied, then filled
/// with `t`'s elements: the picking chains' entries first, then the
/// slot maps, then the frontends that lead to them. In one batch, so the
/// kernel switches from the old elements to the new at once. The chains
/// the picker entries name must exist.
pub fn write<A: Family>(t: &SvcNft<A>, s: &mut Stream) {
    let family = A::FAM.nfproto();
    for name in WRITTEN {
        s.flush_set(family, TABLE, name);
    }
    let s = &mut Out { s, family };
    for p in written_pickers(&t.pickers) {
        let map = match p.kind {
            super::render::Kind::Frontend => "fe_pickers",
            super::render::Kind::NodePort => "np_pickers",
        };
        let goto = Data::Verdict(Verdict::Goto(p.chain()));
        add(s, map, p.id().to_ne_bytes().to_vec(), Some(goto));
    }
    let addr = |b: &Backend<A>| b.addr.bytes();
    let port = |b: &Backend<A>| b.port.to_be_bytes().to_vec();
    slots(s, "fe_addr", &t.fe_slots, frontend, addr);
    slots(s, "fe_port", &t.fe_slots, frontend, port);
    slots(s, "np_addr", &t.np_slots, node_port, addr);
    slots(s, "np_port", &t.np_slots, node_port, port);
    pickers(s, "frontends", &t.frontends, frontend);
    pickers(s, "node_ports", &t.node_ports, node_port);
    pickers(s, "frontends_in", &t.frontends_in, frontend);
    pickers(s, "node_ports_in", &t.node_ports_in, node_port);
    set(s, "reject_fe", &t.reject_fe, frontend);
    set(s, "drop_fe", &t.drop_fe, frontend);
    set(s, "reject_np", &t.reject_np, node_port);
    set(s, "drop_np", &t.drop_np, node_port);
    set(s, "hairpin", &t.hairpin, |a| {
        concat(&[&a.bytes(), &a.bytes()])
    });
    set(s, "cluster_ips", &t.cluster_ips, |a| a.bytes());
}
