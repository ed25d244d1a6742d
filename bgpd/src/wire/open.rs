//! The OPEN message (RFC 4271 4.2, RFC 5492, RFC 9072).
//!
//! Decoding: the fixed fields and the optional parameter walk are ours,
//! with every length checked against the buffer; capability TLVs then go
//! through [`Capabilities::decode_param`] (zettabgp for the simple ones).
//! zettabgp's `BgpOpenMessage::decode_from` is not used: it ignores the
//! Optional Parameters Length and walks to the end of the buffer, and it
//! fails the whole OPEN on a hostname capability (see capabilities.rs).
//! Encoding is ours too: `BgpOpenMessage::encode_to` indexes past a short
//! buffer, truncates the parameter length to a byte and cannot write the
//! graceful restart N bit or capabilities it does not know.

use std::net::Ipv4Addr;

use super::as_path::AS_TRANS;
use super::capabilities::Capabilities;
use super::message::{finish_message, start_message};
use super::msg_type;
use super::notification::Notification;

/// Optional parameter type of capabilities (RFC 5492).
const PARAM_CAPABILITIES: u8 = 2;
/// RFC 9072: the marker of the extended optional parameters format.
const PARAM_EXTENDED: u8 = 255;

/// A decoded OPEN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub version: u8,
    /// The 4-octet AS capability's AS if present, else `my_as_field`.
    pub asn: u32,
    /// The 2-octet My Autonomous System field as sent.
    pub my_as_field: u16,
    pub hold_time: u16,
    pub router_id: Ipv4Addr,
    pub caps: Capabilities,
}

impl Open {
    /// The whole message. My Autonomous System is `asn`, or AS_TRANS when
    /// `asn` does not fit in 2 octets (RFC 6793 4.1); the 4-octet AS
    /// capability is written from `caps.four_octet_as`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        let start = start_message(&mut out, msg_type::OPEN);
        out.push(self.version);
        let my_as = u16::try_from(self.asn).unwrap_or(AS_TRANS as u16);
        out.extend_from_slice(&my_as.to_be_bytes());
        out.extend_from_slice(&self.hold_time.to_be_bytes());
        out.extend_from_slice(&self.router_id.octets());

        // One Capabilities parameter per group of TLVs that fits 255 bytes.
        let mut params: Vec<Vec<u8>> = Vec::new();
        for tlv in self.caps.encode_tlvs() {
            match params.last_mut() {
                Some(p) if p.len() + tlv.len() <= 255 => p.extend_from_slice(&tlv),
                _ => params.push(tlv),
            }
        }
        let short_len: usize = params.iter().map(|p| 2 + p.len()).sum();
        if short_len <= 255 {
            out.push(short_len as u8);
            for p in &params {
                out.extend_from_slice(&[PARAM_CAPABILITIES, p.len() as u8]);
                out.extend_from_slice(p);
            }
        } else {
            // RFC 9072: the parameters do not fit one length octet.
            let ext_len: usize = params.iter().map(|p| 3 + p.len()).sum();
            out.extend_from_slice(&[PARAM_EXTENDED, PARAM_EXTENDED]);
            out.extend_from_slice(&(ext_len.min(usize::from(u16::MAX)) as u16).to_be_bytes());
            for p in &params {
                out.push(PARAM_CAPABILITIES);
                out.extend_from_slice(&(p.len() as u16).to_be_bytes());
                out.extend_from_slice(p);
            }
        }
        finish_message(&mut out, start);
        out
    }
}

fn malformed() -> Notification {
    Notification::malformed_open()
}

/// What the local speaker requires of the peer's OPEN: the checks of
/// RFC 4271 6.2 that the message alone cannot make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenExpect {
    /// The AS configured for the peer.
    pub peer_as: u32,
    pub local_as: u32,
    pub local_id: Ipv4Addr,
}

impl OpenExpect {
    /// My Autonomous System (2/2); the data is the 2-octet field as sent.
    pub fn check_as(&self, asn: u32, my_as_field: u16) -> Result<(), Notification> {
        if asn == self.peer_as {
            Ok(())
        } else {
            Err(Notification::bad_peer_as(my_as_field))
        }
    }

    /// RFC 6286 2.2: only an internal peer must not have our identifier.
    pub fn check_id(&self, asn: u32, router_id: Ipv4Addr) -> Result<(), Notification> {
        if router_id == self.local_id && asn == self.local_as {
            Err(Notification::bad_bgp_identifier(
                router_id.octets().to_vec(),
            ))
        } else {
            Ok(())
        }
    }
}

