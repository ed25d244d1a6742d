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

/// Decodes the body of an OPEN (after the header) and makes the checks
/// that need only the message (RFC 4271 6.2): version, hold time, BGP
/// identifier, optional parameters. The session checks the peer's AS and
/// compares the identifier with its own.
pub(super) fn decode_open(body: &[u8]) -> Result<Open, Notification> {
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

    let mut caps = Capabilities::default();
    if *opt_len == PARAM_EXTENDED && params.first() == Some(&PARAM_EXTENDED) {
        // RFC 9072: 255, 255, a 2-octet length, then parameters with
        // 2-octet lengths.
        let [_, l0, l1, rest @ ..] = params else {
            return Err(malformed());
        };
        let len = usize::from(u16::from_be_bytes([*l0, *l1]));
        if rest.len() != len {
            return Err(malformed());
        }
        walk_params(rest, 2, &mut caps)?;
    } else {
        if params.len() != usize::from(*opt_len) {
            return Err(malformed());
        }
        walk_params(params, 1, &mut caps)?;
    }

    // RFC 4271 6.2: a hold time of 1 or 2 seconds is unacceptable.
    if hold_time == 1 || hold_time == 2 {
        return Err(Notification::unacceptable_hold_time());
    }
    // RFC 6286 2.2: any identifier but zero.
    if router_id.is_unspecified() {
        return Err(Notification::bad_bgp_identifier(vec![]));
    }
    let asn = caps.four_octet_as.unwrap_or(u32::from(my_as_field));
    Ok(Open {
        version,
        asn,
        my_as_field,
        hold_time,
        router_id,
        caps,
    })
}

/// Walks optional parameters whose length fields are `len_width` octets.
fn walk_params(
    mut rest: &[u8],
    len_width: usize,
    caps: &mut Capabilities,
) -> Result<(), Notification> {
    while let Some((&ty, after_ty)) = rest.split_first() {
        let len = match after_ty.get(..len_width) {
            Some(&[l]) => usize::from(l),
            Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return Err(malformed()),
        };
        let value = after_ty
            .get(len_width..len_width + len)
            .ok_or_else(malformed)?;
        if ty != PARAM_CAPABILITIES {
            // RFC 4271 6.2 / RFC 5492: only capabilities are supported;
            // 2/4 carries no data.
            return Err(Notification::unsupported_optional_parameter());
        }
        caps.decode_param(value)?;
        rest = &after_ty[len_width + len..];
    }
    Ok(())
}
