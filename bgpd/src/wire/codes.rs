//! Every NOTIFICATION bgpd sends, by name: the error codes and subcodes
//! (RFC 4271 4.5 and 6, RFC 4486 and RFC 8538 Cease subcodes, RFC 6608 FSM
//! subcodes, RFC 7313), a constructor for each error, and the RFC names
//! used in logs. Nothing outside this module spells a code as a number.
use super::notification::Notification;
use crate::model::Family;

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

/// UPDATE Message Error subcodes (RFC 4271 6.3) as a type, for the
/// decoders that pick one of several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum UpdateError {
    MalformedAttributeList = update_error::MALFORMED_ATTRIBUTE_LIST,
    UnrecognizedWellKnown = update_error::UNRECOGNIZED_WELL_KNOWN,
    MissingWellKnown = update_error::MISSING_WELL_KNOWN,
    AttributeFlags = update_error::ATTRIBUTE_FLAGS,
    AttributeLength = update_error::ATTRIBUTE_LENGTH,
    InvalidOrigin = update_error::INVALID_ORIGIN,
    InvalidNextHop = update_error::INVALID_NEXT_HOP,
    OptionalAttribute = update_error::OPTIONAL_ATTRIBUTE,
    InvalidNetworkField = update_error::INVALID_NETWORK_FIELD,
    MalformedAsPath = update_error::MALFORMED_AS_PATH,
}

/// FSM Error subcodes (RFC 6608 3).
pub mod fsm_error {
    pub const UNEXPECTED_IN_OPEN_SENT: u8 = 1;
    pub const UNEXPECTED_IN_OPEN_CONFIRM: u8 = 2;
    pub const UNEXPECTED_IN_ESTABLISHED: u8 = 3;
}

/// Subcodes of ROUTE-REFRESH Message Error (RFC 7313 5).
pub mod route_refresh_error {
    pub const INVALID_MESSAGE_LENGTH: u8 = 1;
}

impl Notification {
    // Message Header Error (RFC 4271 6.1).

    /// 1/1: the marker is wrong.
    pub fn connection_not_synchronized() -> Notification {
        Notification::new(code::MESSAGE_HEADER, header_error::NOT_SYNCHRONIZED, vec![])
    }

    /// 1/2, with the erroneous Length field as data.
    pub fn bad_message_length(length_field: [u8; 2]) -> Notification {
        Notification::new(
            code::MESSAGE_HEADER,
            header_error::BAD_LENGTH,
            length_field.to_vec(),
        )
    }

    /// 1/3, with the erroneous Type field as data.
    pub fn bad_message_type(msg_type: u8) -> Notification {
        Notification::new(code::MESSAGE_HEADER, header_error::BAD_TYPE, vec![msg_type])
    }

    // OPEN Message Error (RFC 4271 6.2, RFC 5492).

    /// 2/0: an OPEN whose fields cannot be parsed.
    pub fn malformed_open() -> Notification {
        Notification::new(code::OPEN, open_error::UNSPECIFIC, vec![])
    }

    /// 2/1, with the largest version we support (4) as data.
    pub fn unsupported_version() -> Notification {
        Notification::new(code::OPEN, open_error::UNSUPPORTED_VERSION, vec![0, 4])
    }

    /// 2/2, with the peer's My Autonomous System field as data.
    pub fn bad_peer_as(my_as_field: u16) -> Notification {
        Notification::new(
            code::OPEN,
            open_error::BAD_PEER_AS,
            my_as_field.to_be_bytes().to_vec(),
        )
    }

    /// 2/3, with `data` (empty, or the identifier that collides with ours).
    pub fn bad_bgp_identifier(data: Vec<u8>) -> Notification {
        Notification::new(code::OPEN, open_error::BAD_BGP_IDENTIFIER, data)
    }

    /// 2/4: an optional parameter other than Capabilities.
    pub fn unsupported_optional_parameter() -> Notification {
        Notification::new(
            code::OPEN,
            open_error::UNSUPPORTED_OPTIONAL_PARAMETER,
            vec![],
        )
    }

