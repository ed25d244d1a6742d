//! Shared pieces of the integration tests: starting tartan-bgpd in a
//! namespace, and a hand-written raw BGP peer.
#![allow(dead_code)]
pub mod raw_peer;

use std::path::Path;
use tartan_lab::netns::Netns;
use tartan_lab::peers::{BgpConfig, Tartan, TartanOptions};

pub const T: std::time::Duration = std::time::Duration::from_secs(30);

/// Starts tartan-bgpd (this build's binary) with `config`.
pub fn start_tartan(
    ns: &Netns,
    config: &BgpConfig,
    options: &TartanOptions,
) -> anyhow::Result<Tartan> {
    Tartan::start(
        ns,
        Path::new(env!("CARGO_BIN_EXE_tartan-bgpd")),
        config,
        options,
    )
}

/// The protocol number tartan-bgpd installs routes with, as `ip` prints it
/// when no name is registered (it may print "tartan" when one is).
pub fn tartan_proto_routes(ns: &Netns, family: tartan_lab::Family) -> Vec<tartan_lab::KernelRoute> {
    tartan_lab::kernel_routes(ns, family, Some("201")).unwrap_or_default()
}

pub fn wait_tartan_route(ns: &Netns, dst: &str) -> anyhow::Result<tartan_lab::KernelRoute> {
    tartan_lab::wait_kernel_route(ns, dst, Some("201"), T)
}

pub fn wait_no_tartan_route(ns: &Netns, dst: &str) -> anyhow::Result<()> {
    let family = if dst.contains(':') {
        tartan_lab::Family::V6
    } else {
        tartan_lab::Family::V4
    };
    tartan_lab::netns::wait_for(&format!("{dst} to leave the kernel"), T, || {
        (!tartan_proto_routes(ns, family).iter().any(|r| r.dst == dst)).then_some(())
    })
}

/// Nodes on one shared Ethernet segment: a "switch" namespace holding a
/// bridge, and one namespace per node joined to it by a veth. Node `i` has
/// 10.0.`subnet`.`i+1`/24. Everything is removed on drop.
pub struct Lan {
    pub nodes: Vec<Netns>,
    pub switch: Netns,
    subnet: u8,
}

impl Lan {
    pub fn new(prefix: &str, subnet: u8, count: usize) -> anyhow::Result<Lan> {
        let switch = Netns::new(&format!("{prefix}s"))?;
        switch.ip(&["link", "add", "br0", "type", "bridge"])?;
        switch.ip(&["link", "set", "br0", "up"])?;
        let mut lan = Lan {
            nodes: Vec::new(),
            switch,
            subnet,
        };
        for i in 0..count {
            let ns = Netns::new(&format!("{prefix}{i}"))?;
            let addr = format!("{}/24", lan.v4(i));
            let (_, port) = tartan_lab::netns::veth(&ns, &[&addr], &lan.switch, &[])?;
            lan.switch.ip(&["link", "set", &port, "master", "br0"])?;
            lan.nodes.push(ns);
        }
        Ok(lan)
    }

    /// Node `i`'s address.
    pub fn v4(&self, i: usize) -> std::net::Ipv4Addr {
        std::net::Ipv4Addr::new(10, 0, self.subnet, i as u8 + 1)
    }

    /// Node `i`'s address as an `IpAddr`.
    pub fn addr(&self, i: usize) -> std::net::IpAddr {
        self.v4(i).into()
    }
}

/// The kernel's TcpExt counter `name` (e.g. "TcpExtTCPMD5Failure") in `ns`,
/// read without touching nstat's history.
pub fn tcp_ext_counter(ns: &Netns, name: &str) -> u64 {
    ns.exec("nstat", &["-a", "-s", "-z", name])
        .ok()
        .and_then(|out| {
            out.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
