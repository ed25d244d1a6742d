//! The netlink batch that makes one nftables transaction: batch-begin,
//! the messages of each change (set elements many to a message; sets,
//! chains, rules), batch-end.

use super::rules::Expr;
use super::types::{DataType, KeyType, Verdict};

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 16;
const NFNL_MSG_BATCH_END: u16 = 17;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;

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
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_META_DREG: u16 = 1;
const NFTA_META_KEY: u16 = 2;
const NFTA_META_SREG: u16 = 3;
const NFTA_PAYLOAD_DREG: u16 = 1;
const NFTA_PAYLOAD_BASE: u16 = 2;
const NFTA_PAYLOAD_OFFSET: u16 = 3;
const NFTA_PAYLOAD_LEN: u16 = 4;
const NFTA_RANGE_SREG: u16 = 1;
const NFTA_RANGE_OP: u16 = 2;
const NFTA_RANGE_FROM_DATA: u16 = 3;
const NFTA_RANGE_TO_DATA: u16 = 4;
const NFTA_BYTEORDER_SREG: u16 = 1;
const NFTA_BYTEORDER_DREG: u16 = 2;
const NFTA_BYTEORDER_OP: u16 = 3;
const NFTA_BYTEORDER_LEN: u16 = 4;
const NFTA_BYTEORDER_SIZE: u16 = 5;
const NFT_BYTEORDER_HTON: u32 = 1;
const NFTA_LOOKUP_SET: u16 = 1;
const NFTA_LOOKUP_SREG: u16 = 2;
const NFTA_LOOKUP_SET_ID: u16 = 4;
const NFTA_LOOKUP_FLAGS: u16 = 5;
const NFT_LOOKUP_F_INV: u32 = 1;
const NFTA_LOG_PREFIX: u16 = 2;
const NFTA_LOG_LEVEL: u16 = 5;

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
/// Bits per part of a concatenated type's number (nft's TYPE_BITS).
const TYPE_BITS: u32 = 6;
const NFTA_BITWISE_SREG: u16 = 1;
const NFTA_BITWISE_DREG: u16 = 2;
const NFTA_BITWISE_LEN: u16 = 3;
const NFTA_BITWISE_MASK: u16 = 4;
const NFTA_BITWISE_XOR: u16 = 5;
const NFTA_CMP_SREG: u16 = 1;
const NFTA_CMP_OP: u16 = 2;
const NFTA_CMP_DATA: u16 = 3;
const NFTA_IMMEDIATE_DREG: u16 = 1;
const NFTA_IMMEDIATE_DATA: u16 = 2;
/// The verdict register (NFT_REG_VERDICT).
const REG_VERDICT: u32 = 0;

const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_KEY_END: u16 = 10;
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

/// Elements to add to or remove from one set: [`Elem`]s, or
/// [`RangeElem`]s for an interval set ([`RangeElementOp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElementOp<E = Elem> {
    pub add: bool,
    /// NFPROTO_* of the table.
    pub family: u8,
    pub table: String,
    pub set: String,
    pub elems: Vec<E>,
}

/// One element of an interval set of concatenated type: the key where
/// its box starts and the key where it ends (equal for a single point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeElem {
    pub key: Vec<u8>,
    pub key_end: Vec<u8>,
}

/// Elements to add to or remove from one interval set.
pub type RangeElementOp = ElementOp<RangeElem>;

/// A set to declare: no flags, or an interval set of a concatenated type.
/// Made by [`SetDecl::new`], only for the types it can encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDecl {
    pub family: u8,
    pub table: String,
    pub name: String,
    pub key: KeyType,
    pub interval: bool,
    /// NFTA_SET_ID: names the set within the transaction.
    pub id: u32,
    type_id: u32,
    userdata: Vec<u8>,
}

impl SetDecl {
    /// `None` for a declaration whose encoding has not been checked
    /// against nft's: other key types, an interval set of one type.
    pub fn new(
        family: u8,
        table: &str,
        name: &str,
        key: KeyType,
        interval: bool,
        id: u32,
    ) -> Option<SetDecl> {
        if interval && key.0.len() < 2 {
            return None;
        }
        let userdata = set_userdata(&key)?;
        // A concatenation's type number: its parts' numbers, TYPE_BITS
        // each, the first highest.
        let type_id = key
            .0
            .iter()
            .try_fold(0u32, |acc, t| Some((acc << TYPE_BITS) | t.type_id()?))?;
        Some(SetDecl {
            family,
            table: table.to_string(),
            name: name.to_string(),
            key,
            interval,
            id,
            type_id,
            userdata,
        })
    }
}

/// A set named in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetRef {
    pub family: u8,
    pub table: String,
    pub name: String,
}