    /// 2/6: a hold time of 1 or 2 seconds.
    pub fn unacceptable_hold_time() -> Notification {
        Notification::new(code::OPEN, open_error::UNACCEPTABLE_HOLD_TIME, vec![])
    }

    // UPDATE Message Error (RFC 4271 6.3, RFC 7606).

    /// 3/1 without data: the attribute field cannot be walked.
    pub fn malformed_attribute_list() -> Notification {
        Notification::update_error(UpdateError::MalformedAttributeList, vec![])
    }

    /// 3/`error`, with `data` as the RFC asks for that subcode.
    pub fn update_error(error: UpdateError, data: Vec<u8>) -> Notification {
        Notification::new(code::UPDATE, error as u8, data)
    }

    // Hold Timer Expired (RFC 4271 6.5).

    /// 4/0.
    pub fn hold_timer_expired() -> Notification {
        Notification::new(code::HOLD_TIMER_EXPIRED, 0, vec![])
    }

    // Finite State Machine Error (RFC 4271 6.6, RFC 6608).

    /// 5/1: anything but OPEN or NOTIFICATION while OpenSent.
    pub fn unexpected_in_open_sent() -> Notification {
        Notification::new(code::FSM, fsm_error::UNEXPECTED_IN_OPEN_SENT, vec![])
    }

    /// 5/2: anything but KEEPALIVE or NOTIFICATION while OpenConfirm.
    pub fn unexpected_in_open_confirm() -> Notification {
        Notification::new(code::FSM, fsm_error::UNEXPECTED_IN_OPEN_CONFIRM, vec![])
    }

    /// 5/3: an OPEN while Established.
    pub fn unexpected_in_established() -> Notification {
        Notification::new(code::FSM, fsm_error::UNEXPECTED_IN_ESTABLISHED, vec![])
    }

    // Cease (RFC 4486, RFC 9003).

    /// 6/1, with AFI, SAFI and the limit as data (RFC 4486 4).
    pub fn max_prefixes_reached(family: Family, limit: u32) -> Notification {
        let (afi, safi) = family.afi_safi();
        let mut data = afi.to_be_bytes().to_vec();
        data.push(safi);
        data.extend_from_slice(&limit.to_be_bytes());
        Notification::new(code::CEASE, cease::MAX_PREFIXES, data)
    }

    /// 6/2 without a shutdown communication.
    pub fn administrative_shutdown() -> Notification {
        Notification::new(code::CEASE, cease::ADMINISTRATIVE_SHUTDOWN, vec![])
    }

    /// 6/3: the neighbor was removed from the configuration.
    pub fn peer_deconfigured() -> Notification {
        Notification::new(code::CEASE, cease::PEER_DECONFIGURED, vec![])
    }

    /// 6/4 without a shutdown communication.
    pub fn administrative_reset() -> Notification {
        Notification::new(code::CEASE, cease::ADMINISTRATIVE_RESET, vec![])
    }

    /// 6/6: the neighbor's configuration changed.
    pub fn other_configuration_change() -> Notification {
        Notification::new(code::CEASE, cease::OTHER_CONFIGURATION_CHANGE, vec![])
    }

    /// 6/10: BFD declared the path to the neighbor down (RFC 9384).
    pub fn bfd_down() -> Notification {
        Notification::new(code::CEASE, cease::BFD_DOWN, vec![])
    }

    /// 6/7: this connection lost a collision (RFC 4271 6.8), or came while
    /// the session was already Established.
    pub fn connection_collision() -> Notification {
        Notification::new(code::CEASE, cease::CONNECTION_COLLISION, vec![])
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

    // ROUTE-REFRESH Message Error (RFC 7313 5).

    /// 7/1, with the whole message as data.
    pub fn invalid_route_refresh_length(message: &[u8]) -> Notification {
        Notification::new(
            code::ROUTE_REFRESH,
            route_refresh_error::INVALID_MESSAGE_LENGTH,
            message.to_vec(),
        )
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
