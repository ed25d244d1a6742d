//! nftables data types as the kernel stores them in set keys and map
//! values, and the model's expressions for values of them.
//!
//! A key of one type is its bytes as they are; a concatenation pads each
//! part to a multiple of four bytes (one 32-bit register each).

use nftables::expr::{Expression, NamedExpression, Verdict as NftVerdict};
use nftables::schema::{SetType, SetTypeValue};

/// The data types felix's sets and maps use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    Ipv4Addr,
    Ipv6Addr,
    InetProto,
    InetService,
    /// Packet mark: a u32 in host byte order.
    Mark,
    /// Interface name: 16 bytes, zero padded.
    Ifname,
}

const IFNAMSIZ: usize = 16;

impl DataType {
    /// The model's type; `None` for one felix does not write.
    pub fn of(t: SetType) -> Option<DataType> {
        Some(match t {
            SetType::Ipv4Addr => DataType::Ipv4Addr,
            SetType::Ipv6Addr => DataType::Ipv6Addr,
            SetType::InetProto => DataType::InetProto,
            SetType::InetService => DataType::InetService,
            SetType::Mark => DataType::Mark,
            SetType::Ifname => DataType::Ifname,
            SetType::EtherAddr => return None,
        })
    }

    /// `v` (a value of this type as the model writes it) as key bytes;
    /// `None` when it is not one.
    pub fn encode(self, v: &Expression) -> Option<Vec<u8>> {
        match self {
            DataType::Ipv4Addr => {
                let a: std::net::Ipv4Addr = text(v)?.parse().ok()?;
                Some(a.octets().to_vec())
            }
            DataType::Ipv6Addr => {
                let a: std::net::Ipv6Addr = text(v)?.parse().ok()?;
                Some(a.octets().to_vec())
            }
            DataType::InetProto => Some(vec![proto(v)?]),
            DataType::InetService => {
                let p = u16::try_from(number(v)?).ok()?;
                Some(p.to_be_bytes().to_vec())
            }
            DataType::Mark => Some(number(v)?.to_ne_bytes().to_vec()),
            DataType::Ifname => {
                let name = text(v)?.as_bytes();
                // A name must leave room for its terminating zero; a
                // wildcard (`tar*`) is an interval in nft, not a key.
                if name.is_empty() || name.len() >= IFNAMSIZ || name.contains(&b'*') {
                    return None;
                }
                let mut b = name.to_vec();
                b.resize(IFNAMSIZ, 0);
                Some(b)
            }
        }
    }
}

impl DataType {
    /// nft's number for the type (`datatypes.h`), for the types whose
    /// set declarations go over netlink.
    pub fn type_id(self) -> Option<u32> {
        Some(match self {
            DataType::Ipv4Addr => 7,
            DataType::Ipv6Addr => 8,
            DataType::InetProto => 12,
            DataType::InetService => 13,
            DataType::Mark | DataType::Ifname => return None,
        })
    }

    /// Bytes a value of the type takes, unpadded.
    pub fn size(self) -> usize {
        match self {
            DataType::Ipv4Addr | DataType::Mark => 4,
            DataType::Ipv6Addr | DataType::Ifname => 16,
            DataType::InetProto => 1,
            DataType::InetService => 2,
        }
    }

    /// An element field of an interval set: a value or a range, as
    /// (start, end) key bytes; `None` for anything else, or an empty
    /// range.
    pub fn encode_span(self, v: &Expression) -> Option<(Vec<u8>, Vec<u8>)> {
        if let Expression::Range(r) = v {
            let [lo, hi] = &r.range;
            let (lo, hi) = (self.encode(lo)?, self.encode(hi)?);
            // Big-endian bytes of one length compare as the values do.
            return (lo <= hi).then_some((lo, hi));
        }
        let one = self.encode(v)?;
        Some((one.clone(), one))
    }
}

/// A string expression's text.
pub fn text<'a>(v: &'a Expression) -> Option<&'a str> {
    match v {
        Expression::String(s) => Some(s),
        _ => None,
    }
}

/// A number expression's value.
pub fn number(v: &Expression) -> Option<u32> {
    match v {
        Expression::Number(n) => Some(*n),
        _ => None,
    }
}

/// A concatenation's parts.
pub fn concat_parts<'a, 'b>(v: &'a Expression<'b>) -> Option<&'a [Expression<'b>]> {
    match v {
        Expression::Named(NamedExpression::Concat(parts)) => Some(parts),
        _ => None,
    }
}

fn proto(v: &Expression) -> Option<u8> {
    if let Some(n) = number(v) {
        return u8::try_from(n).ok();
    }
    Some(match text(v)? {
        "icmp" => 1,
        "tcp" => 6,
        "udp" => 17,
        "icmpv6" => 58,
        "sctp" => 132,
        _ => return None,
    })
}

