//! NOTIFICATION messages (RFC 4271 4.5) and the names of their error codes.

use std::fmt;

use super::message::{finish_message, start_message};
use super::{MAX_MESSAGE_LEN, msg_type};

/// A NOTIFICATION: the error code, subcode and data. Also the error type of
/// the decoders: an `Err(Notification)` is what the session sends before it
/// closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub code: u8,
    pub subcode: u8,
    pub data: Vec<u8>,
}

/// Error codes (RFC 4271 4.5, RFC 7313).
pub mod code {
    pub const MESSAGE_HEADER: u8 = 1;
    pub const OPEN: u8 = 2;
    pub const UPDATE: u8 = 3;
    pub const HOLD_TIMER_EXPIRED: u8 = 4;
    pub const FSM: u8 = 5;
    pub const CEASE: u8 = 6;
    pub const ROUTE_REFRESH: u8 = 7;
}

/// Message Header Error subcodes (RFC 4271 6.1).
pub mod header_error {
    pub const NOT_SYNCHRONIZED: u8 = 1;
    pub const BAD_LENGTH: u8 = 2;
    pub const BAD_TYPE: u8 = 3;
}

/// OPEN Message Error subcodes (RFC 4271 6.2, RFC 5492).
pub mod open_error {
    pub const UNSPECIFIC: u8 = 0;
    pub const UNSUPPORTED_VERSION: u8 = 1;
    pub const BAD_PEER_AS: u8 = 2;
    pub const BAD_BGP_IDENTIFIER: u8 = 3;
    pub const UNSUPPORTED_OPTIONAL_PARAMETER: u8 = 4;
    pub const UNACCEPTABLE_HOLD_TIME: u8 = 6;
    pub const UNSUPPORTED_CAPABILITY: u8 = 7;
}

/// UPDATE Message Error subcodes (RFC 4271 6.3).
pub mod update_error {
    pub const MALFORMED_ATTRIBUTE_LIST: u8 = 1;
    pub const UNRECOGNIZED_WELL_KNOWN: u8 = 2;
    pub const MISSING_WELL_KNOWN: u8 = 3;
    pub const ATTRIBUTE_FLAGS: u8 = 4;
    pub const ATTRIBUTE_LENGTH: u8 = 5;
    pub const INVALID_ORIGIN: u8 = 6;
    pub const INVALID_NEXT_HOP: u8 = 8;
    pub const OPTIONAL_ATTRIBUTE: u8 = 9;
    pub const INVALID_NETWORK_FIELD: u8 = 10;
    pub const MALFORMED_AS_PATH: u8 = 11;
}

/// Cease subcodes (RFC 4486, RFC 8538, RFC 9384).
pub mod cease {
    pub const MAX_PREFIXES: u8 = 1;
    pub const ADMINISTRATIVE_SHUTDOWN: u8 = 2;
    pub const PEER_DECONFIGURED: u8 = 3;
    pub const ADMINISTRATIVE_RESET: u8 = 4;
    pub const CONNECTION_REJECTED: u8 = 5;
    pub const OTHER_CONFIGURATION_CHANGE: u8 = 6;
    pub const CONNECTION_COLLISION: u8 = 7;
    pub const OUT_OF_RESOURCES: u8 = 8;
    pub const HARD_RESET: u8 = 9;
    pub const BFD_DOWN: u8 = 10;
}

impl Notification {
    pub fn new(code: u8, subcode: u8, data: Vec<u8>) -> Notification {
        Notification {
            code,
            subcode,
            data,
        }
    }

    /// A Cease with a shutdown communication (RFC 9003: a length octet and
    /// up to 255 octets of UTF-8), for 6/2 and 6/4. Longer text is cut at a
    /// character boundary.
    pub fn cease_with_message(subcode: u8, message: &str) -> Notification {
        let mut end = message.len().min(255);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let mut data = Vec::with_capacity(end + 1);
        data.push(end as u8);
        data.extend_from_slice(&message.as_bytes()[..end]);
        Notification::new(code::CEASE, subcode, data)
    }

