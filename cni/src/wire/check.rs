//! CHECK: both ends, the pod's addresses and routes, the host routes.

use std::net::IpAddr;

use ipnet::IpNet;

use super::error::WireError;
use super::host::Host;
use super::netns::{open, run_in};
use super::{GATEWAY_V4, WireRequest, links};

pub async fn check(req: &WireRequest) -> Result<(), WireError> {
    let ns = open(&req.netns)?;
    let r = req.clone();
    let path = ns.path.clone();
    run_in(&ns, move |h| async move {
        let bad = |what: String| Err(WireError::Mismatch(format!("{what} in {path}")));
        let Some(link) = links::by_name(&h, &r.ifname).await? else {
            return bad(format!("interface {} is missing", r.ifname));
        };
        if !links::is_up(&link) {
            return bad(format!("interface {} is down", r.ifname));
        }
        if let Some(want) = r.mtu
            && links::mtu(&link) != Some(want)
        {
            return bad(format!(
                "interface {} has MTU {:?}, not {want}",
                r.ifname,
                links::mtu(&link)
            ));
        }
        let have = links::addresses(&h, link.header.index).await?;
        for a in &r.addresses {
            if !have
                .iter()
                .any(|(ip, len)| *ip == a.addr() && *len == a.prefix_len())
            {
                return bad(format!("interface {} lacks address {a}", r.ifname));
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
                return bad(format!(
                    "no default route via {GATEWAY_V4} dev {}",
                    r.ifname
                ));
            }
        }
        Ok(())
    })
    .await?;

    let host = Host::connect()?;
    let name = &req.host_ifname;
    let Some(link) = links::by_name(host.handle(), name).await? else {
        return Err(WireError::Mismatch(format!(
            "host interface {name} is missing"
        )));
    };
    if !links::is_up(&link) {
        return Err(WireError::Mismatch(format!(
            "host interface {name} is down"
        )));
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
