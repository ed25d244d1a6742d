//! The path attribute walk of an UPDATE, with the error handling of
//! RFC 7606: each malformed attribute is classified as "attribute
//! discard", "treat-as-withdraw" or "session reset" (section 2), and the
//! strongest one found wins (3.h).

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::DecodeOptions;
use super::as_path::{self, AS_TRANS};
use super::codes::UpdateError as Ue;
use super::nlri::decode_prefixes;
use super::notification::Notification;
use crate::model::{AsPath, Family, NextHop, Origin, PathAttrs, RawAttr, checks};

/// Attribute type codes.
pub(super) mod type_code {
    pub const ORIGIN: u8 = 1;
    pub const AS_PATH: u8 = 2;
    pub const NEXT_HOP: u8 = 3;
    pub const MED: u8 = 4;
    pub const LOCAL_PREF: u8 = 5;
    pub const ATOMIC_AGGREGATE: u8 = 6;
    pub const AGGREGATOR: u8 = 7;
    pub const COMMUNITIES: u8 = 8;
    pub const ORIGINATOR_ID: u8 = 9;
    pub const CLUSTER_LIST: u8 = 10;
    pub const MP_REACH_NLRI: u8 = 14;
    pub const MP_UNREACH_NLRI: u8 = 15;
    pub const AS4_PATH: u8 = 17;
    pub const AS4_AGGREGATOR: u8 = 18;
    pub const LARGE_COMMUNITY: u8 = 32;
}
use type_code as tc;

const OPTIONAL: u8 = RawAttr::OPTIONAL;
const TRANSITIVE: u8 = RawAttr::TRANSITIVE;
const EXTENDED: u8 = RawAttr::EXTENDED_LENGTH;

/// The Optional and Transitive bits each attribute we interpret must carry
/// (RFC 4271 5, RFC 4456, RFC 4760, RFC 6793, RFC 8092).
pub(super) fn defined_flags(code: u8) -> Option<u8> {
    Some(match code {
        tc::ORIGIN | tc::AS_PATH | tc::NEXT_HOP | tc::LOCAL_PREF | tc::ATOMIC_AGGREGATE => {
            TRANSITIVE
        }
        tc::MED | tc::ORIGINATOR_ID | tc::CLUSTER_LIST => OPTIONAL,
        tc::MP_REACH_NLRI | tc::MP_UNREACH_NLRI => OPTIONAL,
        tc::AGGREGATOR
        | tc::COMMUNITIES
        | tc::AS4_PATH
        | tc::AS4_AGGREGATOR
        | tc::LARGE_COMMUNITY => OPTIONAL | TRANSITIVE,
        _ => return None,
    })
}

pub(super) fn name(code: u8) -> &'static str {
    match code {
        tc::ORIGIN => "ORIGIN",
        tc::AS_PATH => "AS_PATH",
        tc::NEXT_HOP => "NEXT_HOP",
        tc::MED => "MULTI_EXIT_DISC",
        tc::LOCAL_PREF => "LOCAL_PREF",
        tc::ATOMIC_AGGREGATE => "ATOMIC_AGGREGATE",
        tc::AGGREGATOR => "AGGREGATOR",
        tc::COMMUNITIES => "COMMUNITIES",
        tc::ORIGINATOR_ID => "ORIGINATOR_ID",
        tc::CLUSTER_LIST => "CLUSTER_LIST",
        tc::MP_REACH_NLRI => "MP_REACH_NLRI",
        tc::MP_UNREACH_NLRI => "MP_UNREACH_NLRI",
        tc::AS4_PATH => "AS4_PATH",
        tc::AS4_AGGREGATOR => "AS4_AGGREGATOR",
        tc::LARGE_COMMUNITY => "LARGE_COMMUNITY",
        _ => "attribute",
    }
}

/// What one malformed attribute calls for (RFC 7606 2).
enum Fault {
    /// Drop the attribute, keep the routes.
    Discard(String),
    /// Withdraw every route of the UPDATE. The notification is the one
    /// RFC 4271 would send; it is used if RFC 7606 5.2 escalates.
    Withdraw(String, Notification),
    /// Reset the session with this notification.
    Reset(Notification),
}

/// The MP_REACH_NLRI of a family we speak.
#[derive(Debug)]
pub(super) struct MpReach {
    pub family: Family,
    pub next_hop: NextHop,
    pub prefixes: Vec<IpNet>,
}

