//! The kernel side of one pod interface: a veth pair whose pod end is named
//! CNI_IFNAME inside the pod's namespace and carries the pod's /32 (/128)
//! addresses with a default route through a link-local gateway, and whose
//! host end answers for that gateway (proxy ARP, and a fixed MAC whose
//! EUI-64 link-local is the IPv6 gateway) and holds a host route to the pod
//! with Tartan's route protocol.

mod check;
mod error;
mod host;
mod links;
mod netns;
mod pod;
#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use sha2::{Digest, Sha256};

pub use error::WireError;

/// The pod's IPv4 default gateway: link-local, answered by the host end.
pub const GATEWAY_V4: Ipv4Addr = Ipv4Addr::new(169, 254, 1, 1);
/// The MAC of every host end.
pub const HOST_MAC: [u8; 6] = [0xee; 6];
/// The pod's IPv6 default gateway: the host end's own link-local address,
/// derived (EUI-64) from [`HOST_MAC`].
pub const GATEWAY_V6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0xecee, 0xeeff, 0xfeee, 0xeeee);

/// The host end's name: `tar` and 11 hex digits of a digest of the
/// container ID and interface name: stable, and 14 characters (the
/// kernel allows 15).
pub fn host_interface_name(container_id: &str, ifname: &str) -> String {
    let d = Sha256::digest(format!("{container_id}/{ifname}").as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("tar{}", &hex[..11])
}

/// The pod end's MAC: chosen here rather than by the kernel so that it is
/// known before the interface exists (the record is written meanwhile).
/// Locally administered, unicast, stable for a container and interface.
pub fn pod_mac(container_id: &str, ifname: &str) -> [u8; 6] {
    let d = Sha256::digest(format!("mac/{container_id}/{ifname}").as_bytes());
    let mut m = [0u8; 6];
    m.copy_from_slice(&d[..6]);
    m[0] = (m[0] & 0xfc) | 0x02;
    if m == HOST_MAC {
        m[5] ^= 1;
    }
    m
}

/// `aa:bb:…` form of a MAC.
pub fn mac_string(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What to wire.
#[derive(Debug, Clone)]
pub struct WireRequest {
    /// CNI_NETNS: `/run/netns/x` or `/proc/<pid>/ns/net`.
    pub netns: PathBuf,
    /// CNI_IFNAME: the name inside the pod.
    pub ifname: String,
    /// From [`host_interface_name`].
    pub host_ifname: String,
    /// The pod's addresses as /32 and /128.
    pub addresses: Vec<IpNet>,
    /// `None`: the kernel's default.
    pub mtu: Option<u32>,
    /// The pod end's MAC; `None`: the kernel picks one.
    pub pod_mac: Option<[u8; 6]>,
    /// The protocol number of the host routes.
    pub route_protocol: u8,
}

/// What was wired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wired {
    pub host_ifname: String,
    pub host_mac: String,
    pub pod_mac: String,
    pub pod_ifindex: u32,
}

/// Create the pair, configure both ends; on failure, remove what was made.
pub async fn add(req: &WireRequest) -> Result<Wired, WireError> {
    let ns = netns::open(&req.netns)?;
    if pod::link_exists(&ns, &req.ifname).await? {
        return Err(WireError::AlreadyExists {
            ifname: req.ifname.clone(),
            netns: req.netns.display().to_string(),
        });
    }
    let host = host::Host::connect()?;
    // A host end left by an ADD that crashed midway.
    host.remove_link(&req.host_ifname).await?;
    host.create_pair(req, &ns).await?;
    let done = async {
        let (pod_ifindex, pod_mac) = pod::configure(&ns, req).await?;
        host.configure(req).await?;
        Ok::<_, WireError>((pod_ifindex, pod_mac))
    }
    .await;
    match done {
        Ok((pod_ifindex, pod_mac)) => {
            tracing::debug!(host = %req.host_ifname, netns = %ns.path, "wired");
            Ok(Wired {
                host_ifname: req.host_ifname.clone(),
                host_mac: mac_string(&HOST_MAC),
                pod_mac,
                pod_ifindex,
            })
        }
        Err(e) => {
            // Deleting the host end removes the pod end and the routes.
            if let Err(u) = host.remove_link(&req.host_ifname).await {
                tracing::warn!(error = %u, "could not undo a failed ADD");
            }
            Err(e)
        }
    }
}

/// Remove the pair (from whichever end still exists) and Tartan's host
/// routes to `addresses` through it. Idempotent: what is already gone is
/// fine. Routes through the host end would go with it anyway.
pub async fn del(
    netns: Option<&Path>,
    ifname: &str,
    host_ifname: &str,
    addresses: &[IpNet],
    route_protocol: u8,
) -> Result<(), WireError> {
    if let Some(path) = netns {
        // A namespace gone, or a file left where it was that is no
        // namespace any more: nothing to remove inside; the host side is
        // still removed.
        match netns::open(path) {
            Ok(ns) => pod::remove_link(&ns, ifname).await?,
            Err(e) if e.is_missing_netns() || matches!(e, WireError::NotNetns { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let host = host::Host::connect()?;
    host.remove_routes(host_ifname, addresses, route_protocol)
        .await?;
    host.remove_link(host_ifname).await
}

/// Whether the host end `host_ifname` exists: an attachment made by an
/// earlier ADD of the same container and interface.
pub async fn host_end_exists(host_ifname: &str) -> Result<bool, WireError> {
    let host = host::Host::connect()?;
    Ok(links::by_name(host.handle(), host_ifname).await?.is_some())
}

/// Verify that the interface is as [`add`] left it.
pub async fn check(req: &WireRequest) -> Result<(), WireError> {
    check::check(req).await
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn host_names_are_short_stable_and_distinct() {
        let a = host_interface_name("abc", "eth0");
        assert_eq!(a.len(), 14);
        assert!(a.starts_with("tar"));
        assert_eq!(a, host_interface_name("abc", "eth0"));
        assert_ne!(a, host_interface_name("abd", "eth0"));
        assert_ne!(a, host_interface_name("abc", "eth1"));
        let m = pod_mac("abc", "eth0");
        assert_eq!(m[0] & 0x03, 0x02, "locally administered unicast");
        assert_eq!(m, pod_mac("abc", "eth0"));
        assert_ne!(m, pod_mac("abc", "eth1"));
    }

    #[test]
    fn the_v6_gateway_is_the_eui64_of_the_host_mac() {
        let mut eui = [0u8; 8];
        eui[..3].copy_from_slice(&HOST_MAC[..3]);
        eui[3] = 0xff;
        eui[4] = 0xfe;
        eui[5..].copy_from_slice(&HOST_MAC[3..]);
        eui[0] ^= 0x02;
        let mut o = [0u8; 16];
        o[0] = 0xfe;
        o[1] = 0x80;
        o[8..].copy_from_slice(&eui);
        assert_eq!(Ipv6Addr::from(o), GATEWAY_V6);
        assert_eq!(mac_string(&HOST_MAC), "ee:ee:ee:ee:ee:ee");
    }
}
