//! The host's end, configured from the caller's namespace.

use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use rtnetlink::packet_route::link::{InfoData, InfoVeth};
use rtnetlink::packet_route::route::{RouteProtocol, RouteScope};
use rtnetlink::{LinkMessageBuilder, LinkUnspec, LinkVeth, RouteMessageBuilder};
use tracing::{debug, warn};

use super::error::{WireError, errno};
use super::netns::{Ns, sysctl};
use super::{HOST_MAC, WireRequest, links};

pub struct Host {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Host {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Host {
    pub fn connect() -> Result<Host, WireError> {
        let (conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| WireError::kernel("open netlink", e))?;
        Ok(Host {
            handle,
            task: tokio::spawn(conn),
        })
    }

    pub async fn remove_link(&self, name: &str) -> Result<(), WireError> {
        links::remove(&self.handle, name).await
    }

    /// The veth pair: the host end here, with the fixed MAC; the pod end
    /// made directly inside the pod's namespace under its final name.
    pub async fn create_pair(&self, req: &WireRequest, ns: &Ns) -> Result<(), WireError> {
        let mut peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(req.ifname.clone())
            .setns_by_fd(ns.fd());
        if let Some(m) = req.mtu {
            peer = peer.mtu(m);
        }
        if let Some(mac) = req.pod_mac {
            peer = peer.address(mac.to_vec());
        }
        let mut host = LinkVeth::new(&req.host_ifname, &req.ifname)
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .address(HOST_MAC.to_vec());
        if let Some(m) = req.mtu {
            host = host.mtu(m);
        }
        debug!(host = %req.host_ifname, pod = %req.ifname, netns = %ns.path, "create veth pair");
        self.handle
            .link()
            .add(host.build())
            .execute()
            .await
            .map_err(|e| {
                WireError::kernel(
                    format!(
                        "create veth {} / {} in {}",
                        req.host_ifname, req.ifname, ns.path
                    ),
                    e,
                )
            })
    }

    /// Sysctls, up, and a route per pod address.
    pub async fn configure(&self, req: &WireRequest) -> Result<(), WireError> {
        let name = &req.host_ifname;
        let link = links::by_name(&self.handle, name)
            .await?
            .ok_or_else(|| WireError::kernel(name.clone(), "the host end is missing"))?;
        let index = link.header.index;
        // Answer ARP for the pod's gateway (and anything else it asks for).
        sysctl(&format!("net/ipv4/conf/{name}/proxy_arp"), "1")?;
        sysctl(&format!("net/ipv4/neigh/{name}/proxy_delay"), "0")?;
        // Strict reverse-path filtering: a packet from the pod whose source
        // is not routed back through this end (another pod's address, made
        // up) is dropped, so a pod cannot pass for another before policy
        // (which knows peers by address). The kernel applies the larger of
        // this and `all.rp_filter`: a host with loose `all` (2) keeps only
        // the looser check. IPv6 has no such filter; felix's policy table
        // checks both families the same way (a FIB lookup).
        sysctl(&format!("net/ipv4/conf/{name}/rp_filter"), "1")?;
        if req.addresses.iter().any(|a| matches!(a, IpNet::V6(_))) {
            // addr_gen_mode 0 (EUI-64): the link-local made at "up" is
            // GATEWAY_V6, whatever the host's default mode is.
            for (key, value) in [
                ("addr_gen_mode", "0"),
                ("accept_dad", "0"),
                ("accept_ra", "0"),
                ("proxy_ndp", "1"),
            ] {
                if let Err(e) = sysctl(&format!("net/ipv6/conf/{name}/{key}"), value) {
                    warn!(error = %e, "IPv6 setting not applied");
                }
            }
        }
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(|e| WireError::kernel(format!("set {name} up"), e))?;
        debug!(host = %name, "host end up");
        let proto = RouteProtocol::from(req.route_protocol);
        for a in &req.addresses {
            let msg = match a {
                IpNet::V4(n) => RouteMessageBuilder::<Ipv4Addr>::new()
                    .destination_prefix(n.addr(), 32)
                    .output_interface(index)
                    .scope(RouteScope::Link)
                    .protocol(proto)
                    .build(),
                IpNet::V6(n) => RouteMessageBuilder::<Ipv6Addr>::new()
                    .destination_prefix(n.addr(), 128)
                    .output_interface(index)
                    .scope(RouteScope::Link)
                    .protocol(proto)
                    .build(),
            };
            debug!(host = %name, address = %a, "host route");
            self.handle
                .route()
                .add(msg)
                .replace()
                .execute()
                .await
                .map_err(|e| WireError::kernel(format!("host route {a} via {name}"), e))?;
        }
        Ok(())
    }

    /// Deletes the host routes to `addresses` that are Tartan's (protocol
    /// `protocol`) and go through `name`; others are left alone. Removing
    /// the link would take them too; this also covers a link that cannot be
    /// removed.
    pub async fn remove_routes(
        &self,
        name: &str,
        addresses: &[IpNet],
        protocol: u8,
    ) -> Result<(), WireError> {
        if addresses.is_empty() {
            return Ok(());
        }
        let Some(link) = links::by_name(&self.handle, name).await? else {
            return Ok(());
        };
        for r in links::routes(&self.handle).await? {
            let ours = u8::from(r.header.protocol) == protocol
                && links::route_oif(&r) == Some(link.header.index)
                && addresses.iter().any(|a| {
                    links::route_dst(&r) == Some(a.addr())
                        && r.header.destination_prefix_length == a.max_prefix_len()
                });
            if !ours {
                continue;
            }
            let dst = links::route_dst(&r);
            debug!(?dst, via = name, "delete host route");
            match self.handle.route().del(r).execute().await {
                Ok(()) => {}
                Err(e) if matches!(errno(&e), Some(libc::ESRCH | libc::ENOENT)) => {}
                Err(e) => {
                    return Err(WireError::kernel(
                        format!("delete host route {dst:?} via {name}"),
                        e,
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn handle(&self) -> &rtnetlink::Handle {
        &self.handle
    }
}
