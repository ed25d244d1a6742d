//! Tunnel devices: the VXLAN device with its static neighbour and
//! forwarding entries (no multicast, no learning), and the IPIP device
//! where the kernel has one. Each pass reads the kernel and changes only
//! what differs, so a device removed by hand comes back at the next pass.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt;
use rtnetlink::packet_route::AddressFamily;
use rtnetlink::packet_route::address::AddressAttribute;
use rtnetlink::packet_route::link::{
    InfoData, InfoVxlan, LinkAttribute, LinkFlags, LinkInfo, LinkMessage,
};
use rtnetlink::packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
};
use rtnetlink::{LinkIpIp, LinkUnspec, LinkVxlan};
use tartan_api::mtu::{Encapsulation, Family, encapsulated_mtu};
use tracing::{error, info, warn};

use super::DataplaneError;
use crate::calc::encap::{IPIP_DEVICE, Tunnels, VXLAN_DEVICE, VXLAN_PORT, VXLAN_VNI, Vxlan};

/// Whether this kernel can make IPIP devices, once felix has tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpipSupport {
    /// Not needed yet (no IPIP pool).
    Untried,
    Yes,
    /// The kernel refused the device: the reason.
    No(String),
}

pub struct TunnelDriver {
    handle: rtnetlink::Handle,
    task: tokio::task::JoinHandle<()>,
    pub ipip: IpipSupport,
}

impl Drop for TunnelDriver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TunnelsApplied {
    /// Devices created (or re-created).
    pub created: usize,
    /// Neighbour and forwarding entries written or removed.
    pub entries: usize,
}

fn nl(what: &str, e: rtnetlink::Error) -> DataplaneError {
    DataplaneError::Refused {
        what: what.to_string(),
        detail: e.to_string(),
    }
}

fn is_errno(e: &rtnetlink::Error, codes: &[i32]) -> bool {
    matches!(e, rtnetlink::Error::NetlinkError(m) if codes.contains(&m.raw_code().abs()))
}

impl TunnelDriver {
    pub fn connect() -> Result<Self, DataplaneError> {
        let (conn, handle, _) =
            rtnetlink::new_connection().map_err(|e| DataplaneError::Netlink(e.to_string()))?;
        Ok(TunnelDriver {
            handle,
            task: tokio::spawn(conn),
            ipip: IpipSupport::Untried,
        })
    }

    async fn link(&self, name: &str) -> Result<Option<LinkMessage>, DataplaneError> {
        let mut s = self
            .handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match s.try_next().await {
            Ok(m) => Ok(m),
            Err(e) if is_errno(&e, &[libc::ENODEV]) => Ok(None),
            Err(e) => Err(nl(&format!("read link {name}"), e)),
        }
    }

    /// The interface holding `addr` and its MTU.
    async fn underlay(&self, addr: Ipv4Addr) -> Result<Option<(u32, u32)>, DataplaneError> {
        let mut s = self.handle.address().get().execute();
        let mut index = None;
        while let Some(m) = s.try_next().await.map_err(|e| nl("read addresses", e))? {
            if m.attributes
                .iter()
                .any(|a| matches!(a, AddressAttribute::Address(IpAddr::V4(a)) if *a == addr))
            {
                index = Some(m.header.index);
            }
        }
        let Some(index) = index else { return Ok(None) };
        let mut s = self.handle.link().get().match_index(index).execute();
        let mtu = match s.try_next().await.map_err(|e| nl("read underlay", e))? {
            Some(m) => m
                .attributes
                .iter()
                .find_map(|a| match a {
                    LinkAttribute::Mtu(m) => Some(*m),
                    _ => None,
                })
                .unwrap_or(1500),
            None => return Ok(None),
        };
        Ok(Some((index, mtu)))
    }

    async fn remove(&self, name: &str) -> Result<(), DataplaneError> {
        if let Some(m) = self.link(name).await? {
            match self.handle.link().del(m.header.index).execute().await {
                Ok(()) => info!(device = name, "tunnel device removed: no pool uses it"),
                Err(e) if is_errno(&e, &[libc::ENODEV]) => {}
                Err(e) => return Err(nl(&format!("remove {name}"), e)),
            }
        }
        Ok(())
    }

    pub async fn apply(&mut self, t: &Tunnels) -> Result<TunnelsApplied, DataplaneError> {
        let mut done = TunnelsApplied::default();
        match &t.vxlan {
            Some(v) => self.vxlan(v, &mut done).await?,
            None => self.remove(VXLAN_DEVICE).await?,
        }
        match t.ipip {
            Some(local) => self.ipip_device(local, &mut done).await?,
            None => {
                self.remove(IPIP_DEVICE).await?;
                self.ipip = IpipSupport::Untried;
            }
        }
        Ok(done)
    }

