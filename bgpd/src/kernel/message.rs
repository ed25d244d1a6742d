//! Translation between [`KernelRoute`] and rtnetlink route messages.
use super::RTPROT_TARTAN;
use super::error::KernelError;
use super::route::{KernelRoute, Nexthop, canonical};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteNextHop, RouteProtocol,
    RouteScope, RouteType, RouteVia,
};
use std::net::IpAddr;

/// The metric bgpd installs at: the kernel's default per family, so that a
/// plain `ip route add` of the same prefix lands on the same key and is
/// detected as a conflict rather than silently shadowed or shadowing.
pub(crate) fn metric_of(prefix: &IpNet) -> u32 {
    match prefix {
        IpNet::V4(_) => 0,
        IpNet::V6(_) => 1024,
    }
}

pub(crate) fn family_of(prefix: &IpNet) -> AddressFamily {
    match prefix {
        IpNet::V4(_) => AddressFamily::Inet,
        IpNet::V6(_) => AddressFamily::Inet6,
    }
}

fn header(prefix: &IpNet) -> RouteHeader {
    RouteHeader {
        address_family: family_of(prefix),
        destination_prefix_length: prefix.prefix_len(),
        table: RouteHeader::RT_TABLE_MAIN,
        protocol: RouteProtocol::from(RTPROT_TARTAN),
        ..RouteHeader::default()
    }
}

/// The RTM_NEWROUTE body for `route` (flags are the caller's).
pub(crate) fn new_route(route: &KernelRoute) -> Result<RouteMessage, KernelError> {
    let prefix = route.prefix;
    let invalid = |reason| KernelError::Invalid { prefix, reason };
    if route.nexthops.is_empty() {
        return Err(invalid("no next hop"));
    }
    for hop in &route.nexthops {
        if prefix.addr().is_ipv6() && hop.gateway.is_ipv4() {
            return Err(invalid("IPv4 gateway for an IPv6 prefix"));
        }
        if hop.is_link_local() && hop.ifindex.is_none() {
            return Err(invalid("link-local gateway without an interface"));
        }
    }

    let mut msg = RouteMessage::default();
    msg.header = header(&prefix);
    msg.header.scope = RouteScope::Universe;
    msg.header.kind = RouteType::Unicast;
    if prefix.prefix_len() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(prefix.network().into()));
    }
    let metric = metric_of(&prefix);
    if metric != 0 {
        msg.attributes.push(RouteAttribute::Priority(metric));
    }
    if let [hop] = route.nexthops.as_slice() {
        msg.attributes.push(gateway_attr(&prefix, hop.gateway));
        if let Some(i) = hop.ifindex {
            msg.attributes.push(RouteAttribute::Oif(i));
        }
    } else {
        let hops = route
            .nexthops
            .iter()
            .map(|hop| {
                let mut nh = RouteNextHop::default();
                nh.interface_index = hop.ifindex.unwrap_or(0);
                nh.attributes.push(gateway_attr(&prefix, hop.gateway));
                nh
            })
            .collect();
        msg.attributes.push(RouteAttribute::MultiPath(hops));
    }
    Ok(msg)
}

/// RTA_GATEWAY in the route's own family, RTA_VIA for an IPv6 gateway of an
/// IPv4 route (RFC 5549 style).
fn gateway_attr(prefix: &IpNet, gateway: IpAddr) -> RouteAttribute {
    match (prefix, gateway) {
        (IpNet::V4(_), IpAddr::V6(v6)) => RouteAttribute::Via(RouteVia::Inet6(v6)),
        (_, gw) => RouteAttribute::Gateway(gw.into()),
    }
}

/// The RTM_DELROUTE body: any Tartan route for `prefix` in the main table.
/// The kernel matches the protocol, so routes of others are never hit.
pub(crate) fn del_route(prefix: &IpNet) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header = header(prefix);
    // NOWHERE and UNSPEC mean "any scope" and "any type" to the kernel.
    msg.header.scope = RouteScope::NoWhere;
    msg.header.kind = RouteType::Unspec;
    if prefix.prefix_len() > 0 {
        msg.attributes
            .push(RouteAttribute::Destination(prefix.network().into()));
    }
    msg
}

/// A dump request for the main table of one family, only of `protocol` if
/// given. The kernel filters when the socket has strict checking on; the
/// caller filters again in case it has not.
pub(crate) fn dump_request(family: AddressFamily, protocol: Option<u8>) -> RouteMessage {
    let mut msg = RouteMessage::default();
    msg.header.address_family = family;
    msg.header.table = RouteHeader::RT_TABLE_MAIN;
    msg.header.protocol = protocol.map(RouteProtocol::from).unwrap_or_default();
    msg
}

