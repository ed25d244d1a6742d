//! UPDATE encoding: one attribute set, as many prefixes per message as fit.

use ipnet::IpNet;

use super::attr_decode::type_code as tc;
use super::attr_encode::{encode_attrs, put_attr};
pub use super::encode_error::EncodeError;
use super::message::{finish_message, start_message};
use super::nlri::{encode_prefix, encoded_len, max_prefix_len};
use super::{HEADER_LEN, MAX_MESSAGE_LEN, msg_type};
use crate::model::{Family, NextHop, PathAttrs, RawAttr};

/// How UPDATEs are written for one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncodeOptions {
    /// The peer negotiated 4-octet AS numbers (RFC 6793).
    pub four_octet_as: bool,
    /// The largest message to write: 4096, or up to 65535 with RFC 8654.
    pub max_len: usize,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            four_octet_as: true,
            max_len: MAX_MESSAGE_LEN,
        }
    }
}

/// Length of the withdrawn-routes and attribute length fields.
const LENGTH_FIELDS: usize = 4;
/// An MP attribute header, assuming the extended (2-octet) length.
const MP_ATTR_HEADER: usize = 4;

/// The usable message size: `max_len` limited to what the header can say,
/// and raised to what one prefix needs so that every call makes progress.
fn effective_max(opts: &EncodeOptions, floor: usize) -> usize {
    opts.max_len.clamp(floor, usize::from(u16::MAX))
}

fn check_family(family: Family, prefixes: &[IpNet]) -> Result<(), EncodeError> {
    match prefixes.iter().find(|p| Family::of(p) != family) {
        Some(p) => Err(EncodeError::PrefixFamilyMismatch { family, prefix: *p }),
        None => Ok(()),
    }
}

/// Appends UPDATEs announcing `prefixes` (all of `family`) with `attrs`;
/// `attrs.next_hop` is the next hop. IPv4 uses the NLRI field and NEXT_HOP;
/// IPv6 uses MP_REACH_NLRI (32-byte next hop when a link-local address is
/// given, RFC 2545). MP_REACH_NLRI is written first (RFC 7606 5.1), the
/// other attributes after it in type code order. Attributes are encoded
/// once; each message holds as many prefixes as fit in `opts.max_len`.
/// Unknown optional non-transitive attributes are dropped and unknown
/// transitive ones get the Partial bit (RFC 4271 5).
pub fn encode_announce(
    attrs: &PathAttrs,
    family: Family,
    prefixes: &[IpNet],
    opts: &EncodeOptions,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    check_family(family, prefixes)?;
    let mismatch = || EncodeError::NextHopMismatch {
        family,
        next_hop: attrs.next_hop,
    };
    let (v4_next_hop, mp_fixed) = match (family, attrs.next_hop) {
        (Family::Ipv4Unicast, NextHop::V4(nh)) => (Some(nh), None),
        (Family::Ipv6Unicast, NextHop::V6 { global, link_local }) => {
            let (afi, safi) = family.afi_safi();
            let mut fixed = Vec::with_capacity(37);
            fixed.extend_from_slice(&afi.to_be_bytes());
            fixed.push(safi);
            fixed.push(if link_local.is_some() { 32 } else { 16 });
            fixed.extend_from_slice(&global.octets());
            if let Some(ll) = link_local {
                fixed.extend_from_slice(&ll.octets());
            }
            fixed.push(0); // reserved
            (None, Some(fixed))
        }
        _ => return Err(mismatch()),
    };
    if prefixes.is_empty() {
        return Ok(());
    }
    let block = encode_attrs(attrs, v4_next_hop, opts.four_octet_as)?;
    let fixed = HEADER_LEN
        + LENGTH_FIELDS
        + block.len()
        + mp_fixed.as_ref().map_or(0, |f| MP_ATTR_HEADER + f.len());
    let max_len = opts.max_len.min(usize::from(u16::MAX));
    if fixed + max_prefix_len(family) > max_len {
        return Err(EncodeError::AttributesTooLarge {
            needed: fixed + max_prefix_len(family),
            max_len,
        });
    }

    let orig_len = out.len();
    let written = write_announces(prefixes, &block, mp_fixed.as_deref(), max_len - fixed, out);
    if written.is_err() {
        // Leave no half-written message behind.
        out.truncate(orig_len);
    }
    written
}

