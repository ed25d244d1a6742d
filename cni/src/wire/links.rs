//! Small netlink queries both ends share.

use std::net::IpAddr;

use futures::TryStreamExt;
use rtnetlink::Handle;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};

use super::error::{WireError, errno};

/// The link called `name`, if any.
pub async fn by_name(h: &Handle, name: &str) -> Result<Option<LinkMessage>, WireError> {
    let mut s = h.link().get().match_name(name.to_string()).execute();
    match s.try_next().await {
        Ok(m) => Ok(m),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(None),
        Err(e) => Err(WireError::kernel(format!("look up {name}"), e)),
    }
}

pub fn is_up(l: &LinkMessage) -> bool {
    l.header.flags.contains(LinkFlags::Up)
}

pub fn mac(l: &LinkMessage) -> String {
    l.attributes
        .iter()
        .find_map(|a| match a {
            LinkAttribute::Address(m) => Some(super::mac_string(m)),
            _ => None,
        })
        .unwrap_or_default()
}

pub fn mtu(l: &LinkMessage) -> Option<u32> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Mtu(m) => Some(*m),
        _ => None,
    })
}

/// Delete link `name`; absent is fine.
pub async fn remove(h: &Handle, name: &str) -> Result<(), WireError> {
    let Some(l) = by_name(h, name).await? else {
        return Ok(());
    };
    tracing::debug!(link = name, "delete link");
    match h.link().del(l.header.index).execute().await {
        Ok(()) => Ok(()),
        Err(e) if errno(&e) == Some(libc::ENODEV) => Ok(()),
        Err(e) => Err(WireError::kernel(format!("delete {name}"), e)),
    }
}

/// The addresses on link `index`.
pub async fn addresses(h: &Handle, index: u32) -> Result<Vec<(IpAddr, u8)>, WireError> {
    let mut s = h.address().get().set_link_index_filter(index).execute();
    let mut out = Vec::new();
    while let Some(m) = s
        .try_next()
        .await
        .map_err(|e| WireError::kernel("list addresses", e))?
    {
        if m.header.index != index {
            continue;
        }
        for a in &m.attributes {
            if let AddressAttribute::Address(ip) = a {
                out.push((*ip, m.header.prefix_len));
            }
        }
    }
    Ok(out)
}

/// Every route of the main table of both families.
pub async fn routes(h: &Handle) -> Result<Vec<RouteMessage>, WireError> {
    let mut out = Vec::new();
    for req in [
        rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
        rtnetlink::RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(),
    ] {
        let mut s = h.route().get(req).execute();
        while let Some(m) = s
            .try_next()
            .await
            .map_err(|e| WireError::kernel("list routes", e))?
        {
            out.push(m);
        }
    }
    Ok(out)
}

pub fn route_dst(r: &RouteMessage) -> Option<IpAddr> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Destination(RouteAddress::Inet(v)) => Some(IpAddr::V4(*v)),
        RouteAttribute::Destination(RouteAddress::Inet6(v)) => Some(IpAddr::V6(*v)),
        _ => None,
    })
}

pub fn route_gateway(r: &RouteMessage) -> Option<IpAddr> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Gateway(RouteAddress::Inet(v)) => Some(IpAddr::V4(*v)),
        RouteAttribute::Gateway(RouteAddress::Inet6(v)) => Some(IpAddr::V6(*v)),
        _ => None,
    })
}

pub fn route_oif(r: &RouteMessage) -> Option<u32> {
    r.attributes.iter().find_map(|a| match a {
        RouteAttribute::Oif(i) => Some(*i),
        _ => None,
    })
}
