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
use tartan_nft::backend::netlink::types::Verdict;

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

/// A key or value of up to 40 bytes, made on the stack (a whole table
/// is hundreds of thousands of them). The longest is a hairpin key of
/// two IPv6 addresses, 32 bytes.
#[derive(Clone, Copy)]
struct Bytes {
    b: [u8; 40],
    n: usize,
}

impl Bytes {
    /// The bytes of `v` as they are.
    fn raw(v: &[u8]) -> Bytes {
        let mut k = Bytes { b: [0; 40], n: 0 };
        k.b[..v.len()].copy_from_slice(v);
        k.n = v.len();
        k
    }

    /// A concatenation: each part padded to a multiple of four bytes
    /// (with zeros), as [`tartan_nft::backend::netlink::types::concat`]
    /// makes it.
    fn concat(parts: &[&[u8]]) -> Bytes {
        let mut k = Bytes { b: [0; 40], n: 0 };
        for p in parts {
            k.b[k.n..k.n + p.len()].copy_from_slice(p);
            k.n += p.len().div_ceil(4) * 4;
        }
        k
    }

    /// With the slot (`meta mark`, host byte order) appended.
    fn slotted(self, slot: u32) -> Bytes {
        Bytes::concat(&[self.as_ref(), &slot.to_ne_bytes()])
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.b[..self.n]
    }
}

/// An address is 4 or 16 bytes, so its part of a concatenation needs
/// no padding in either family.
fn frontend<A: Family>(fe: &(A, u8, u16)) -> Bytes {
    Bytes::concat(&[fe.0.bytes().as_ref(), &[fe.1], &fe.2.to_be_bytes()])
}

fn node_port(np: &(u8, u16)) -> Bytes {
    Bytes::concat(&[&[np.0], &np.1.to_be_bytes()])
}

/// One family's table being written: the stream and the table's
/// netlink family.
struct Out<'a> {
    s: &'a mut Stream,
    family: u8,
}

fn add(o: &mut Out, set: &str, key: Bytes, value: Option<Bytes>) {
    let value = value.as_ref().map(Bytes::as_ref);
    o.s.add_bytes(o.family, TABLE, set, key.as_ref(), value);
}

fn set<K>(o: &mut Out, name: &str, keys: &BTreeSet<K>, key: impl Fn(&K) -> Bytes) {
    for k in keys {
        add(o, name, key(k), None);
    }
}

/// A frontend's picker id: a mark, host byte order.
fn pickers<K>(o: &mut Out, name: &str, m: &BTreeMap<K, Picker>, key: impl Fn(&K) -> Bytes) {
    for (k, p) in m {
        add(o, name, key(k), Some(Bytes::raw(&p.id().to_ne_bytes())));
    }
}

fn slots<K, A>(
    o: &mut Out,
    name: &str,
    m: &BTreeMap<(K, u32), Backend<A>>,
    key: impl Fn(&K) -> Bytes,
    value: impl Fn(&Backend<A>) -> Bytes,
) {
    for ((k, slot), b) in m {
        add(o, name, key(k).slotted(*slot), Some(value(b)));
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
        let e = Elem {
            key: p.id().to_ne_bytes().to_vec(),
            data: Some(goto),
        };
        s.s.add(s.family, TABLE, map, e);
    }
    let addr = |b: &Backend<A>| Bytes::raw(b.addr.bytes().as_ref());
    let port = |b: &Backend<A>| Bytes::raw(&b.port.to_be_bytes());
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
        Bytes::concat(&[a.bytes().as_ref(), a.bytes().as_ref()])
    });
    set(s, "cluster_ips", &t.cluster_ips, |a| {
        Bytes::raw(a.bytes().as_ref())
    });
}
