//! One kernel expression of a rule ([`Expr`]) as its netlink
//! attributes: the expression's name and its data.

use super::attrs::{Attrs, data_attrs, value};
use super::expr::Expr;
use super::ops::Data;

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

pub(crate) fn expr_attrs(e: &Expr) -> Attrs {
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