    async fn vxlan(&self, v: &Vxlan, done: &mut TunnelsApplied) -> Result<(), DataplaneError> {
        let Some((under, under_mtu)) = self.underlay(v.local).await? else {
            return Err(DataplaneError::Refused {
                what: format!("make {VXLAN_DEVICE}"),
                detail: format!("no interface holds this node's address {}", v.local),
            });
        };
        let mtu = encapsulated_mtu(under_mtu, Encapsulation::Vxlan, Family::Ipv4).map_err(|e| {
            DataplaneError::Refused {
                what: format!("make {VXLAN_DEVICE}"),
                detail: e.to_string(),
            }
        })?;
        let mut existing = self.link(VXLAN_DEVICE).await?;
        if let Some(m) = &existing
            && !vxlan_matches(m, v.local, under)
        {
            warn!(
                device = VXLAN_DEVICE,
                "VXLAN device has other settings; re-creating it"
            );
            self.handle
                .link()
                .del(m.header.index)
                .execute()
                .await
                .map_err(|e| nl("remove the VXLAN device", e))?;
            existing = None;
        }
        let index = match existing {
            Some(m) => {
                let mac_ok = m.attributes.iter().any(
                    |a| matches!(a, LinkAttribute::Address(x) if x.as_slice() == v.mac.as_slice()),
                );
                let mtu_ok = m
                    .attributes
                    .iter()
                    .any(|a| matches!(a, LinkAttribute::Mtu(x) if *x == mtu));
                let up = m.header.flags.contains(LinkFlags::Up);
                if !(mac_ok && mtu_ok && up) {
                    self.handle
                        .link()
                        .set(
                            LinkUnspec::new_with_index(m.header.index)
                                .address(v.mac.to_vec())
                                .mtu(mtu)
                                .up()
                                .build(),
                        )
                        .execute()
                        .await
                        .map_err(|e| nl("set the VXLAN device", e))?;
                    info!(device = VXLAN_DEVICE, mtu, "VXLAN device set up again");
                }
                m.header.index
            }
            None => {
                self.handle
                    .link()
                    .add(
                        LinkVxlan::new(VXLAN_DEVICE, VXLAN_VNI)
                            .dev(under)
                            .local(v.local)
                            .port(VXLAN_PORT)
                            .learning(false)
                            .mtu(mtu)
                            .address(v.mac.to_vec())
                            .up()
                            .build(),
                    )
                    .execute()
                    .await
                    .map_err(|e| nl("make the VXLAN device", e))?;
                done.created += 1;
                info!(device = VXLAN_DEVICE, local = %v.local, vni = VXLAN_VNI, mtu, "VXLAN device created");
                self.link(VXLAN_DEVICE)
                    .await?
                    .ok_or_else(|| DataplaneError::Refused {
                        what: "make the VXLAN device".into(),
                        detail: "gone right after creation".into(),
                    })?
                    .header
                    .index
            }
        };
        self.vxlan_entries(index, &v.peers, done).await
    }

