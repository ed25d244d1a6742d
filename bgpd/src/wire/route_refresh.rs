//! ROUTE-REFRESH (RFC 2918, RFC 7313).

use super::message::{finish_message, start_message};
use super::notification::Notification;
use super::{Message, msg_type};
use crate::model::Family;

/// Appends a ROUTE-REFRESH (subtype 0, a normal request) for `family`.
pub fn encode_route_refresh(family: Family, out: &mut Vec<u8>) {
    let start = start_message(out, msg_type::ROUTE_REFRESH);
    let (afi, safi) = family.afi_safi();
    out.extend_from_slice(&afi.to_be_bytes());
    out.extend_from_slice(&[0, safi]);
    finish_message(out, start);
}

/// Decodes a whole ROUTE-REFRESH message. RFC 7313 5: a length other than
/// 23 is 7/1 with the whole message as data.
pub(super) fn decode_route_refresh(msg: &[u8]) -> Result<Message, Notification> {
    match msg.get(19..) {
        Some(&[a0, a1, subtype, safi]) => {
            let afi = u16::from_be_bytes([a0, a1]);
            Ok(Message::RouteRefresh {
                family: Family::from_afi_safi(afi, safi),
                afi,
                safi,
                subtype,
            })
        }
        _ => Err(Notification::invalid_route_refresh_length(msg)),
    }
}
