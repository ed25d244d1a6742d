//! The netlink batch that makes one nftables transaction: batch-begin,
//! the messages of each change (set elements many to a message; sets,
//! chains, rules), batch-end.

use super::attrs::{Attrs, NFTA_DATA_VALUE, close_nest, data_attrs, open_nest, put, value};
use super::expr_attrs::expr_attrs;
pub use super::ops::{
    Bound, BoundOp, ChainRef, Data, Elem, ElementOp, Op, RangeElem, RangeElementOp, SetDecl, SetRef,
};

pub(super) const NLM_F_REQUEST: u16 = 0x1;
pub(super) const NLM_F_ACK: u16 = 0x4;
pub(super) const NLM_F_CREATE: u16 = 0x400;
pub(super) const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub(super) const NFNL_MSG_BATCH_BEGIN: u16 = 16;
pub(super) const NFNL_MSG_BATCH_END: u16 = 17;
pub(super) const NFT_MSG_NEWSETELEM: u16 = 12;
pub(super) const NFT_MSG_DELSETELEM: u16 = 14;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NLM_F_APPEND: u16 = 0x800;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFT_MSG_NEWSET: u16 = 9;
const NFT_MSG_DELSET: u16 = 11;
const NFTA_SET_TABLE: u16 = 1;
const NFTA_SET_NAME: u16 = 2;
const NFTA_SET_FLAGS: u16 = 3;
const NFTA_SET_KEY_TYPE: u16 = 4;
const NFTA_SET_KEY_LEN: u16 = 5;
const NFTA_SET_DESC: u16 = 9;
const NFTA_SET_ID: u16 = 10;
const NFTA_SET_USERDATA: u16 = 13;
const NFTA_SET_DESC_CONCAT: u16 = 2;
const NFTA_SET_FIELD_LEN: u16 = 1;
const NFT_SET_INTERVAL: u32 = 0x4;
const NFT_SET_CONCAT: u32 = 0x80;
pub(super) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(super) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub(super) const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub(super) const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_KEY_END: u16 = 10;
const NFTA_SET_ELEM_FLAGS: u16 = 3;
const NFTA_SET_ELEM_USERDATA: u16 = 6;
const NFT_SET_ELEM_INTERVAL_END: u32 = 1;
pub(super) const PER_MESSAGE: usize = 256;