    /// The shutdown communication of a 6/2 or 6/4 (RFC 9003), if present
    /// and well formed.
    pub fn shutdown_message(&self) -> Option<&str> {
        let is_shutdown = self.code == code::CEASE
            && matches!(
                self.subcode,
                cease::ADMINISTRATIVE_SHUTDOWN | cease::ADMINISTRATIVE_RESET
            );
        let (&len, rest) = self.data.split_first()?;
        if !is_shutdown || len == 0 {
            return None;
        }
        let text = rest.get(..usize::from(len))?;
        std::str::from_utf8(text).ok()
    }

    /// The whole message, header included. Data that would make the
    /// message longer than 4096 bytes is cut.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(21 + self.data.len());
        let start = start_message(&mut out, msg_type::NOTIFICATION);
        out.push(self.code);
        out.push(self.subcode);
        let room = MAX_MESSAGE_LEN - 21;
        out.extend_from_slice(&self.data[..self.data.len().min(room)]);
        finish_message(&mut out, start);
        out
    }

    /// Decodes the body of a NOTIFICATION (after the header).
    pub(super) fn decode_body(body: &[u8]) -> Notification {
        match body {
            [code, subcode, data @ ..] => Notification::new(*code, *subcode, data.to_vec()),
            // `frame` rejects NOTIFICATIONs shorter than 21 bytes.
            _ => Notification::new(0, 0, body.to_vec()),
        }
    }

    /// The RFC name of the error code.
    pub fn code_name(&self) -> &'static str {
        match self.code {
            code::MESSAGE_HEADER => "Message Header Error",
            code::OPEN => "OPEN Message Error",
            code::UPDATE => "UPDATE Message Error",
            code::HOLD_TIMER_EXPIRED => "Hold Timer Expired",
            code::FSM => "Finite State Machine Error",
            code::CEASE => "Cease",
            code::ROUTE_REFRESH => "ROUTE-REFRESH Message Error",
            _ => "Unknown Error Code",
        }
    }

    /// The RFC name of the subcode.
    pub fn subcode_name(&self) -> &'static str {
        match (self.code, self.subcode) {
            (_, 0) => "Unspecific",
            (1, 1) => "Connection Not Synchronized",
            (1, 2) => "Bad Message Length",
            (1, 3) => "Bad Message Type",
            (2, 1) => "Unsupported Version Number",
            (2, 2) => "Bad Peer AS",
            (2, 3) => "Bad BGP Identifier",
            (2, 4) => "Unsupported Optional Parameter",
            (2, 5) => "Authentication Failure (deprecated)",
            (2, 6) => "Unacceptable Hold Time",
            (2, 7) => "Unsupported Capability",
            (2, 11) => "Role Mismatch",
            (3, 1) => "Malformed Attribute List",
            (3, 2) => "Unrecognized Well-known Attribute",
            (3, 3) => "Missing Well-known Attribute",
            (3, 4) => "Attribute Flags Error",
            (3, 5) => "Attribute Length Error",
            (3, 6) => "Invalid ORIGIN Attribute",
            (3, 7) => "AS Routing Loop (deprecated)",
            (3, 8) => "Invalid NEXT_HOP Attribute",
            (3, 9) => "Optional Attribute Error",
            (3, 10) => "Invalid Network Field",
            (3, 11) => "Malformed AS_PATH",
            (5, 1) => "Receive Unexpected Message in OpenSent State",
            (5, 2) => "Receive Unexpected Message in OpenConfirm State",
            (5, 3) => "Receive Unexpected Message in Established State",
            (6, 1) => "Maximum Number of Prefixes Reached",
            (6, 2) => "Administrative Shutdown",
            (6, 3) => "Peer De-configured",
            (6, 4) => "Administrative Reset",
            (6, 5) => "Connection Rejected",
            (6, 6) => "Other Configuration Change",
            (6, 7) => "Connection Collision Resolution",
            (6, 8) => "Out of Resources",
            (6, 9) => "Hard Reset",
            (6, 10) => "BFD Down",
            (7, 1) => "Invalid Message Length",
            _ => "Unknown Subcode",
        }
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} ({}/{})",
            self.code_name(),
            self.subcode_name(),
            self.code,
            self.subcode
        )?;
        if let Some(text) = self.shutdown_message() {
            // Debug formatting escapes quotes and control characters, so
            // a peer's text cannot forge log lines.
            write!(f, ": {text:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Notification {}
