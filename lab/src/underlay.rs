//! An underlay: a bridge in the root namespace with an address, and node
//! namespaces attached to it, one address each on a /24. Processes in the
//! root namespace (etcd, the test itself) are reachable from every node at
//! the bridge's address. Everything goes when the guard is dropped.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};
use ipnet::Ipv4Net;

use crate::netns::{Netns, ip, unique_name};
use crate::subnet_claims;

static SUBNETS: AtomicU32 = AtomicU32::new(0);

/// A /24 under 10.213.0.0/16 that overlaps no address or route of the
/// host (other labs' underlays included: a lab's second subnet has no
/// address here, only a route through its router) and that no lab being
/// built has chosen: it is claimed for this process until
/// [`subnet_claims::release`] (once its address or route is on the host).
pub fn free_subnet() -> Result<Ipv4Net> {
    // Labs of one process start apart; other processes' labs from their pids.
    let start = std::process::id() + SUBNETS.fetch_add(1, Ordering::Relaxed) * 7;
    subnet_claims::claim(start)
}

/// One node of the underlay.
#[derive(Debug)]
pub struct UnderlayNode {
    pub netns: Netns,
    pub address: Ipv4Addr,
    /// The node's interface on the underlay.
    pub ifname: String,
}

#[derive(Debug)]
pub struct Underlay {
    bridge: String,
    pub subnet: Ipv4Net,
    /// The bridge's address: where root-namespace services listen.
    pub gateway: Ipv4Addr,
    pub nodes: Vec<UnderlayNode>,
}

impl Underlay {
    pub fn new(prefix: &str) -> Result<Self> {
        let subnet = free_subnet()?;
        let gateway = subnet.hosts().next().context("empty subnet")?;
        let bridge = unique_name(&format!("{prefix}br"));
        ip(&["link", "add", &bridge, "type", "bridge"])?;
        let u = Underlay {
            bridge,
            subnet,
            gateway,
            nodes: vec![],
        };
        ip(&[
            "addr",
            "add",
            &format!("{gateway}/{}", subnet.prefix_len()),
            "dev",
            &u.bridge,
        ])?;
        ip(&["link", "set", &u.bridge, "up"])?;
        subnet_claims::release(&subnet);
        Ok(u)
    }

    /// A new node namespace on the underlay, with a default route via the
    /// bridge; returns its index in `nodes`.
    pub fn add_node(&mut self, prefix: &str) -> Result<usize> {
        let netns = Netns::new(prefix)?;
        let i = self.nodes.len();
        let address = self
            .subnet
            .hosts()
            .nth(i + 1)
            .context("the underlay's /24 is full")?;
        let outside = unique_name("ul");
        let inside = "eth0".to_string();
        ip(&[
            "link",
            "add",
            &outside,
            "type",
            "veth",
            "peer",
            "name",
            &inside,
            "netns",
            netns.name(),
        ])?;
        ip(&["link", "set", &outside, "master", &self.bridge, "up"])?;
        netns.ip(&[
            "addr",
            "add",
            &format!("{address}/{}", self.subnet.prefix_len()),
            "dev",
            &inside,
        ])?;
        netns.ip(&["link", "set", &inside, "up"])?;
        netns.ip(&["route", "add", "default", "via", &self.gateway.to_string()])?;
        self.nodes.push(UnderlayNode {
            netns,
            address,
            ifname: inside,
        });
        Ok(i)
    }

    pub fn node(&self, i: usize) -> &UnderlayNode {
        &self.nodes[i]
    }
}

impl Drop for Underlay {
    fn drop(&mut self) {
        // Namespaces first (their veths go with them), then the bridge.
        self.nodes.clear();
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