/// A concatenated key: each part padded to a multiple of four bytes.
pub fn concat(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(parts.len() * 4);
    for p in parts {
        out.extend_from_slice(p);
        out.resize(out.len().div_ceil(4) * 4, 0);
    }
    out
}

/// A key type: one data type, or a concatenation of several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyType(pub Vec<DataType>);

impl KeyType {
    /// From a declaration's type: one type or a concatenation.
    pub fn of(v: &SetTypeValue) -> Option<KeyType> {
        KeyType::of_parts(match v {
            SetTypeValue::Single(t) => std::slice::from_ref(t),
            SetTypeValue::Concatenated(ts) => ts,
        })
    }

    /// From the parts of a type, one for a single type.
    pub fn of_parts(v: &[SetType]) -> Option<KeyType> {
        let parts = v
            .iter()
            .map(|t| DataType::of(*t))
            .collect::<Option<Vec<_>>>()?;
        (!parts.is_empty()).then_some(KeyType(parts))
    }

    /// `v` as key bytes: a plain value for one type, a concatenation
    /// with one part per type for a concatenated type.
    pub fn encode(&self, v: &Expression) -> Option<Vec<u8>> {
        if let [one] = self.0.as_slice() {
            return one.encode(v);
        }
        let parts = concat_parts(v)?;
        if parts.len() != self.0.len() {
            return None;
        }
        let encoded = self
            .0
            .iter()
            .zip(parts)
            .map(|(t, p)| t.encode(p))
            .collect::<Option<Vec<_>>>()?;
        let parts: Vec<&[u8]> = encoded.iter().map(Vec::as_slice).collect();
        Some(concat(&parts))
    }
}

impl KeyType {
    /// Key bytes for an element of an interval set of this (concatenated)
    /// type: a concatenation, each part a value or a range, as the start
    /// key and the end key.
    pub fn encode_span(&self, v: &Expression) -> Option<(Vec<u8>, Vec<u8>)> {
        let parts = concat_parts(v)?;
        if parts.len() != self.0.len() || self.0.len() < 2 {
            return None;
        }
        let spans = self
            .0
            .iter()
            .zip(parts)
            .map(|(t, p)| t.encode_span(p))
            .collect::<Option<Vec<_>>>()?;
        let starts: Vec<&[u8]> = spans.iter().map(|(a, _)| a.as_slice()).collect();
        let ends: Vec<&[u8]> = spans.iter().map(|(_, b)| b.as_slice()).collect();
        Some((concat(&starts), concat(&ends)))
    }

    /// Key length in bytes: a concatenation pads each part to four.
    pub fn size(&self) -> usize {
        match self.0.as_slice() {
            [one] => one.size(),
            parts => parts.iter().map(|t| t.size().div_ceil(4) * 4).sum(),
        }
    }
}

/// A map's value: a verdict or data of one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    Verdict,
    Data(DataType),
}

/// A verdict as the kernel codes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Accept,
    Drop,
    Return,
    Jump(String),
    Goto(String),
}

/// Kernel limit on chain names (NFT_CHAIN_MAXNAMELEN, with the zero).
const CHAIN_NAME_MAX: usize = 256;

/// A jump's or goto's target, if the kernel would take it.
pub fn target(t: &str) -> Option<String> {
    (!t.is_empty() && t.len() < CHAIN_NAME_MAX && !t.contains('\0')).then(|| t.to_string())
}

impl Verdict {
    /// The model's verdict; `None` for `continue` or a chain name the
    /// kernel would not take.
    pub fn of(v: &NftVerdict) -> Option<Verdict> {
        Some(match v {
            NftVerdict::Accept => Verdict::Accept,
            NftVerdict::Drop => Verdict::Drop,
            NftVerdict::Return => Verdict::Return,
            NftVerdict::Jump(t) => Verdict::Jump(target(&t.target)?),
            NftVerdict::Goto(t) => Verdict::Goto(target(&t.target)?),
            NftVerdict::Continue => return None,
        })
    }

    /// A verdict given as an expression (a map element's value).
    pub fn of_expr(v: &Expression) -> Option<Verdict> {
        match v {
            Expression::Verdict(v) => Verdict::of(v),
            _ => None,
        }
    }

    /// NFTA_VERDICT_CODE's value.
    pub fn code(&self) -> i32 {
        match self {
            Verdict::Drop => 0,
            Verdict::Accept => 1,
            Verdict::Return => -5,
            Verdict::Goto(_) => -4,
            Verdict::Jump(_) => -3,
        }
    }

    pub fn chain(&self) -> Option<&str> {
        match self {
            Verdict::Jump(c) | Verdict::Goto(c) => Some(c),
            _ => None,
        }
    }
}
