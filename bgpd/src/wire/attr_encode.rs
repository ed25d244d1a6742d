//! Encoding a path attribute set once, for many UPDATEs.

use std::net::Ipv4Addr;

use super::as_path;
use super::attr_decode::{defined_flags, type_code as tc};
use super::encode_error::EncodeError;
use crate::model::{PathAttrs, RawAttr};

const OPTIONAL: u8 = RawAttr::OPTIONAL;
const TRANSITIVE: u8 = RawAttr::TRANSITIVE;
const WELL_KNOWN: u8 = TRANSITIVE;
const OPT_TRANS: u8 = OPTIONAL | TRANSITIVE;

/// Appends one attribute, with the Extended Length bit when the value is
/// longer than 255 octets.
pub(super) fn put_attr(
    out: &mut Vec<u8>,
    flags: u8,
    code: u8,
    value: &[u8],
) -> Result<(), EncodeError> {
    let len = value.len();
    if let Ok(short) = u8::try_from(len) {
        out.extend_from_slice(&[flags & !RawAttr::EXTENDED_LENGTH, code, short]);
    } else {
        let long = u16::try_from(len).map_err(|_| EncodeError::AttributeTooLong {
            type_code: code,
            len,
        })?;
        out.extend_from_slice(&[flags | RawAttr::EXTENDED_LENGTH, code]);
        out.extend_from_slice(&long.to_be_bytes());
    }
    out.extend_from_slice(value);
    Ok(())
}

/// Encodes every attribute of `attrs` except MP_REACH/MP_UNREACH, in type
/// code order. `next_hop` is written as NEXT_HOP (IPv4 NLRI only).
/// `four_octet_as` picks the AS width; towards a 2-octet peer, AS numbers
/// above 65535 become AS_TRANS and travel in AS4_PATH / AS4_AGGREGATOR
/// (RFC 6793 4.2.2).
pub(super) fn encode_attrs(
    attrs: &PathAttrs,
    next_hop: Option<Ipv4Addr>,
    four_octet_as: bool,
) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(64);
    let mut unknown: Vec<&RawAttr> = attrs
        .unknown
        .iter()
        // Only optional transitive attributes may be passed on (RFC 4271
        // 5), and never one that would duplicate an attribute we write.
        .filter(|a| a.flags & OPT_TRANS == OPT_TRANS && defined_flags(a.type_code).is_none())
        .collect();
    unknown.sort_by_key(|a| a.type_code);
    let mut unknown = unknown.into_iter().peekable();
    let mut scratch = Vec::new();

    // Writes the unknown attributes whose type code is below `code`, so
    // that the whole set stays in type code order.
    let mut flush = |out: &mut Vec<u8>, code: u16| -> Result<(), EncodeError> {
        while let Some(a) = unknown.next_if(|a| u16::from(a.type_code) < code) {
            // RFC 4271 5: set Partial on an unrecognized transitive
            // attribute that is passed on.
            put_attr(out, a.flags | RawAttr::PARTIAL, a.type_code, &a.value)?;
        }
        Ok(())
    };

    flush(&mut out, u16::from(tc::ORIGIN))?;
    put_attr(&mut out, WELL_KNOWN, tc::ORIGIN, &[attrs.origin as u8])?;

    flush(&mut out, u16::from(tc::AS_PATH))?;
    scratch.clear();
    as_path::encode(
        &attrs.as_path,
        if four_octet_as { 4 } else { 2 },
        &mut scratch,
    );
    put_attr(&mut out, WELL_KNOWN, tc::AS_PATH, &scratch)?;

    if let Some(nh) = next_hop {
        flush(&mut out, u16::from(tc::NEXT_HOP))?;
        put_attr(&mut out, WELL_KNOWN, tc::NEXT_HOP, &nh.octets())?;
    }
    if let Some(med) = attrs.med {
        flush(&mut out, u16::from(tc::MED))?;
        put_attr(&mut out, OPTIONAL, tc::MED, &med.to_be_bytes())?;
    }
    if let Some(lp) = attrs.local_pref {
        flush(&mut out, u16::from(tc::LOCAL_PREF))?;
        put_attr(&mut out, WELL_KNOWN, tc::LOCAL_PREF, &lp.to_be_bytes())?;
    }
    if attrs.atomic_aggregate {
        flush(&mut out, u16::from(tc::ATOMIC_AGGREGATE))?;
        put_attr(&mut out, WELL_KNOWN, tc::ATOMIC_AGGREGATE, &[])?;
    }
    if let Some((asn, addr)) = attrs.aggregator {
        flush(&mut out, u16::from(tc::AGGREGATOR))?;
        scratch.clear();
        if four_octet_as {
            scratch.extend_from_slice(&asn.to_be_bytes());
        } else {
            scratch.extend_from_slice(&as_path::two_octet(asn).to_be_bytes());
        }
        scratch.extend_from_slice(&addr.octets());
        put_attr(&mut out, OPT_TRANS, tc::AGGREGATOR, &scratch)?;
    }
    if !attrs.communities.is_empty() {
        flush(&mut out, u16::from(tc::COMMUNITIES))?;
        scratch.clear();
        for c in &attrs.communities {
            scratch.extend_from_slice(&c.to_be_bytes());
        }
        put_attr(&mut out, OPT_TRANS, tc::COMMUNITIES, &scratch)?;
    }
    if let Some(id) = attrs.originator_id {
        flush(&mut out, u16::from(tc::ORIGINATOR_ID))?;
        put_attr(&mut out, OPTIONAL, tc::ORIGINATOR_ID, &id.octets())?;
    }
    if !attrs.cluster_list.is_empty() {
        flush(&mut out, u16::from(tc::CLUSTER_LIST))?;
        scratch.clear();
        for id in &attrs.cluster_list {
            scratch.extend_from_slice(&id.octets());
        }
        put_attr(&mut out, OPTIONAL, tc::CLUSTER_LIST, &scratch)?;
    }
    if !four_octet_as && as_path::needs_as4_path(&attrs.as_path) {
        flush(&mut out, u16::from(tc::AS4_PATH))?;
        scratch.clear();
        as_path::encode(&as_path::as4_path_of(&attrs.as_path), 4, &mut scratch);
        put_attr(&mut out, OPT_TRANS, tc::AS4_PATH, &scratch)?;
    }
    if let Some((asn, addr)) = attrs.aggregator
        && !four_octet_as
        && asn > 0xffff
    {
        flush(&mut out, u16::from(tc::AS4_AGGREGATOR))?;
        scratch.clear();
        scratch.extend_from_slice(&asn.to_be_bytes());
        scratch.extend_from_slice(&addr.octets());
        put_attr(&mut out, OPT_TRANS, tc::AS4_AGGREGATOR, &scratch)?;
    }
    if !attrs.large_communities.is_empty() {
        flush(&mut out, u16::from(tc::LARGE_COMMUNITY))?;
        scratch.clear();
        for lc in &attrs.large_communities {
            for part in lc {
                scratch.extend_from_slice(&part.to_be_bytes());
            }
        }
        put_attr(&mut out, OPT_TRANS, tc::LARGE_COMMUNITY, &scratch)?;
    }
    flush(&mut out, 256)?;
    Ok(out)
}
