//! Prefix encoding (RFC 4271 4.3, RFC 4760 5): a length octet followed by
//! the fewest octets that hold that many bits. The hot path of a full-table
//! load, so it decodes into a caller's Vec without other allocation.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::model::Family;

/// Why a prefix list could not be parsed (RFC 7606 5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NlriError {
    /// A prefix length above 32 (IPv4) or 128 (IPv6).
    TooLong(u8),
    /// The last prefix runs past the end of the field.
    Overrun,
}

impl std::fmt::Display for NlriError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NlriError::TooLong(len) => write!(f, "prefix length {len} too long"),
            NlriError::Overrun => f.write_str("prefix runs past the end of the field"),
        }
    }
}

/// Appends every prefix in `field` to `out`. Host bits are cleared.
pub(super) fn decode_prefixes(
    family: Family,
    field: &[u8],
    out: &mut Vec<IpNet>,
) -> Result<(), NlriError> {
    // About the size of a typical prefix, so one reservation mostly does.
    out.reserve(field.len() / 4);
    match family {
        Family::Ipv4Unicast => decode_v4(field, out),
        Family::Ipv6Unicast => decode_v6(field, out),
    }
}

fn decode_v4(mut field: &[u8], out: &mut Vec<IpNet>) -> Result<(), NlriError> {
    while let Some((&len, rest)) = field.split_first() {
        if len > 32 {
            return Err(NlriError::TooLong(len));
        }
        let n = usize::from(len).div_ceil(8);
        let bytes = rest.get(..n).ok_or(NlriError::Overrun)?;
        let mut octets = [0u8; 4];
        octets[..n].copy_from_slice(bytes);
        let bits = u32::from_be_bytes(octets) & mask32(len);
        // Cannot fail: len <= 32 was checked above.
        let net = Ipv4Net::new(Ipv4Addr::from(bits), len).map_err(|_| NlriError::TooLong(len))?;
        out.push(IpNet::V4(net));
        field = &rest[n..];
    }
    Ok(())
}

fn decode_v6(mut field: &[u8], out: &mut Vec<IpNet>) -> Result<(), NlriError> {
    while let Some((&len, rest)) = field.split_first() {
        if len > 128 {
            return Err(NlriError::TooLong(len));
        }
        let n = usize::from(len).div_ceil(8);
        let bytes = rest.get(..n).ok_or(NlriError::Overrun)?;
        let mut octets = [0u8; 16];
        octets[..n].copy_from_slice(bytes);
        let bits = u128::from_be_bytes(octets) & mask128(len);
        let net = Ipv6Net::new(Ipv6Addr::from(bits), len).map_err(|_| NlriError::TooLong(len))?;
        out.push(IpNet::V6(net));
        field = &rest[n..];
    }
    Ok(())
}

fn mask32(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

fn mask128(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// The encoded size of a prefix.
pub(super) fn encoded_len(prefix: &IpNet) -> usize {
    1 + usize::from(prefix.prefix_len()).div_ceil(8)
}

/// Appends one prefix; host bits are cleared on the wire.
pub(super) fn encode_prefix(prefix: &IpNet, out: &mut Vec<u8>) {
    let len = prefix.prefix_len();
    let n = usize::from(len).div_ceil(8);
    out.push(len);
    match prefix.trunc() {
        IpNet::V4(p) => out.extend_from_slice(&p.addr().octets()[..n]),
        IpNet::V6(p) => out.extend_from_slice(&p.addr().octets()[..n]),
    }
}

/// The longest encoding of one prefix of `family`.
pub(super) fn max_prefix_len(family: Family) -> usize {
    match family {
        Family::Ipv4Unicast => 5,
        Family::Ipv6Unicast => 17,
    }
}