/// Decodes the body of an OPEN (after the header) and checks it in the
/// order of RFC 4271 6.2: version, My Autonomous System (with `expect`
/// only), hold time, BGP identifier (compared with ours with `expect`
/// only), optional parameters. The parameters are read first, as far as
/// they can be, because the peer's AS may be in the 4-octet AS capability
/// (RFC 6793); an error in them is reported after the other checks.
pub(super) fn decode_open(body: &[u8], expect: Option<&OpenExpect>) -> Result<Open, Notification> {
    let Some(&version) = body.first() else {
        return Err(malformed());
    };
    if version != 4 {
        // Data: the largest version we support (RFC 4271 6.2).
        return Err(Notification::unsupported_version());
    }
    let [_, as0, as1, h0, h1, r0, r1, r2, r3, opt_len, params @ ..] = body else {
        return Err(malformed());
    };
    let my_as_field = u16::from_be_bytes([*as0, *as1]);
    let hold_time = u16::from_be_bytes([*h0, *h1]);
    let router_id = Ipv4Addr::new(*r0, *r1, *r2, *r3);
    let (caps, param_error) = read_params(*opt_len, params);
    let asn = caps.four_octet_as.unwrap_or(u32::from(my_as_field));

    if let Some(e) = expect {
        // AS_TRANS without the capability, next to a broken parameter: the
        // capability may be in what could not be read, so the AS is not
        // known and the parameter's error is the one to report.
        let as_known = caps.four_octet_as.is_some()
            || u32::from(my_as_field) != AS_TRANS
            || param_error.is_none();
        if as_known {
            e.check_as(asn, my_as_field)?;
        }
    }
    // RFC 4271 6.2: a hold time of 1 or 2 seconds is unacceptable.
    if hold_time == 1 || hold_time == 2 {
        return Err(Notification::unacceptable_hold_time());
    }
    // RFC 6286 2.2: any identifier but zero.
    if router_id.is_unspecified() {
        return Err(Notification::bad_bgp_identifier(vec![]));
    }
    if let Some(e) = expect {
        e.check_id(asn, router_id)?;
    }
    if let Some(n) = param_error {
        return Err(n);
    }
    Ok(Open {
        version,
        asn,
        my_as_field,
        hold_time,
        router_id,
        caps,
    })
}

/// Reads the optional parameters as far as they can be read: the
/// capabilities found, and the first error, in the order of the bytes.
fn read_params(opt_len: u8, params: &[u8]) -> (Capabilities, Option<Notification>) {
    let mut caps = Capabilities::default();
    let (fields, len_width, len) =
        if opt_len == PARAM_EXTENDED && params.first() == Some(&PARAM_EXTENDED) {
            // RFC 9072: 255, 255, a 2-octet length, then parameters with
            // 2-octet lengths.
            let [_, l0, l1, rest @ ..] = params else {
                return (caps, Some(malformed()));
            };
            (rest, 2, usize::from(u16::from_be_bytes([*l0, *l1])))
        } else {
            (params, 1, usize::from(opt_len))
        };
    let wrong_len = (fields.len() != len).then(malformed);
    let walked = walk_params(&fields[..len.min(fields.len())], len_width, &mut caps);
    (caps, wrong_len.or(walked))
}

/// Walks optional parameters whose length fields are `len_width` octets;
/// the first error. A parameter with a bad value is skipped, so that the
/// capabilities after it are still read; a length that overruns ends the
/// walk.
fn walk_params(mut rest: &[u8], len_width: usize, caps: &mut Capabilities) -> Option<Notification> {
    let mut first = None;
    while let Some((&ty, after_ty)) = rest.split_first() {
        let len = match after_ty.get(..len_width) {
            Some(&[l]) => usize::from(l),
            Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return first.or(Some(malformed())),
        };
        let Some(value) = after_ty.get(len_width..len_width + len) else {
            return first.or(Some(malformed()));
        };
        let read = if ty == PARAM_CAPABILITIES {
            caps.decode_param(value)
        } else {
            // RFC 4271 6.2 / RFC 5492: only capabilities are supported;
            // 2/4 carries no data.
            Err(Notification::unsupported_optional_parameter())
        };
        if let Err(n) = read {
            first.get_or_insert(n);
        }
        rest = &after_ty[len_width + len..];
    }
    first
}
