//! CHECK: both ends, the pod's addresses and routes, the host routes. The
//! first thing found wrong is reported.

use std::net::IpAddr;

use ipnet::IpNet;
use rtnetlink::packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};

use super::error::WireError;
use super::host::Host;
use super::netns::{open, run_in};
use super::{GATEWAY_V4, WireRequest, links};

pub async fn check(req: &WireRequest) -> Result<(), WireError> {
    let ns = open(&req.netns)?;
    let r = req.clone();
    let path = ns.path.clone();
    let pod_index = run_in(&ns, move |h| async move {
        let bad = |what: String| {
            Err(WireError::Mismatch(format!(
                "interface {} in {path} {what}",
                r.ifname
            )))
        };
        let Some(link) = links::by_name(&h, &r.ifname).await? else {
            return bad("is missing".into());
        };
        if !links::is_up(&link) {
            return bad("is down".into());
        }
        if let Some(want) = r.pod_mac.map(|m| super::mac_string(&m)) {
            let have = links::mac(&link);
            if !have.eq_ignore_ascii_case(&want) {
                return bad(format!("has MAC {have}, not {want}"));
            }
        }
        if let Some(want) = r.mtu
            && links::mtu(&link) != Some(want)
        {
            let have = links::mtu(&link).map_or("none".into(), |m| m.to_string());
            return bad(format!("has MTU {have}, not {want}"));
        }
        let have = links::addresses(&h, link.header.index).await?;
        for a in &r.addresses {
            if !have
                .iter()
                .any(|(ip, len)| *ip == a.addr() && *len == a.prefix_len())
            {
                return bad(format!("lacks address {a}"));
            }
        }
        if r.addresses.iter().any(|a| matches!(a, IpNet::V4(_))) {
            let routes = links::routes(&h).await?;
            let default = routes.iter().any(|m| {
                m.header.destination_prefix_length == 0
                    && links::route_gateway(m) == Some(IpAddr::V4(GATEWAY_V4))
                    && links::route_oif(m) == Some(link.header.index)
            });
            if !default {
                return bad(format!("has no default route via {GATEWAY_V4}"));
            }
        }
        Ok(link.header.index)
    })
    .await?;

    let host = Host::connect()?;
    let name = &req.host_ifname;
    let bad = |what: String| Err(WireError::Mismatch(format!("host interface {name} {what}")));
    let Some(link) = links::by_name(host.handle(), name).await? else {
        return bad("is missing".into());
    };
    if !links::is_up(&link) {
        return bad("is down".into());
    }
    if !is_veth(&link) {
        return bad("is not a veth".into());
    }
    // IFLA_LINK of a veth is its peer's index, in the peer's namespace.
    if peer_index(&link) != Some(pod_index) {
        return bad(format!("is not the peer of {} in {}", req.ifname, ns.path));
    }
    if let Some(want) = req.mtu
        && links::mtu(&link) != Some(want)
    {
        return bad(format!("has MTU {:?}, not {want}", links::mtu(&link)));
    }
    let routes = links::routes(host.handle()).await?;
    for a in &req.addresses {
        let ok = routes.iter().any(|m| {
            links::route_dst(m) == Some(a.addr())
                && m.header.destination_prefix_length == a.max_prefix_len()
                && links::route_oif(m) == Some(link.header.index)
                && u8::from(m.header.protocol) == req.route_protocol
        });
        if !ok {
            return Err(WireError::Mismatch(format!(
                "no host route {a} via {name} with protocol {}",
                req.route_protocol
            )));
        }
    }
    Ok(())
}

fn is_veth(l: &LinkMessage) -> bool {
    l.attributes.iter().any(|a| match a {
        LinkAttribute::LinkInfo(infos) => infos
            .iter()
            .any(|i| matches!(i, LinkInfo::Kind(InfoKind::Veth))),
        _ => false,
    })
}

fn peer_index(l: &LinkMessage) -> Option<u32> {
    l.attributes.iter().find_map(|a| match a {
        LinkAttribute::Link(i) => Some(*i),
        _ => None,
    })
}