/// The message loop of [`encode_announce`]; `room` is what the prefixes
/// of one message may take.
fn write_announces(
    prefixes: &[IpNet],
    block: &[u8],
    mp_fixed: Option<&[u8]>,
    room: usize,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut nlri = Vec::with_capacity(room);
    let mut rest = prefixes;
    while !rest.is_empty() {
        nlri.clear();
        let n = pack(rest, room, &mut nlri).max(1);
        rest = &rest[n.min(rest.len())..];

        let start = start_message(out, msg_type::UPDATE);
        out.extend_from_slice(&[0, 0]); // no withdrawn routes
        let alen_at = out.len();
        out.extend_from_slice(&[0, 0]);
        if let Some(fixed) = mp_fixed {
            let mut value = Vec::with_capacity(fixed.len() + nlri.len());
            value.extend_from_slice(fixed);
            value.extend_from_slice(&nlri);
            put_attr(out, RawAttr::OPTIONAL, tc::MP_REACH_NLRI, &value)?;
        }
        out.extend_from_slice(block);
        let alen = out.len() - alen_at - 2;
        out[alen_at..alen_at + 2].copy_from_slice(&(alen as u16).to_be_bytes());
        if mp_fixed.is_none() {
            out.extend_from_slice(&nlri);
        }
        finish_message(out, start);
    }
    Ok(())
}

/// Encodes prefixes from the front of `prefixes` while they fit in
/// `room` bytes; returns how many. At least one always fits (the callers
/// make sure the longest prefix does).
fn pack(prefixes: &[IpNet], room: usize, out: &mut Vec<u8>) -> usize {
    let mut used = 0;
    for (i, p) in prefixes.iter().enumerate() {
        let len = encoded_len(p);
        if used + len > room {
            return i;
        }
        encode_prefix(p, out);
        used += len;
    }
    prefixes.len()
}

/// Appends UPDATEs withdrawing `prefixes` (all of `family`): the Withdrawn
/// Routes field for IPv4, MP_UNREACH_NLRI for IPv6. Prefixes of another
/// family are skipped. A `max_len` too small for one prefix is raised.
pub fn encode_withdraw(
    family: Family,
    prefixes: &[IpNet],
    opts: &EncodeOptions,
    out: &mut Vec<u8>,
) {
    let fixed = HEADER_LEN
        + LENGTH_FIELDS
        + match family {
            Family::Ipv4Unicast => 0,
            Family::Ipv6Unicast => MP_ATTR_HEADER + 3,
        };
    let max_len = effective_max(opts, fixed + max_prefix_len(family));
    let prefixes: Vec<IpNet> = prefixes
        .iter()
        .filter(|p| Family::of(p) == family)
        .copied()
        .collect();
    let mut nlri = Vec::with_capacity(max_len - fixed);
    let mut rest = &prefixes[..];
    while !rest.is_empty() {
        nlri.clear();
        let n = pack(rest, max_len - fixed, &mut nlri).max(1);
        rest = &rest[n.min(rest.len())..];
        let start = start_message(out, msg_type::UPDATE);
        match family {
            Family::Ipv4Unicast => {
                out.extend_from_slice(&(nlri.len() as u16).to_be_bytes());
                out.extend_from_slice(&nlri);
                out.extend_from_slice(&[0, 0]);
            }
            Family::Ipv6Unicast => {
                out.extend_from_slice(&[0, 0]);
                let mut value = Vec::with_capacity(3 + nlri.len());
                let (afi, safi) = family.afi_safi();
                value.extend_from_slice(&afi.to_be_bytes());
                value.push(safi);
                value.extend_from_slice(&nlri);
                let alen = value.len() + if value.len() > 255 { 4 } else { 3 };
                out.extend_from_slice(&(alen as u16).to_be_bytes());
                // Cannot fail: the value is below 65535 bytes.
                let _ = put_attr(out, RawAttr::OPTIONAL, tc::MP_UNREACH_NLRI, &value);
            }
        }
        finish_message(out, start);
    }
}

/// Appends an End-of-RIB marker (RFC 4724 2): an empty UPDATE for IPv4, an
/// UPDATE with an empty MP_UNREACH_NLRI for other families.
pub fn encode_end_of_rib(family: Family, out: &mut Vec<u8>) {
    let start = start_message(out, msg_type::UPDATE);
    match family {
        Family::Ipv4Unicast => out.extend_from_slice(&[0, 0, 0, 0]),
        Family::Ipv6Unicast => {
            let (afi, safi) = family.afi_safi();
            out.extend_from_slice(&[0, 0, 0, 6, RawAttr::OPTIONAL, tc::MP_UNREACH_NLRI, 3]);
            out.extend_from_slice(&afi.to_be_bytes());
            out.push(safi);
        }
    }
    finish_message(out, start);
}