/// A change in one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Elements(ElementOp),
    RangeElements(RangeElementOp),
    /// A set made, or kept if it is there.
    AddSet(SetDecl),
    DeleteSet(SetRef),
    /// A regular chain (no hook) made, or kept if it is there.
    AddChain(ChainRef),
    /// Every rule of a chain removed.
    FlushChain(ChainRef),
    DeleteChain(ChainRef),
    /// A rule appended to a chain.
    AddRule(ChainRef, Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainRef {
    pub family: u8,
    pub table: String,
    pub chain: String,
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

fn value(v: &[u8]) -> Attrs {
    let mut a = Attrs::new();
    a.bytes(NFTA_DATA_VALUE, v);
    a
}

fn expr_attrs(e: &Expr) -> Attrs {
    let be = |n: u32| n.to_be_bytes();
    let mut data = Attrs::new();
    match e {
        Expr::MetaLoad { key, reg } => {
            data.bytes(NFTA_META_KEY, &be(*key))
                .bytes(NFTA_META_DREG, &be(*reg));
        }
        Expr::MetaStore { key, reg } => {
            data.bytes(NFTA_META_KEY, &be(*key))
                .bytes(NFTA_META_SREG, &be(*reg));
        }
        Expr::Payload {
            base,
            offset,
            len,
            reg,
        } => {
            data.bytes(NFTA_PAYLOAD_DREG, &be(*reg))
                .bytes(NFTA_PAYLOAD_BASE, &be(*base))
                .bytes(NFTA_PAYLOAD_OFFSET, &be(*offset))
                .bytes(NFTA_PAYLOAD_LEN, &be(*len));
        }
        Expr::Bitwise { reg, mask, xor } => {
            data.bytes(NFTA_BITWISE_SREG, &be(*reg))
                .bytes(NFTA_BITWISE_DREG, &be(*reg))
                .bytes(NFTA_BITWISE_LEN, &be(mask.len() as u32))
                .nested(NFTA_BITWISE_MASK, value(mask))
                .nested(NFTA_BITWISE_XOR, value(xor));
        }
        Expr::Cmp { reg, op, data: d } => {
            data.bytes(NFTA_CMP_SREG, &be(*reg))
                .bytes(NFTA_CMP_OP, &be(*op as u32))
                .nested(NFTA_CMP_DATA, value(d));
        }
        Expr::Range {
            reg,
            equal,
            from,
            to,
        } => {
            data.bytes(NFTA_RANGE_SREG, &be(*reg))
                .bytes(NFTA_RANGE_OP, &be(u32::from(!equal)))
                .nested(NFTA_RANGE_FROM_DATA, value(from))
                .nested(NFTA_RANGE_TO_DATA, value(to));
        }
        Expr::Hton { reg, len, size } => {
            data.bytes(NFTA_BYTEORDER_SREG, &be(*reg))
                .bytes(NFTA_BYTEORDER_DREG, &be(*reg))
                .bytes(NFTA_BYTEORDER_OP, &be(NFT_BYTEORDER_HTON))
                .bytes(NFTA_BYTEORDER_LEN, &be(*len))
                .bytes(NFTA_BYTEORDER_SIZE, &be(*size));
        }
        Expr::Lookup {
            reg,
            set,
            set_id,
            invert,
        } => {
            data.bytes(NFTA_LOOKUP_SREG, &be(*reg))
                .string(NFTA_LOOKUP_SET, set);
            if let Some(id) = set_id {
                data.bytes(NFTA_LOOKUP_SET_ID, &be(*id));
            }
            if *invert {
                data.bytes(NFTA_LOOKUP_FLAGS, &be(NFT_LOOKUP_F_INV));
            }
        }
        Expr::Log { prefix, level } => {
            if let Some(p) = prefix {
                data.string(NFTA_LOG_PREFIX, p);
            }
            if let Some(l) = level {
                data.bytes(NFTA_LOG_LEVEL, &be(*l));
            }
        }
        Expr::Verdict(v) => {
            data.bytes(NFTA_IMMEDIATE_DREG, &be(REG_VERDICT))
                .nested(NFTA_IMMEDIATE_DATA, data_attrs(&Data::Verdict(v.clone())));
        }
    }
    let mut a = Attrs::new();
    a.string(NFTA_EXPR_NAME, e.name())
        .nested(NFTA_EXPR_DATA, data);
    a
}

/// NFTA_SET_USERDATA as nft 1.0.6 writes it, which `nft list` reads the
/// key's type from: the key byte order (big endian for an address), and
/// for a concatenation an empty `typeof` description. `None` for a type
/// whose declaration is left to nft.
fn set_userdata(key: &KeyType) -> Option<Vec<u8>> {
    // TLVs: type, length, value; numbers in host order.
    const KEYBYTEORDER: u8 = 0;
    const KEY_TYPEOF: u8 = 3;
    const TYPEOF_EXPR: u8 = 0;
    const TYPEOF_DATA: u8 = 1;
    const BIG_ENDIAN: u32 = 2;
    const INVALID: u32 = 0;
    const EXPR_CONCAT: u32 = 13;
    let mut u = vec![KEYBYTEORDER, 4];
    match key.0.as_slice() {
        [DataType::Ipv4Addr | DataType::Ipv6Addr] => u.extend(BIG_ENDIAN.to_ne_bytes()),
        [DataType::Ipv4Addr | DataType::Ipv6Addr, DataType::InetProto]
        | [
            DataType::Ipv4Addr | DataType::Ipv6Addr,
            DataType::InetProto,
            DataType::InetService,
        ] => {
            u.extend(INVALID.to_ne_bytes());
            u.extend([KEY_TYPEOF, 8, TYPEOF_EXPR, 4]);
            u.extend(EXPR_CONCAT.to_ne_bytes());
            u.extend([TYPEOF_DATA, 0]);
        }
        _ => return None,
    }
    Some(u)
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

/// A whole batch for `ops`, sequence numbers from `seq`. Returns the
/// bytes and how many messages ask for an acknowledgement.
pub fn batch(ops: &[Op], seq: u32) -> (Vec<u8>, usize) {
    let msgs: Vec<_> = ops.iter().flat_map(messages).collect();
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
    message(
        &mut out,
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        seq,
        0,
        NFNL_SUBSYS_NFTABLES,
        &[],
    );
    (out, usize::from(last > 0))
}
