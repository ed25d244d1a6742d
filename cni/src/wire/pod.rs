//! The pod's end, configured from inside the pod's namespace.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use rtnetlink::packet_route::address::{AddressAttribute, AddressFlags};
use rtnetlink::packet_route::neighbour::NeighbourState;
use rtnetlink::packet_route::route::RouteScope;
use rtnetlink::{LinkUnspec, RouteMessageBuilder};

use super::error::WireError;
use super::netns::{Ns, run_in};
use super::{GATEWAY_V4, GATEWAY_V6, HOST_MAC, WireRequest, links};

pub async fn link_exists(ns: &Ns, ifname: &str) -> Result<bool, WireError> {
    let name = ifname.to_string();
    run_in(ns, move |h| async move {
        Ok(links::by_name(&h, &name).await?.is_some())
    })
    .await
}

pub async fn remove_link(ns: &Ns, ifname: &str) -> Result<(), WireError> {
    let name = ifname.to_string();
    run_in(ns, move |h| async move { links::remove(&h, &name).await }).await
}

/// Bring the pod end up with its addresses, gateway and default routes.
/// Returns its index and MAC.
pub async fn configure(ns: &Ns, req: &WireRequest) -> Result<(u32, String), WireError> {
    let req = req.clone();
    let path = ns.path.clone();
    run_in(ns, move |h| async move {
        let k = |what: &str| format!("{what} in {path}");
        if let Some(lo) = links::by_name(&h, "lo").await? {
            h.link()
                .set(LinkUnspec::new_with_index(lo.header.index).up().build())
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("set lo up"), e))?;
        }
        let link = links::by_name(&h, &req.ifname)
            .await?
            .ok_or_else(|| WireError::kernel(k(&req.ifname), "the pod end is missing"))?;
        let index = link.header.index;
        let mac = links::mac(&link);
        let v6 = req.addresses.iter().any(|a| matches!(a, IpNet::V6(_)));
        if v6 {
            // The pod's own addresses skip duplicate detection (IPAM made
            // them unique), so they work at once.
            // (The addresses also carry IFA_F_NODAD; this covers the rest.)
            if let Err(e) =
                super::netns::sysctl(&format!("net/ipv6/conf/{}/accept_dad", req.ifname), "0")
            {
                tracing::warn!(error = %e, netns = %path, "IPv6 setting not applied");
            }
        }
        h.link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|e| WireError::kernel(k(&format!("set {} up", req.ifname)), e))?;
        for a in &req.addresses {
            let mut add = h.address().add(index, a.addr(), a.prefix_len()).replace();
            if a.addr().is_ipv6() {
                add.message_mut()
                    .attributes
                    .push(AddressAttribute::Flags(AddressFlags::Nodad));
            }
            add.execute()
                .await
                .map_err(|e| WireError::kernel(k(&format!("add address {a}")), e))?;
        }
        if req.addresses.iter().any(|a| matches!(a, IpNet::V4(_))) {
            let gw = RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(GATEWAY_V4, 32)
                .output_interface(index)
                .scope(RouteScope::Link)
                .build();
            h.route()
                .add(gw)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("add the gateway route"), e))?;
            h.neighbours()
                .add(index, IpAddr::V4(GATEWAY_V4))
                .link_layer_address(&HOST_MAC)
                .state(NeighbourState::Permanent)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("add the gateway neighbour"), e))?;
            let default = RouteMessageBuilder::<Ipv4Addr>::new()
                .gateway(GATEWAY_V4)
                .output_interface(index)
                .build();
            h.route()
                .add(default)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("add the IPv4 default route"), e))?;
        }
        if v6 {
            h.neighbours()
                .add(index, IpAddr::V6(GATEWAY_V6))
                .link_layer_address(&HOST_MAC)
                .state(NeighbourState::Permanent)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("add the IPv6 gateway neighbour"), e))?;
            let default = RouteMessageBuilder::<Ipv6Addr>::new()
                .gateway(GATEWAY_V6)
                .output_interface(index)
                .build();
            h.route()
                .add(default)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(k("add the IPv6 default route"), e))?;
        }
        Ok((index, mac))
    })
    .await
}
