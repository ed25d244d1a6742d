//! The node's interface addresses, read over rtnetlink, for address
//! autodetection.

use std::collections::HashMap;

use futures::TryStreamExt;
use ipnet::IpNet;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::LinkAttribute;
use tartan_api::resources::autodetect::LocalAddress;

use super::error::KernelError;
use super::netlink::Kernel;

fn transport(op: &'static str) -> impl Fn(rtnetlink::Error) -> KernelError {
    move |e| KernelError::Transport {
        op,
        detail: e.to_string(),
    }
}

impl Kernel {
    /// Every IPv4 and IPv6 address of every interface, with its prefix
    /// length and interface name, in the kernel's order (by interface).
    pub async fn addresses(&self) -> Result<Vec<LocalAddress>, KernelError> {
        let mut names = HashMap::new();
        let mut links = self.handle.link().get().execute();
        while let Some(l) = links.try_next().await.map_err(transport("link dump"))? {
            for a in &l.attributes {
                if let LinkAttribute::IfName(n) = a {
                    names.insert(l.header.index, n.clone());
                }
            }
        }
        let mut out = Vec::new();
        let mut addrs = self.handle.address().get().execute();
        while let Some(m) = addrs.try_next().await.map_err(transport("address dump"))? {
            // On point-to-point links Address is the peer and Local ours.
            let local = m.attributes.iter().find_map(|a| match a {
                AddressAttribute::Local(ip) => Some(*ip),
                _ => None,
            });
            let addr = local.or_else(|| {
                m.attributes.iter().find_map(|a| match a {
                    AddressAttribute::Address(ip) => Some(*ip),
                    _ => None,
                })
            });
            let (Some(ip), Some(name)) = (addr, names.get(&m.header.index)) else {
                continue;
            };
            if let Ok(net) = IpNet::new(ip, m.header.prefix_len) {
                out.push((
                    m.header.index,
                    LocalAddress {
                        interface: name.clone(),
                        address: net,
                    },
                ));
            }
        }
        out.sort_by_key(|(i, _)| *i);
        Ok(out.into_iter().map(|(_, a)| a).collect())
    }
}
