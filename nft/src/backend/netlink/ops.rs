//! The operations of one netlink transaction, as the encoder reads them
//! from a [`crate::Transaction`]: element changes (plain and interval),
//! sets declared and deleted, regular chains, rules as kernel
//! expressions.

use super::expr::Expr;
use super::types::Verdict;
use super::types::{DataType, KeyType};

/// Bits per part of a concatenated type's number (nft's TYPE_BITS).
const TYPE_BITS: u32 = 6;

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

/// One element of an interval set of one type: where a range starts, or
/// (`end`) the key one past its last value. `open`: the start of a range
/// that runs to the top of the type, which has no end element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub key: Vec<u8>,
    pub end: bool,
    pub open: bool,
}

/// Elements to add to or remove from an interval set of one type.
pub type BoundOp = ElementOp<Bound>;

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
    pub(crate) type_id: u32,
    pub(crate) userdata: Vec<u8>,
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
    /// Start and end elements of an interval set of one type.
    Bounds(BoundOp),
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
