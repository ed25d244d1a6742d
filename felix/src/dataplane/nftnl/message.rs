//! The netlink batch that adds and removes set elements in one nftables
//! transaction: batch-begin, one NEWSETELEM/DELSETELEM message per set
//! and operation (each holding many elements), batch-end.

use super::types::Verdict;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;

const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;

/// Elements per message; keeps each message far below the kernel's
/// limits whatever the key size.
const PER_MESSAGE: usize = 256;

/// An element's value in a map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Bytes(Vec<u8>),
    Verdict(Verdict),
}

/// One set element: its key and, in a map, its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elem {
    pub key: Vec<u8>,
    pub data: Option<Data>,
}

/// Elements to add to or remove from one set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementOp {
    pub add: bool,
    /// NFPROTO_* of the table.
    pub family: u8,
    pub table: String,
    pub set: String,
    pub elems: Vec<Elem>,
}

/// A netlink attribute being built.
struct Attrs(Vec<u8>);

impl Attrs {
    fn new() -> Attrs {
        Attrs(Vec::new())
    }

    fn bytes(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        let len = 4 + payload.len();
        self.0.extend((len as u16).to_ne_bytes());
        self.0.extend(kind.to_ne_bytes());
        self.0.extend(payload);
        self.pad();
        self
    }

    fn string(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.bytes(kind, &b)
    }

    fn nested(&mut self, kind: u16, inner: Attrs) -> &mut Self {
        self.bytes(kind | NLA_F_NESTED, &inner.0)
    }

    fn pad(&mut self) {
        let n = self.0.len().div_ceil(4) * 4;
        self.0.resize(n, 0);
    }
}

fn data_attrs(d: &Data) -> Attrs {
    let mut a = Attrs::new();
    match d {
        Data::Bytes(b) => {
            a.bytes(NFTA_DATA_VALUE, b);
        }
        Data::Verdict(v) => {
            let mut verdict = Attrs::new();
            verdict.bytes(NFTA_VERDICT_CODE, &v.code().to_be_bytes());
            if let Some(c) = v.chain() {
                verdict.string(NFTA_VERDICT_CHAIN, c);
            }
            a.nested(NFTA_DATA_VERDICT, verdict);
        }
    }
    a
}

fn elem_attrs(e: &Elem) -> Attrs {
    let mut a = Attrs::new();
    let mut key = Attrs::new();
    key.bytes(NFTA_DATA_VALUE, &e.key);
    a.nested(NFTA_SET_ELEM_KEY, key);
    if let Some(d) = &e.data {
        a.nested(NFTA_SET_ELEM_DATA, data_attrs(d));
    }
    a
}

/// One netlink message: header, nfgenmsg, attributes.
fn message(out: &mut Vec<u8>, kind: u16, flags: u16, seq: u32, family: u8, res: u16, body: &[u8]) {
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

/// A whole batch for `ops`, sequence numbers from `seq`. Returns the
/// bytes and how many messages ask for an acknowledgement.
pub fn batch(ops: &[ElementOp], seq: u32) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut seq = seq;
    message(
        &mut out,
        NFNL_MSG_BATCH_BEGIN,
        NLM_F_REQUEST,
        seq,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    let total: usize = ops
        .iter()
        .map(|o| o.elems.len().div_ceil(PER_MESSAGE))
        .sum();
    let mut n = 0;
    for op in ops {
        for chunk in op.elems.chunks(PER_MESSAGE) {
            let mut list = Attrs::new();
            for e in chunk {
                list.nested(NFTA_LIST_ELEM, elem_attrs(e));
            }
            let mut body = Attrs::new();
            body.string(NFTA_SET_ELEM_LIST_TABLE, &op.table)
                .string(NFTA_SET_ELEM_LIST_SET, &op.set)
                .nested(NFTA_SET_ELEM_LIST_ELEMENTS, list);
            // Errors come back whatever the flags; an ack is asked for on
            // the last message only, so that a batch of thousands of
            // messages does not flood the socket with acks. The kernel
            // answers only after running (and committing or aborting) the
            // whole batch.
            n += 1;
            let ack = if n == total { NLM_F_ACK } else { 0 };
            let (kind, flags) = if op.add {
                (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | ack | NLM_F_CREATE)
            } else {
                (NFT_MSG_DELSETELEM, NLM_F_REQUEST | ack)
            };
            seq = seq.wrapping_add(1);
            message(
                &mut out,
                (NFNL_SUBSYS_NFTABLES << 8) | kind,
                flags,
                seq,
                op.family,
                0,
                &body.0,
            );
        }
    }
    let acked = usize::from(total > 0);
    seq = seq.wrapping_add(1);
    message(
        &mut out,
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        seq,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    (out, acked)
}