/// An element's value as [`elem_into`] writes it.
pub(super) enum ElemValue<'a> {
    None,
    Bytes(&'a [u8]),
    Data(&'a Data),
}

/// One element of a list (`NFTA_LIST_ELEM`), written straight into
/// `out`: the bytes `list.nested(NFTA_LIST_ELEM, elem_attrs(e))` makes,
/// without a buffer per attribute.
pub(super) fn elem_into(out: &mut Vec<u8>, key: &[u8], value: ElemValue) {
    let elem = open_nest(out, NFTA_LIST_ELEM);
    let k = open_nest(out, NFTA_SET_ELEM_KEY);
    put(out, NFTA_DATA_VALUE, key);
    close_nest(out, k);
    match value {
        ElemValue::None => {}
        ElemValue::Bytes(b) => {
            let d = open_nest(out, NFTA_SET_ELEM_DATA);
            put(out, NFTA_DATA_VALUE, b);
            close_nest(out, d);
        }
        ElemValue::Data(data) => {
            let d = open_nest(out, NFTA_SET_ELEM_DATA);
            out.extend(data_attrs(data).0);
            close_nest(out, d);
        }
    }
    close_nest(out, elem);
}

pub(super) fn elem_attrs(e: &Elem) -> Attrs {
    let mut a = Attrs::new();
    let mut key = Attrs::new();
    key.bytes(NFTA_DATA_VALUE, &e.key);
    a.nested(NFTA_SET_ELEM_KEY, key);
    if let Some(d) = &e.data {
        a.nested(NFTA_SET_ELEM_DATA, data_attrs(d));
    }
    a
}

/// A start or end element of a one-type interval set, as nft writes it:
/// the flag on an end element, the "open" userdata on the start of a
/// range that runs to the top.
fn bound_attrs(b: &Bound) -> Attrs {
    let mut a = Attrs::new();
    if b.end {
        a.bytes(
            NFTA_SET_ELEM_FLAGS,
            &NFT_SET_ELEM_INTERVAL_END.to_be_bytes(),
        );
    }
    a.nested(NFTA_SET_ELEM_KEY, value(&b.key));
    if b.open {
        a.bytes(NFTA_SET_ELEM_USERDATA, &super::ranges::OPEN_USERDATA);
    }
    a
}

fn set_body(d: &SetDecl) -> Vec<u8> {
    let flags = if d.interval {
        NFT_SET_INTERVAL | NFT_SET_CONCAT
    } else {
        0
    };
    let be = |n: u32| n.to_be_bytes();
    let mut b = Attrs::new();
    b.string(NFTA_SET_TABLE, &d.table)
        .string(NFTA_SET_NAME, &d.name)
        .bytes(NFTA_SET_FLAGS, &be(flags))
        .bytes(NFTA_SET_KEY_TYPE, &be(d.type_id))
        .bytes(NFTA_SET_KEY_LEN, &be(d.key.size() as u32))
        .bytes(NFTA_SET_ID, &be(d.id));
    if d.interval {
        // The kernel's set for concatenated ranges needs each field's
        // length, unpadded.
        let mut fields = Attrs::new();
        for t in &d.key.0 {
            let mut f = Attrs::new();
            f.bytes(NFTA_SET_FIELD_LEN, &be(t.size() as u32));
            fields.nested(NFTA_LIST_ELEM, f);
        }
        let mut desc = Attrs::new();
        desc.nested(NFTA_SET_DESC_CONCAT, fields);
        b.nested(NFTA_SET_DESC, desc);
    }
    b.bytes(NFTA_SET_USERDATA, &d.userdata);
    b.0
}

/// One netlink message: header, nfgenmsg, attributes.
pub(super) fn message(
    out: &mut Vec<u8>,
    kind: u16,
    flags: u16,
    seq: u32,
    family: u8,
    res: u16,
    body: &[u8],
) {
    let len = 16 + 4 + body.len();
    out.extend((len as u32).to_ne_bytes());
    out.extend(kind.to_ne_bytes());
    out.extend(flags.to_ne_bytes());
    out.extend(seq.to_ne_bytes());
    out.extend(0u32.to_ne_bytes());
    out.extend([family, 0]);
    out.extend(res.to_be_bytes());
    out.extend(body);
}

const NFT_MSG_GETTABLE: u16 = 1;
const NFTA_TABLE_NAME: u16 = 1;

/// A request for one table.
pub fn get_table(family: u8, name: &str, seq: u32) -> Vec<u8> {
    let mut body = Attrs::new();
    body.string(NFTA_TABLE_NAME, name);
    let mut out = Vec::new();
    message(
        &mut out,
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        family,
        0,
        &body.0,
    );
    out
}

/// The messages adding or removing `op`'s elements, [`PER_MESSAGE`] at a
/// time, each element's attributes by `attrs`.
fn element_messages<E>(
    op: &ElementOp<E>,
    attrs: impl Fn(&E) -> Attrs,
) -> Vec<(u16, u16, u8, Vec<u8>)> {
    op.elems
        .chunks(PER_MESSAGE)
        .map(|chunk| {
            let mut list = Attrs::new();
            for e in chunk {
                list.nested(NFTA_LIST_ELEM, attrs(e));
            }
            let mut body = Attrs::new();
            body.string(NFTA_SET_ELEM_LIST_TABLE, &op.table)
                .string(NFTA_SET_ELEM_LIST_SET, &op.set)
                .nested(NFTA_SET_ELEM_LIST_ELEMENTS, list);
            if op.add {
                (NFT_MSG_NEWSETELEM, NLM_F_CREATE, op.family, body.0)
            } else {
                (NFT_MSG_DELSETELEM, 0, op.family, body.0)
            }
        })
        .collect()
}

/// The messages of one op: (type, flags, body) each.
fn messages(op: &Op) -> Vec<(u16, u16, u8, Vec<u8>)> {
    let chain_body = |c: &ChainRef, table_attr: u16, name_attr: u16| {
        let mut b = Attrs::new();
        b.string(table_attr, &c.table).string(name_attr, &c.chain);
        b.0
    };
    match op {
        Op::Elements(op) => element_messages(op, elem_attrs),
        Op::RangeElements(op) => element_messages(op, |e| {
            let mut a = Attrs::new();
            a.nested(NFTA_SET_ELEM_KEY, value(&e.key))
                .nested(NFTA_SET_ELEM_KEY_END, value(&e.key_end));
            a
        }),
        Op::Bounds(op) => element_messages(op, bound_attrs),
        Op::AddSet(d) => vec![(NFT_MSG_NEWSET, NLM_F_CREATE, d.family, set_body(d))],
        Op::DeleteSet(r) => {
            let mut b = Attrs::new();
            b.string(NFTA_SET_TABLE, &r.table)
                .string(NFTA_SET_NAME, &r.name);
            vec![(NFT_MSG_DELSET, 0, r.family, b.0)]
        }
        Op::AddChain(c) => vec![(
            NFT_MSG_NEWCHAIN,
            NLM_F_CREATE,
            c.family,
            chain_body(c, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME),
        )],
        Op::DeleteChain(c) => vec![(
            NFT_MSG_DELCHAIN,
            0,
            c.family,
            chain_body(c, NFTA_CHAIN_TABLE, NFTA_CHAIN_NAME),
        )],
        // A rule delete naming no rule removes every rule of the chain.
        Op::FlushChain(c) => vec![(
            NFT_MSG_DELRULE,
            0,
            c.family,
            chain_body(c, NFTA_RULE_TABLE, NFTA_RULE_CHAIN),
        )],
        Op::AddRule(c, exprs) => {
            let mut list = Attrs::new();
            for e in exprs {
                list.nested(NFTA_LIST_ELEM, expr_attrs(e));
            }
            let mut body = Attrs::new();
            body.string(NFTA_RULE_TABLE, &c.table)
                .string(NFTA_RULE_CHAIN, &c.chain)
                .nested(NFTA_RULE_EXPRESSIONS, list);
            vec![(
                NFT_MSG_NEWRULE,
                NLM_F_CREATE | NLM_F_APPEND,
                c.family,
                body.0,
            )]
        }
    }
}

/// The message that opens (`NFNL_MSG_BATCH_BEGIN`) or closes
/// (`NFNL_MSG_BATCH_END`) a batch.
pub(super) fn batch_mark(out: &mut Vec<u8>, mark: u16, seq: u32) {
    message(out, mark, NLM_F_REQUEST, seq, 0, NFNL_SUBSYS_NFTABLES, &[]);
}

/// A whole batch for `ops`, sequence numbers from `seq`. Returns the
/// bytes and how many messages ask for an acknowledgement.
pub fn batch(ops: &[Op], seq: u32) -> (Vec<u8>, usize) {
    let msgs: Vec<_> = ops.iter().flat_map(messages).collect();
    let mut out = Vec::new();
    let mut seq = seq;
    batch_mark(&mut out, NFNL_MSG_BATCH_BEGIN, seq);
    // Errors come back whatever the flags; an ack is asked for on the last
    // message only, so that a batch of thousands of messages does not
    // flood the socket with acks. The kernel answers only after running
    // (and committing or aborting) the whole batch.
    let last = msgs.len();
    for (i, (kind, flags, family, body)) in msgs.iter().enumerate() {
        let ack = if i + 1 == last { NLM_F_ACK } else { 0 };
        seq = seq.wrapping_add(1);
        message(
            &mut out,
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | ack | flags,
            seq,
            *family,
            0,
            body,
        );
    }
    seq = seq.wrapping_add(1);
    batch_mark(&mut out, NFNL_MSG_BATCH_END, seq);
    (out, usize::from(last > 0))
}
