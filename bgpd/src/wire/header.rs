//! The 19-byte message header (RFC 4271 4.1): framing a byte stream into
//! messages, and writing headers for the encoders.

use super::message::{MARKER, finish_message, start_message};
use super::notification::Notification;
use super::{HEADER_LEN, MAX_MESSAGE_LEN, msg_type};

/// Framing over a receive buffer. `Ok(None)`: more bytes are needed.
/// `Ok(Some(len))`: a whole message of `len` bytes is at `buf[..len]`.
/// `Err`: the header is invalid; the NOTIFICATION to send (RFC 4271 6.1).
pub fn frame(buf: &[u8]) -> Result<Option<usize>, Notification> {
    // A bad marker is reported as soon as its first wrong byte arrives.
    let seen = buf.len().min(MARKER.len());
    if buf[..seen] != MARKER[..seen] {
        return Err(Notification::connection_not_synchronized());
    }
    if buf.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = check_header(buf)?;
    if buf.len() < len {
        return Ok(None);
    }
    Ok(Some(len))
}

/// Checks marker, length and type of a header (at least 19 bytes) and
/// returns the message length. The order of checks follows RFC 4271 6.1:
/// marker, then length against the absolute bounds, then type, then the
/// length against the minimum (or exact size) for the type.
pub(super) fn check_header(buf: &[u8]) -> Result<usize, Notification> {
    if buf.len() < HEADER_LEN || buf[..16] != MARKER {
        return Err(Notification::connection_not_synchronized());
    }
    let raw_len = [buf[16], buf[17]];
    let len = usize::from(u16::from_be_bytes(raw_len));
    let bad_len = || Notification::bad_message_length(raw_len);
    if !(HEADER_LEN..=MAX_MESSAGE_LEN).contains(&len) {
        return Err(bad_len());
    }
    let ty = buf[18];
    let len_ok = match ty {
        msg_type::OPEN => len >= HEADER_LEN + 10,
        msg_type::UPDATE => len >= HEADER_LEN + 4,
        msg_type::NOTIFICATION => len >= HEADER_LEN + 2,
        msg_type::KEEPALIVE => len == HEADER_LEN,
        // RFC 7313 5 gives a wrong ROUTE-REFRESH length its own error
        // (7/1, with the whole message as data); `decode` reports it.
        msg_type::ROUTE_REFRESH => true,
        _ => return Err(Notification::bad_message_type(ty)),
    };
    if !len_ok {
        return Err(bad_len());
    }
    Ok(len)
}

/// Appends a KEEPALIVE message (a bare header).
pub fn encode_keepalive(out: &mut Vec<u8>) {
    let start = start_message(out, msg_type::KEEPALIVE);
    finish_message(out, start);
}