/// Everything the attribute walk found.
#[derive(Default)]
pub(super) struct Walk {
    pub attrs: PathAttrs,
    /// The NEXT_HOP attribute (IPv4 NLRI only).
    pub next_hop: Option<Ipv4Addr>,
    pub mp_reach: Option<MpReach>,
    /// MP_UNREACH_NLRI of a family we speak.
    pub mp_unreach: Option<(Family, Vec<IpNet>)>,
    /// Set when the walk saw this attribute type (well formed or not).
    seen: [u64; 4],
    /// The first treat-as-withdraw reason, with its RFC 4271 notification.
    pub withdraw: Option<(String, Notification)>,
    pub discarded: Vec<String>,
    as4_path: Option<AsPath>,
    as4_aggregator: Option<(u32, Ipv4Addr)>,
    /// The walk stopped at a length conflict (RFC 7606 4).
    abandoned: bool,
}

impl Walk {
    pub fn saw(&self, code: u8) -> bool {
        self.seen[usize::from(code / 64)] & (1 << (code % 64)) != 0
    }

    fn mark(&mut self, code: u8) {
        self.seen[usize::from(code / 64)] |= 1 << (code % 64);
    }

    /// Whether any attribute other than MP_UNREACH_NLRI was present (or
    /// may have been: an abandoned walk does not know).
    pub fn saw_other_than_mp_unreach(&self) -> bool {
        if self.abandoned {
            return true;
        }
        let mut seen = self.seen;
        let c = tc::MP_UNREACH_NLRI;
        seen[usize::from(c / 64)] &= !(1 << (c % 64));
        seen.iter().any(|&w| w != 0)
    }

    pub fn set_withdraw(&mut self, why: String, notification: Notification) {
        if self.withdraw.is_none() {
            self.withdraw = Some((why, notification));
        }
    }
}

/// Walks the path attribute field. `Err` is a session reset.
pub(super) fn walk(field: &[u8], opts: &DecodeOptions) -> Result<Walk, Notification> {
    let mut w = Walk::default();
    let mut rest = field;
    while !rest.is_empty() {
        // RFC 7606 4: an attribute header that does not fit, or a length
        // that overruns the field, is treat-as-withdraw; the Total Path
        // Attribute Length still locates the NLRI.
        let Some(&[flags, code]) = rest.get(..2) else {
            w.set_withdraw(
                "path attribute header truncated".into(),
                Notification::malformed_attribute_list(),
            );
            w.abandoned = true;
            break;
        };
        let hdr = if flags & EXTENDED != 0 { 4 } else { 3 };
        let len = match rest.get(2..hdr) {
            Some([l]) => usize::from(*l),
            Some([hi, lo]) => usize::from(u16::from_be_bytes([*hi, *lo])),
            _ => {
                w.set_withdraw(
                    format!("{} header truncated", name(code)),
                    Notification::malformed_attribute_list(),
                );
                w.abandoned = true;
                break;
            }
        };
        let Some(raw) = rest.get(..hdr + len) else {
            if matches!(code, tc::MP_REACH_NLRI | tc::MP_UNREACH_NLRI) {
                // RFC 7606 3.j: its NLRI cannot be parsed, so its routes
                // cannot be withdrawn.
                return Err(Notification::malformed_attribute_list());
            }
            w.set_withdraw(
                format!(
                    "{} (type {code}) length {len} overruns the attribute field",
                    name(code)
                ),
                Notification::update_error(Ue::AttributeLength, rest.to_vec()),
            );
            w.abandoned = true;
            break;
        };
        rest = &rest[hdr + len..];
        let value = &raw[hdr..];

        if w.saw(code) {
            // RFC 7606 3.g: a repeated MP attribute is a reset; any other
            // repeat is dropped, the first occurrence kept.
            if matches!(code, tc::MP_REACH_NLRI | tc::MP_UNREACH_NLRI) {
                return Err(Notification::malformed_attribute_list());
            }
            w.discarded
                .push(format!("duplicate {} (type {code})", name(code)));
            continue;
        }
        w.mark(code);

        match apply(&mut w, flags, code, value, raw, opts) {
            Ok(()) => {}
            Err(Fault::Discard(why)) => w.discarded.push(why),
            Err(Fault::Withdraw(why, n)) => w.set_withdraw(why, n),
            Err(Fault::Reset(n)) => return Err(n),
        }
    }
    w.attrs.unknown.sort_by_key(|a| a.type_code);
    finish_as4(&mut w, opts);
    Ok(w)
}

