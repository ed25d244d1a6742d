//! nftables data types as the kernel stores them in set keys and map
//! values, and the JSON forms felix writes them in.
//!
//! A key of one type is its bytes as they are; a concatenation pads each
//! part to a multiple of four bytes (one 32-bit register each).

use serde_json::Value;

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
    /// The type nft names `name`; `None` for one felix does not write.
    pub fn parse(name: &str) -> Option<DataType> {
        Some(match name {
            "ipv4_addr" => DataType::Ipv4Addr,
            "ipv6_addr" => DataType::Ipv6Addr,
            "inet_proto" => DataType::InetProto,
            "inet_service" => DataType::InetService,
            "mark" => DataType::Mark,
            "ifname" => DataType::Ifname,
            _ => return None,
        })
    }

    /// `v` (felix's JSON form of a value of this type) as key bytes;
    /// `None` when it is not one.
    pub fn encode(self, v: &Value) -> Option<Vec<u8>> {
        match self {
            DataType::Ipv4Addr => {
                let a: std::net::Ipv4Addr = v.as_str()?.parse().ok()?;
                Some(a.octets().to_vec())
            }
            DataType::Ipv6Addr => {
                let a: std::net::Ipv6Addr = v.as_str()?.parse().ok()?;
                Some(a.octets().to_vec())
            }
            DataType::InetProto => Some(vec![proto(v)?]),
            DataType::InetService => {
                let p = u16::try_from(v.as_u64()?).ok()?;
                Some(p.to_be_bytes().to_vec())
            }
            DataType::Mark => {
                let m = u32::try_from(v.as_u64()?).ok()?;
                Some(m.to_ne_bytes().to_vec())
            }
            DataType::Ifname => {
                let name = v.as_str()?.as_bytes();
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

    /// An element field of an interval set: a value or `{"range": [a, b]}`,
    /// as (start, end) key bytes; `None` for anything else, or an empty
    /// range.
    pub fn encode_span(self, v: &Value) -> Option<(Vec<u8>, Vec<u8>)> {
        if let Some(r) = v.get("range") {
            let [lo, hi] = r.as_array()?.as_slice() else {
                return None;
            };
            if v.as_object()?.len() != 1 {
                return None;
            }
            let (lo, hi) = (self.encode(lo)?, self.encode(hi)?);
            // Big-endian bytes of one length compare as the values do.
            return (lo <= hi).then_some((lo, hi));
        }
        let one = self.encode(v)?;
        Some((one.clone(), one))
    }
}

fn proto(v: &Value) -> Option<u8> {
    if let Some(n) = v.as_u64() {
        return u8::try_from(n).ok();
    }
    Some(match v.as_str()? {
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
    /// From a declaration's `type`: a name or a list of names.
    pub fn parse(v: &Value) -> Option<KeyType> {
        let parts = match v {
            Value::String(s) => vec![DataType::parse(s)?],
            Value::Array(a) => a
                .iter()
                .map(|t| t.as_str().and_then(DataType::parse))
                .collect::<Option<Vec<_>>>()?,
            _ => return None,
        };
        (!parts.is_empty()).then_some(KeyType(parts))
    }

    /// `v` as key bytes: a plain value for one type, `{"concat": [...]}`
    /// with one part per type for a concatenation.
    pub fn encode(&self, v: &Value) -> Option<Vec<u8>> {
        if let [one] = self.0.as_slice() {
            return one.encode(v);
        }
        let parts = v.get("concat")?.as_array()?;
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
    /// type: `{"concat": [...]}`, each part a value or a range, as the
    /// start key and the end key.
    pub fn encode_span(&self, v: &Value) -> Option<(Vec<u8>, Vec<u8>)> {
        let parts = v.get("concat")?.as_array()?;
        if parts.len() != self.0.len() || self.0.len() < 2 || v.as_object()?.len() != 1 {
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

impl Verdict {
    /// `{"goto": {"target": "c"}}`, `{"jump": …}`, `{"accept": null}`, …
    pub fn parse(v: &Value) -> Option<Verdict> {
        let m = v.as_object()?;
        if m.len() != 1 {
            return None;
        }
        let (k, body) = m.iter().next()?;
        let target = || {
            let t = body.get("target")?.as_str()?;
            (!t.is_empty() && t.len() < CHAIN_NAME_MAX && !t.contains('\0')).then(|| t.to_string())
        };
        Some(match k.as_str() {
            "accept" => Verdict::Accept,
            "drop" => Verdict::Drop,
            "return" => Verdict::Return,
            "jump" => Verdict::Jump(target()?),
            "goto" => Verdict::Goto(target()?),
            _ => return None,
        })
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
