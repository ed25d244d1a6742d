//! The BGP wire codec: framing, and decoding and encoding of every message
//! type (RFC 4271, RFC 4760, RFC 6793, RFC 7606, RFC 2918/7313, RFC 4724).
//!
//! What uses zettabgp: only the capability TLVs of the OPEN message with
//! simple, exact decodings (multiprotocol, route refresh, 4-octet AS,
//! enhanced route refresh), through `BgpCapability::from_buffer`, and only
//! after our own walk has checked every optional parameter and capability
//! length against the buffer (see capabilities.rs and open.rs for what in
//! zettabgp's OPEN code misparses and why the rest of the OPEN is ours).
//!
//! What is ours, and why: framing and the header, because zettabgp
//! underflows on a header length below 19; UPDATE decoding and encoding,
//! because zettabgp reads past the buffer on malformed attributes (and
//! panicked on ~2.6% of short random bodies), cannot keep unknown
//! attributes byte for byte, cannot express RFC 7606 treat-as-withdraw
//! and allocates per prefix; NOTIFICATION, KEEPALIVE and ROUTE-REFRESH,
//! because they are a few bytes each. No input makes any of it panic.

mod as_path;
mod attr_decode;
mod attr_encode;
mod capabilities;
mod codes;
mod encode_error;
mod header;
mod message;
mod nlri;
mod notification;
mod open;
mod route_refresh;
mod update_decode;
mod update_encode;

#[cfg(test)]
mod tests;

pub use as_path::AS_TRANS;
pub use capabilities::{Capabilities, GracefulRestartCap, cap_code};
pub use codes::{
    UpdateError, cease, code, fsm_error, header_error, open_error, route_refresh_error,
    update_error,
};
pub use header::{encode_keepalive, frame};
pub use notification::Notification;
pub use open::{Open, OpenExpect};
pub use route_refresh::encode_route_refresh;
pub use update_decode::{Reach, Update};
pub use update_encode::{
    EncodeError, EncodeOptions, encode_announce, encode_end_of_rib, encode_withdraw,
};

use crate::model::Family;
use std::net::IpAddr;

pub const HEADER_LEN: usize = 19;
pub const MAX_MESSAGE_LEN: usize = 4096;

/// Message types (RFC 4271 4.1, RFC 2918).
pub mod msg_type {
    pub const OPEN: u8 = 1;
    pub const UPDATE: u8 = 2;
    pub const NOTIFICATION: u8 = 3;
    pub const KEEPALIVE: u8 = 4;
    pub const ROUTE_REFRESH: u8 = 5;
}

/// What the session negotiated that changes how messages are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Both sides announced 4-octet AS support (RFC 6793). Default: true.
    pub four_octet_as: bool,
    /// The peer is in another AS: some malformed attributes are then
    /// discarded rather than withdrawing the routes (RFC 7606 7.5, 7.9,
    /// 7.10). Default: false.
    pub external: bool,
    /// Our address on the session, which no received route may have as
    /// its next hop (RFC 4271 6.3). Default: none.
    pub local: Option<IpAddr>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            four_octet_as: true,
            external: false,
            local: None,
        }
    }
}

/// One decoded message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Open(Open),
    Update(Update),
    Notification(Notification),
    Keepalive,
    RouteRefresh {
        /// `None` for an AFI/SAFI Tartan does not speak.
        family: Option<Family>,
        afi: u16,
        safi: u8,
        /// RFC 7313: 0 request, 1 begin, 2 end of route refresh.
        subtype: u8,
    },
}

/// Decodes one whole framed message (header included). `Err` is the
/// NOTIFICATION to send before resetting the session.
pub fn decode(msg: &[u8], opts: &DecodeOptions) -> Result<Message, Notification> {
    decode_with(msg, opts, None)
}

/// [`decode`] on a session waiting for the peer's OPEN: an OPEN is also
/// checked against what we require of the peer, every check in the order
/// of RFC 4271 6.2.
pub fn decode_expecting(
    msg: &[u8],
    opts: &DecodeOptions,
    expect: &OpenExpect,
) -> Result<Message, Notification> {
    decode_with(msg, opts, Some(expect))
}

fn decode_with(
    msg: &[u8],
    opts: &DecodeOptions,
    expect: Option<&OpenExpect>,
) -> Result<Message, Notification> {
    let len = header::check_header(msg)?;
    if len != msg.len() {
        let raw = [msg[16], msg[17]];
        return Err(Notification::bad_message_length(raw));
    }
    let body = &msg[HEADER_LEN..];
    match msg[18] {
        msg_type::OPEN => open::decode_open(body, expect).map(Message::Open),
        msg_type::UPDATE => update_decode::decode_update(body, opts).map(Message::Update),
        msg_type::NOTIFICATION => Ok(Message::Notification(Notification::decode_body(body))),
        msg_type::KEEPALIVE => Ok(Message::Keepalive),
        _ => route_refresh::decode_route_refresh(msg),
    }
}