    /// Neighbour entries (peer address → MAC) and forwarding entries (MAC
    /// → peer address) on the VXLAN device: exactly the peers'.
    async fn vxlan_entries(
        &self,
        index: u32,
        peers: &BTreeMap<Ipv4Addr, [u8; 6]>,
        done: &mut TunnelsApplied,
    ) -> Result<(), DataplaneError> {
        let mut neigh: HashMap<Ipv4Addr, (Vec<u8>, NeighbourMessage)> = HashMap::new();
        let mut fdb: HashMap<Vec<u8>, (Option<Ipv4Addr>, NeighbourMessage)> = HashMap::new();
        for family in [AddressFamily::Inet, AddressFamily::Bridge] {
            let mut s = self
                .handle
                .neighbours()
                .get()
                .set_address_family(family)
                .execute();
            while let Some(m) = s
                .try_next()
                .await
                .map_err(|e| nl("read neighbour entries", e))?
            {
                if m.header.ifindex != index {
                    continue;
                }
                let dst = m.attributes.iter().find_map(|a| match a {
                    NeighbourAttribute::Destination(NeighbourAddress::Inet(v)) => Some(*v),
                    _ => None,
                });
                let lla = m.attributes.iter().find_map(|a| match a {
                    NeighbourAttribute::LinkLayerAddress(v) => Some(v.clone()),
                    _ => None,
                });
                match (family, dst, lla) {
                    (AddressFamily::Inet, Some(d), Some(l)) => {
                        neigh.insert(d, (l, m));
                    }
                    (AddressFamily::Bridge, d, Some(l)) => {
                        fdb.insert(l, (d, m));
                    }
                    _ => {}
                }
            }
        }
        for (addr, mac) in peers {
            if neigh.get(addr).map(|(l, _)| l.as_slice()) != Some(mac.as_slice()) {
                self.handle
                    .neighbours()
                    .add(index, IpAddr::V4(*addr))
                    .link_layer_address(mac)
                    .replace()
                    .execute()
                    .await
                    .map_err(|e| nl(&format!("neighbour entry for {addr}"), e))?;
                done.entries += 1;
            }
            if fdb.get(mac.as_slice()).map(|(d, _)| *d) != Some(Some(*addr)) {
                self.handle
                    .neighbours()
                    .add_bridge(index, mac)
                    .destination(IpAddr::V4(*addr))
                    .flags(NeighbourFlags::Own)
                    .replace()
                    .execute()
                    .await
                    .map_err(|e| nl(&format!("forwarding entry for {addr}"), e))?;
                done.entries += 1;
            }
        }
        let macs: Vec<&[u8]> = peers.values().map(|m| m.as_slice()).collect();
        let stale = neigh
            .into_iter()
            .filter(|(a, _)| !peers.contains_key(a))
            .map(|(_, (_, m))| m)
            .chain(
                fdb.into_iter()
                    .filter(|(l, (d, _))| d.is_some() && !macs.contains(&l.as_slice()))
                    .map(|(_, (_, m))| m),
            );
        for m in stale {
            match self.handle.neighbours().del(m).execute().await {
                Ok(()) => done.entries += 1,
                Err(e) if is_errno(&e, &[libc::ENOENT, libc::ESRCH]) => {}
                Err(e) => return Err(nl("remove a stale VXLAN entry", e)),
            }
        }
        Ok(())
    }
}

impl TunnelDriver {
    /// The IPIP device (NBMA: no remote; routes name the other node as
    /// gateway). A kernel without IPIP is reported once, and felix routes
    /// IPIP pools natively from then on.
    async fn ipip_device(
        &mut self,
        local: Ipv4Addr,
        done: &mut TunnelsApplied,
    ) -> Result<(), DataplaneError> {
        if let Some(m) = self.link(IPIP_DEVICE).await? {
            if !m.header.flags.contains(LinkFlags::Up) {
                self.handle
                    .link()
                    .set(LinkUnspec::new_with_index(m.header.index).up().build())
                    .execute()
                    .await
                    .map_err(|e| nl("set the IPIP device up", e))?;
            }
            self.ipip = IpipSupport::Yes;
            return Ok(());
        }
        // Without an interface holding the address the kernel's default
        // underlay, 1500, is assumed.
        let under_mtu = self.underlay(local).await?.map_or(1500, |(_, m)| m);
        let mtu = encapsulated_mtu(under_mtu, Encapsulation::Ipip, Family::Ipv4).map_err(|e| {
            DataplaneError::Refused {
                what: format!("make {IPIP_DEVICE}"),
                detail: e.to_string(),
            }
        })?;
        let r = self
            .handle
            .link()
            .add(
                LinkIpIp::new(IPIP_DEVICE)
                    .local(local)
                    .mtu(mtu)
                    .up()
                    .build(),
            )
            .execute()
            .await;
        match r {
            Ok(()) => {
                done.created += 1;
                info!(device = IPIP_DEVICE, %local, mtu, "IPIP device created");
                self.ipip = IpipSupport::Yes;
            }
            Err(e) => {
                let why = e.to_string();
                if !matches!(self.ipip, IpipSupport::No(_)) {
                    error!(
                        device = IPIP_DEVICE,
                        error = %why,
                        "this kernel cannot make IPIP devices (no ipip module?): IPIP pools are routed natively, so nodes on other subnets cannot reach their pods; use vxlanMode instead"
                    );
                }
                self.ipip = IpipSupport::No(why);
            }
        }
        Ok(())
    }
}

/// Whether an existing VXLAN device is the one we would make.
fn vxlan_matches(m: &LinkMessage, local: Ipv4Addr, under: u32) -> bool {
    let Some(info) = m.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(i) => Some(i),
        _ => None,
    }) else {
        return false;
    };
    let Some(data) = info.iter().find_map(|i| match i {
        LinkInfo::Data(InfoData::Vxlan(d)) => Some(d),
        _ => None,
    }) else {
        return false;
    };
    let has = |want: &InfoVxlan| data.contains(want);
    has(&InfoVxlan::Id(VXLAN_VNI))
        && has(&InfoVxlan::Local(local))
        && has(&InfoVxlan::Link(under))
        && has(&InfoVxlan::Port(VXLAN_PORT))
        && has(&InfoVxlan::Learning(false))
}
