//! Every element of the service table as netlink element operations,
//! encoded straight from the table: the path for a table the kernel does
//! not have yet (see [`crate::dataplane::nft::NftWriter::write_new_parts`]).
//! Rendering 200,000 elements as JSON only to parse them back would cost
//! more than the kernel takes to store them. The interval set
//! `lb_allowed` is not here: it stays in the JSON `nft` writes.
//!
//! Keys follow the declarations in [`super::render`]; each part of a
//! concatenation takes a multiple of four bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::Backend;
use super::render::{Picker, SvcNft, TABLE};
use tartan_nft::backend::netlink::message::{Data, Elem, ElementOp};
use tartan_nft::backend::netlink::types::concat;

const NFPROTO_IPV4: u8 = 2;

fn frontend(fe: &(Ipv4Addr, u8, u16)) -> Vec<u8> {
    concat(&[&fe.0.octets(), &[fe.1], &fe.2.to_be_bytes()])
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

fn op(set: &str, elems: Vec<Elem>) -> Option<ElementOp> {
    (!elems.is_empty()).then(|| ElementOp {
        add: true,
        family: NFPROTO_IPV4,
        table: TABLE.to_string(),
        set: set.to_string(),
        elems,
    })
}

fn set<K>(set: &str, keys: &BTreeSet<K>, key: impl Fn(&K) -> Vec<u8>) -> Option<ElementOp> {
    op(
        set,
        keys.iter()
            .map(|k| Elem {
                key: key(k),
                data: None,
            })
            .collect(),
    )
}

/// A frontend's picker id: a mark, host byte order.
fn pickers<K>(
    set: &str,
    m: &BTreeMap<K, Picker>,
    key: impl Fn(&K) -> Vec<u8>,
) -> Option<ElementOp> {
    op(
        set,
        m.iter()
            .map(|(k, p)| Elem {
                key: key(k),
                data: Some(Data::Bytes(p.id().to_ne_bytes().to_vec())),
            })
            .collect(),
    )
}

fn slots<K>(
    set: &str,
    m: &BTreeMap<(K, u32), Backend>,
    key: impl Fn(&K) -> Vec<u8>,
    value: impl Fn(&Backend) -> Vec<u8>,
) -> Option<ElementOp> {
    op(
        set,
        m.iter()
            .map(|((k, slot), b)| Elem {
                key: slotted(key(k), *slot),
                data: Some(Data::Bytes(value(b))),
            })
            .collect(),
    )
}

/// Every element of `t` but those of `lb_allowed` and the picking chains'
/// verdict maps (which [`super::render::skeleton`] holds). The slot maps
/// come before the frontends that lead to them, all in one transaction.
pub fn all(t: &SvcNft) -> Vec<ElementOp> {
    let addr = |b: &Backend| b.addr.octets().to_vec();
    let port = |b: &Backend| b.port.to_be_bytes().to_vec();
    [
        slots("fe_addr", &t.fe_slots, frontend, addr),
        slots("fe_port", &t.fe_slots, frontend, port),
        slots("np_addr", &t.np_slots, node_port, addr),
        slots("np_port", &t.np_slots, node_port, port),
        pickers("frontends", &t.frontends, frontend),
        pickers("node_ports", &t.node_ports, node_port),
        pickers("frontends_in", &t.frontends_in, frontend),
        pickers("node_ports_in", &t.node_ports_in, node_port),
        set("reject_fe", &t.reject_fe, frontend),
        set("drop_fe", &t.drop_fe, frontend),
        set("reject_np", &t.reject_np, node_port),
        set("drop_np", &t.drop_np, node_port),
        set("hairpin", &t.hairpin, |a| {
            concat(&[&a.octets(), &a.octets()])
        }),
        set("lb_limited", &t.lb_limited, frontend),
    ]
    .into_iter()
    .flatten()
    .collect()
}