/// One main-table route of any protocol, as dumped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dumped {
    pub prefix: IpNet,
    pub protocol: u8,
    pub metric: u32,
    pub tos: u8,
    pub nexthops: Vec<Nexthop>,
}

impl Dumped {
    pub fn is_own(&self) -> bool {
        self.protocol == RTPROT_TARTAN
    }

    /// Whether a replace of `prefix` by bgpd would overwrite this route.
    pub fn holds_our_key(&self) -> bool {
        self.tos == 0 && self.metric == metric_of(&self.prefix)
    }

    pub fn into_route(self) -> KernelRoute {
        KernelRoute {
            prefix: self.prefix,
            nexthops: canonical(self.nexthops),
        }
    }
}

/// Decodes a dumped route; `None` for other tables, source-specific
/// routes and messages without a usable destination.
pub(crate) fn decode(msg: &RouteMessage) -> Option<Dumped> {
    let h = &msg.header;
    let mut table = u32::from(h.table);
    let mut dst: Option<IpAddr> = None;
    let mut metric = 0;
    let mut gateway = None;
    let mut oif = None;
    let mut nexthops = Vec::new();
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(a) => dst = ip_of(a),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Gateway(a) => gateway = ip_of(a),
            RouteAttribute::Via(v) => gateway = via_of(v),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::MultiPath(hops) => {
                nexthops.extend(hops.iter().filter_map(hop_of));
            }
            _ => {}
        }
    }
    if table != u32::from(RouteHeader::RT_TABLE_MAIN) || h.source_prefix_length != 0 {
        return None;
    }
    let len = h.destination_prefix_length;
    let prefix = match (h.address_family, dst) {
        (AddressFamily::Inet, Some(IpAddr::V4(a))) => IpNet::V4(Ipv4Net::new(a, len).ok()?),
        (AddressFamily::Inet, None) if len == 0 => IpNet::V4(Ipv4Net::default()),
        (AddressFamily::Inet6, Some(IpAddr::V6(a))) => IpNet::V6(Ipv6Net::new(a, len).ok()?),
        (AddressFamily::Inet6, None) if len == 0 => IpNet::V6(Ipv6Net::default()),
        _ => return None,
    };
    if let Some(gw) = gateway {
        nexthops.push(Nexthop {
            gateway: gw,
            ifindex: oif,
        });
    }
    Some(Dumped {
        prefix: prefix.trunc(),
        protocol: u8::from(h.protocol),
        metric,
        tos: h.tos,
        nexthops,
    })
}

fn hop_of(nh: &RouteNextHop) -> Option<Nexthop> {
    let gateway = nh.attributes.iter().find_map(|a| match a {
        RouteAttribute::Gateway(a) => ip_of(a),
        RouteAttribute::Via(v) => via_of(v),
        _ => None,
    })?;
    Some(Nexthop {
        gateway,
        ifindex: (nh.interface_index != 0).then_some(nh.interface_index),
    })
}

fn ip_of(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn via_of(v: &RouteVia) -> Option<IpAddr> {
    match v {
        RouteVia::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteVia::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(prefix: &str, hops: &[(&str, Option<u32>)]) -> KernelRoute {
        KernelRoute::new(
            prefix.parse().unwrap(),
            hops.iter()
                .map(|(g, i)| Nexthop {
                    gateway: g.parse().unwrap(),
                    ifindex: *i,
                })
                .collect(),
        )
    }

    #[test]
    fn new_route_round_trips_through_decode() {
        for r in [
            route("10.1.0.0/24", &[("10.0.0.2", None)]),
            route(
                "10.1.0.0/24",
                &[("10.0.0.3", Some(4)), ("10.0.0.2", Some(4))],
            ),
            route("fd00:1::/64", &[("fe80::2", Some(3))]),
            route("0.0.0.0/0", &[("10.0.0.2", None)]),
            route("10.2.0.0/16", &[("fd00::2", Some(3))]),
        ] {
            let msg = new_route(&r).unwrap();
            assert_eq!(u8::from(msg.header.protocol), RTPROT_TARTAN);
            let d = decode(&msg).unwrap();
            assert!(d.is_own() && d.holds_our_key());
            assert_eq!(d.into_route(), r);
        }
    }

    #[test]
    fn new_route_rejects_what_the_kernel_would() {
        assert!(new_route(&route("10.1.0.0/24", &[])).is_err());
        assert!(new_route(&route("fd00:1::/64", &[("fe80::2", None)])).is_err());
        assert!(new_route(&route("fd00:1::/64", &[("10.0.0.2", None)])).is_err());
    }

    #[test]
    fn decode_skips_other_tables() {
        let mut msg = new_route(&route("10.1.0.0/24", &[("10.0.0.2", None)])).unwrap();
        msg.header.table = 255;
        assert!(decode(&msg).is_none());
    }
}