fn u32_at(v: &[u8], at: usize) -> u32 {
    match v.get(at..at + 4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

fn withdraw(code: u8, error: Ue, why: &str, raw: &[u8]) -> Fault {
    Fault::Withdraw(
        format!("malformed {}: {why}", name(code)),
        Notification::update_error(error, raw.to_vec()),
    )
}

fn bad_len(code: u8, len: usize, raw: &[u8]) -> Fault {
    withdraw(code, Ue::AttributeLength, &format!("length {len}"), raw)
}

/// RFC 7606 7.5, 7.9, 7.10: LOCAL_PREF, ORIGINATOR_ID and CLUSTER_LIST
/// mean nothing from an external peer, so a malformed one from there is
/// discarded; from an internal peer `fault` stands.
fn internal_only(code: u8, opts: &DecodeOptions, fault: Fault) -> Fault {
    let ibgp_only = matches!(code, tc::LOCAL_PREF | tc::ORIGINATOR_ID | tc::CLUSTER_LIST);
    match fault {
        Fault::Withdraw(why, _) if ibgp_only && opts.external => Fault::Discard(why),
        other => other,
    }
}

/// Interprets one attribute (first occurrence of its type).
fn apply(
    w: &mut Walk,
    flags: u8,
    code: u8,
    v: &[u8],
    raw: &[u8],
    opts: &DecodeOptions,
) -> Result<(), Fault> {
    let flags_ok = defined_flags(code).is_none_or(|f| {
        // RFC 4271 4.3: Partial is 0 but on optional transitive attributes.
        let partial_ok = flags & RawAttr::PARTIAL == 0 || f == OPTIONAL | TRANSITIVE;
        flags & (OPTIONAL | TRANSITIVE) == f && partial_ok
    });
    if !flags_ok {
        let why = format!("flags {flags:#04x} conflict with the attribute's definition");
        match code {
            // RFC 6793 6: malformed AS4 attributes are discarded; RFC 7606
            // 7.6, 7.7: so are ATOMIC_AGGREGATE and AGGREGATOR.
            tc::AS4_PATH | tc::AS4_AGGREGATOR | tc::ATOMIC_AGGREGATE | tc::AGGREGATOR => {
                return Err(Fault::Discard(format!("{}: {why}", name(code))));
            }
            // Parsed all the same, so their prefixes can be withdrawn.
            tc::MP_REACH_NLRI | tc::MP_UNREACH_NLRI => {}
            // RFC 7606 3.c (and 7.5, 7.9, 7.10 for external peers).
            _ => {
                return Err(internal_only(
                    code,
                    opts,
                    withdraw(code, Ue::AttributeFlags, &why, raw),
                ));
            }
        }
    }
    let len = v.len();
    let a = &mut w.attrs;
    match code {
        // RFC 7606 7.1.
        tc::ORIGIN => match v {
            [o] => match Origin::from_u8(*o) {
                Some(origin) => a.origin = origin,
                None => {
                    return Err(withdraw(
                        code,
                        Ue::InvalidOrigin,
                        &format!("value {o}"),
                        raw,
                    ));
                }
            },
            _ => return Err(bad_len(code, len, raw)),
        },
        // RFC 7606 7.2.
        tc::AS_PATH => {
            let width = if opts.four_octet_as { 4 } else { 2 };
            let path = as_path::decode(v, width)
                .map_err(|why| withdraw(code, Ue::MalformedAsPath, &why, raw))?;
            // RFC 5065 5: bgpd is in no confederation, so every neighbour
            // is outside one and must not send confederation segments.
            if checks::has_confed_segments(&path) {
                let why = "confederation segments from outside the confederation";
                return Err(withdraw(code, Ue::MalformedAsPath, why, raw));
            }
            a.as_path = path;
        }
        // RFC 7606 7.3.
        tc::NEXT_HOP => match v {
            &[a0, a1, a2, a3] => w.next_hop = Some(Ipv4Addr::new(a0, a1, a2, a3)),
            _ => return Err(bad_len(code, len, raw)),
        },
        // RFC 7606 7.4, 7.5.
        tc::MED | tc::LOCAL_PREF => {
            if len != 4 {
                return Err(internal_only(code, opts, bad_len(code, len, raw)));
            }
            if code == tc::MED {
                a.med = Some(u32_at(v, 0));
            } else {
                a.local_pref = Some(u32_at(v, 0));
            }
        }
        // RFC 7606 7.6: attribute discard.
        tc::ATOMIC_AGGREGATE => {
            if len != 0 {
                return Err(Fault::Discard(format!("ATOMIC_AGGREGATE of length {len}")));
            }
            a.atomic_aggregate = true;
        }
        // RFC 7606 7.7: attribute discard; the AS width is the session's.
        tc::AGGREGATOR => {
            let agg = match (opts.four_octet_as, v) {
                (true, &[a0, a1, a2, a3, b0, b1, b2, b3]) => (
                    u32::from_be_bytes([a0, a1, a2, a3]),
                    Ipv4Addr::new(b0, b1, b2, b3),
                ),
                (false, &[a0, a1, b0, b1, b2, b3]) => (
                    u32::from(u16::from_be_bytes([a0, a1])),
                    Ipv4Addr::new(b0, b1, b2, b3),
                ),
                _ => return Err(Fault::Discard(format!("AGGREGATOR of length {len}"))),
            };
            // RFC 7607 2: AS 0 makes it malformed.
            if agg.0 == 0 {
                return Err(Fault::Discard("AGGREGATOR with AS 0".into()));
            }
            a.aggregator = Some(agg);
        }
        // RFC 7606 7.8: a non-zero multiple of 4.
        tc::COMMUNITIES => {
            if len == 0 || !len.is_multiple_of(4) {
                return Err(bad_len(code, len, raw));
            }
            a.communities = (0..len).step_by(4).map(|i| u32_at(v, i)).collect();
        }
        // RFC 7606 7.9.
        tc::ORIGINATOR_ID => match v {
            &[a0, a1, a2, a3] => a.originator_id = Some(Ipv4Addr::new(a0, a1, a2, a3)),
            _ => return Err(internal_only(code, opts, bad_len(code, len, raw))),
        },
        // RFC 7606 7.10: a non-zero multiple of 4.
        tc::CLUSTER_LIST => {
            if len == 0 || !len.is_multiple_of(4) {
                return Err(internal_only(code, opts, bad_len(code, len, raw)));
            }
            a.cluster_list = (0..len)
                .step_by(4)
                .map(|i| Ipv4Addr::from(u32_at(v, i)))
                .collect();
        }
        tc::MP_REACH_NLRI => {
            w.mp_reach = decode_mp_reach(v, raw)?;
            if !flags_ok {
                return Err(withdraw(code, Ue::AttributeFlags, "flags conflict", raw));
            }
        }
        tc::MP_UNREACH_NLRI => {
            w.mp_unreach = decode_mp_unreach(v, raw)?;
            if !flags_ok {
                return Err(withdraw(code, Ue::AttributeFlags, "flags conflict", raw));
            }
        }
        // RFC 6793 4.2.2/4.2.3: only a 2-octet session carries these; a
        // NEW speaker discards them from a NEW peer, and discards them
        // when malformed (RFC 6793 6).
        tc::AS4_PATH => {
            if opts.four_octet_as {
                return Err(Fault::Discard("AS4_PATH on a 4-octet AS session".into()));
            }
            let path = as_path::decode(v, 4)
                .map_err(|why| Fault::Discard(format!("malformed AS4_PATH: {why}")))?;
            if path.segments.iter().any(as_path::is_confed) {
                w.discarded
                    .push("confederation segments in AS4_PATH".into());
            }
            w.as4_path = Some(as_path::as4_path_of(&path));
        }
        tc::AS4_AGGREGATOR => match (opts.four_octet_as, v) {
            (true, _) => {
                return Err(Fault::Discard(
                    "AS4_AGGREGATOR on a 4-octet AS session".into(),
                ));
            }
            // RFC 7607 2, RFC 6793 6: AS 0 makes it malformed.
            (false, &[0, 0, 0, 0, ..]) => {
                return Err(Fault::Discard("AS4_AGGREGATOR with AS 0".into()));
            }
            (false, &[a0, a1, a2, a3, b0, b1, b2, b3]) => {
                let asn = u32::from_be_bytes([a0, a1, a2, a3]);
                w.as4_aggregator = Some((asn, Ipv4Addr::new(b0, b1, b2, b3)));
            }
            _ => return Err(Fault::Discard(format!("AS4_AGGREGATOR of length {len}"))),
        },
        // RFC 8092 5: a non-zero multiple of 12, else treat-as-withdraw.
        tc::LARGE_COMMUNITY => {
            if len == 0 || !len.is_multiple_of(12) {
                return Err(bad_len(code, len, raw));
            }
            a.large_communities = (0..len)
                .step_by(12)
                .map(|i| [u32_at(v, i), u32_at(v, i + 4), u32_at(v, i + 8)])
                .collect();
        }
        _ => {
            // RFC 4271 6.3: a well-known attribute we do not know.
            if flags & OPTIONAL == 0 {
                return Err(Fault::Reset(Notification::update_error(
                    Ue::UnrecognizedWellKnown,
                    raw.to_vec(),
                )));
            }
            a.unknown.push(RawAttr {
                flags: flags & (OPTIONAL | TRANSITIVE | RawAttr::PARTIAL),
                type_code: code,
                value: v.to_vec(),
            });
        }
    }
    Ok(())
}

/// A reset for an MP attribute whose NLRI cannot be located or parsed
/// (RFC 7606 3.j, 5.3, 7.11): "Optional Attribute Error" (RFC 4760 7).
fn mp_reset(raw: &[u8]) -> Fault {
    Fault::Reset(Notification::update_error(
        Ue::OptionalAttribute,
        raw.to_vec(),
    ))
}

fn decode_mp_reach(v: &[u8], raw: &[u8]) -> Result<Option<MpReach>, Fault> {
    // RFC 7606 5.3: shorter than 5 octets is incorrect.
    let [a0, a1, safi, nh_len, rest @ ..] = v else {
        return Err(mp_reset(raw));
    };
    let Some(family) = Family::from_afi_safi(u16::from_be_bytes([*a0, *a1]), *safi) else {
        // A family we did not negotiate: its NLRI is ignored (RFC 4760 6).
        return Ok(None);
    };
    let nh_len = usize::from(*nh_len);
    // The next hop, then one reserved octet, then the NLRI.
    let (Some(nh), Some(nlri)) = (rest.get(..nh_len), rest.get(nh_len + 1..)) else {
        return Err(mp_reset(raw));
    };
    let next_hop = match (family, nh) {
        (Family::Ipv4Unicast, &[b0, b1, b2, b3]) => NextHop::V4(Ipv4Addr::new(b0, b1, b2, b3)),
        (Family::Ipv6Unicast, _) if nh_len == 16 || nh_len == 32 => NextHop::V6 {
            global: v6_at(nh, 0),
            link_local: (nh_len == 32).then(|| v6_at(nh, 16)),
        },
        // RFC 7606 7.11: a next hop length the family does not allow.
        _ => return Err(mp_reset(raw)),
    };
    let mut prefixes = Vec::new();
    decode_prefixes(family, nlri, &mut prefixes).map_err(|_| mp_reset(raw))?;
    Ok(Some(MpReach {
        family,
        next_hop,
        prefixes,
    }))
}

fn decode_mp_unreach(v: &[u8], raw: &[u8]) -> Result<Option<(Family, Vec<IpNet>)>, Fault> {
    let [a0, a1, safi, nlri @ ..] = v else {
        return Err(mp_reset(raw));
    };
    let Some(family) = Family::from_afi_safi(u16::from_be_bytes([*a0, *a1]), *safi) else {
        return Ok(None);
    };
    let mut prefixes = Vec::new();
    decode_prefixes(family, nlri, &mut prefixes).map_err(|_| mp_reset(raw))?;
    Ok(Some((family, prefixes)))
}

fn v6_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut o = [0u8; 16];
    if let Some(s) = b.get(at..at + 16) {
        o.copy_from_slice(s);
    }
    Ipv6Addr::from(o)
}

/// RFC 6793 4.2.3: on a 2-octet session, AS4_AGGREGATOR replaces an
/// AGGREGATOR holding AS_TRANS, and AS4_PATH is merged into AS_PATH; an
/// AGGREGATOR holding a real AS makes both AS4 attributes be ignored.
fn finish_as4(w: &mut Walk, opts: &DecodeOptions) {
    if opts.four_octet_as {
        return;
    }
    let as4_path = w.as4_path.take();
    if let Some(as4_agg) = w.as4_aggregator.take() {
        match w.attrs.aggregator {
            Some((AS_TRANS, _)) => w.attrs.aggregator = Some(as4_agg),
            Some(_) => {
                w.discarded
                    .push("AS4_AGGREGATOR and AS4_PATH ignored: AGGREGATOR is not AS_TRANS".into());
                return;
            }
            None => w.discarded.push("AS4_AGGREGATOR without AGGREGATOR".into()),
        }
    }
    if let Some(as4) = as4_path
        && w.saw(tc::AS_PATH)
    {
        let path = std::mem::take(&mut w.attrs.as_path);
        w.attrs.as_path = as_path::merge_as4(path, as4);
    }
}
