//! Unit tests of the wire codec, and helpers to build raw messages.

mod as4;
mod corpus;
mod framing;
mod notification;
mod open;
mod packing;
mod rfc7606;
mod rfc7606_discard;
mod rfc7606_mp;
mod robustness;
mod roundtrip;

use super::*;

/// A whole message of type `ty` around `body`.
pub(super) fn message(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((HEADER_LEN + body.len()) as u16).to_be_bytes());
    m.push(ty);
    m.extend_from_slice(body);
    m
}

/// One path attribute (extended length when the value needs it).
pub(super) fn attr(flags: u8, code: u8, value: &[u8]) -> Vec<u8> {
    let mut a = vec![flags, code];
    if flags & 0x10 != 0 {
        a.extend_from_slice(&(value.len() as u16).to_be_bytes());
    } else {
        a.push(value.len() as u8);
    }
    a.extend_from_slice(value);
    a
}

/// An UPDATE message from its three fields.
pub(super) fn update_msg(withdrawn: &[u8], attrs: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut b = (withdrawn.len() as u16).to_be_bytes().to_vec();
    b.extend_from_slice(withdrawn);
    b.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    b.extend_from_slice(attrs);
    b.extend_from_slice(nlri);
    message(msg_type::UPDATE, &b)
}

pub(super) const FOUR: DecodeOptions = DecodeOptions {
    four_octet_as: true,
    external: false,
    local: None,
};
pub(super) const TWO: DecodeOptions = DecodeOptions {
    four_octet_as: false,
    external: false,
    local: None,
};

/// ORIGIN IGP, AS_PATH (sequence 65001, 4-octet), NEXT_HOP 192.0.2.1.
pub(super) fn base_attrs() -> Vec<u8> {
    let mut a = attr(0x40, 1, &[0]);
    a.extend(attr(0x40, 2, &[2, 1, 0, 0, 0xfd, 0xe9]));
    a.extend(attr(0x40, 3, &[192, 0, 2, 1]));
    a
}

/// NLRI 10.0.0.0/8.
pub(super) const NLRI_10: &[u8] = &[8, 10];

pub(super) fn decode_update(msg: &[u8], opts: &DecodeOptions) -> Result<Update, Notification> {
    match decode(msg, opts)? {
        Message::Update(u) => Ok(u),
        other => panic!("not an UPDATE: {other:?}"),
    }
}

pub(super) fn net(s: &str) -> ipnet::IpNet {
    s.parse().unwrap()
}
