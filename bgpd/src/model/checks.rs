//! Semantic checks of a received route that are not about its encoding:
//! a next hop no router can forward to (RFC 4271 6.3) and confederation
//! segments, which bgpd, a member of no confederation, must never accept
//! (RFC 5065 5). Both make the route treat-as-withdraw (RFC 7606 7.2, 7.3).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{AsPath, AsSegment, NextHop};

/// Whether the path holds AS_CONFED_SEQUENCE or AS_CONFED_SET segments.
pub fn has_confed_segments(path: &AsPath) -> bool {
    path.segments
        .iter()
        .any(|s| matches!(s, AsSegment::ConfedSequence(_) | AsSegment::ConfedSet(_)))
}

/// Why `nh` cannot be the next hop of a received route, if it cannot.
/// `own` holds the receiving speaker's addresses on the session. An IPv6
/// link-local second next hop (RFC 2545) is not checked.
pub fn unusable_next_hop(nh: &NextHop, own: &[IpAddr]) -> Option<String> {
    let addr = nh.addr()?;
    let why = match addr {
        IpAddr::V4(a) => v4_fault(a),
        IpAddr::V6(a) => v6_fault(a),
    };
    let why = why.or_else(|| {
        own.iter()
            .any(|o| o.to_canonical() == addr.to_canonical())
            .then_some("the receiving speaker's own address")
    })?;
    Some(format!("next hop {addr} is {why}"))
}

fn v4_fault(a: Ipv4Addr) -> Option<&'static str> {
    Some(if a.is_unspecified() {
        "unspecified"
    } else if a.octets()[0] == 0 {
        "in 0.0.0.0/8 (this network, RFC 1122: never a destination)"
    } else if a.is_loopback() {
        "loopback"
    } else if a.is_multicast() {
        "multicast"
    } else if a.is_broadcast() {
        "broadcast"
    } else if a.octets()[0] >= 240 {
        "class E (reserved)"
    } else {
        return None;
    })
}

fn v6_fault(a: Ipv6Addr) -> Option<&'static str> {
    Some(if a.is_unspecified() {
        "unspecified"
    } else if a.is_loopback() {
        "loopback"
    } else if a.is_multicast() {
        "multicast"
    } else {
        return None;
    })
}
