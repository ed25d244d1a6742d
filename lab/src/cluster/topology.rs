//! The BGP topologies' parts beside the nodes: the `tor` topology's BIRD
//! router and its ASes, the `rr` topology's reflectors, the sessions each
//! node should reach, forwarding in router namespaces, the mesh turned off.

use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{Context, Result, bail};
use tartan_api::resources::{BgpConfiguration, BgpConfigurationSpec};

use super::detached;
use super::state::{self, LabState};
use super::up_options::*;
use crate::netns::ip;
use crate::peers::control_get;

/// IPv4 forwarding on in a router namespace (the ToR, two-subnets' router).
pub(super) fn enable_forwarding(ns: &str) -> Result<()> {
    let ok = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ])
        .status()?
        .success();
    if !ok {
        bail!("cannot turn on forwarding in {ns}");
    }
    Ok(())
}

/// The cluster's BGPConfiguration with the node-to-node mesh off.
pub(super) fn mesh_off() -> BgpConfiguration {
    BgpConfiguration::new(
        "default",
        BgpConfigurationSpec {
            node_to_node_mesh_enabled: Some(false),
            ..Default::default()
        },
    )
}

/// The `tor` topology's router: its AS, and node `i`'s (1-based).
pub const TOR_AS: u32 = 65000;

pub fn tor_node_as(i: usize) -> u32 {
    64512 + i as u32
}

/// The BIRD top-of-rack router in its own namespace on the underlay,
/// installing what it learns (it forwards between the nodes' pods).
pub(super) fn start_tor(st: &LabState, tor_ip: Ipv4Addr, nodes: usize) -> Result<state::Proc> {
    let ns = state::tor_netns(&st.name);
    let dir = state::dir(&st.name);
    let prefix = st.subnet.parse::<ipnet::Ipv4Net>()?.prefix_len();
    ip(&["netns", "add", &ns])?;
    let outside = format!("{}-tor", st.name);
    ip(&[
        "link", "add", &outside, "type", "veth", "peer", "name", "eth0", "netns", &ns,
    ])?;
    ip(&["link", "set", &outside, "master", &st.bridge, "up"])?;
    ip(&[
        "-n",
        &ns,
        "addr",
        "add",
        &format!("{tor_ip}/{prefix}"),
        "dev",
        "eth0",
    ])?;
    ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
    ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    enable_forwarding(&ns)?;
    let subnet: ipnet::Ipv4Net = st.subnet.parse()?;
    let mut cfg = crate::peers::BgpConfig::new(tor_ip, TOR_AS).kernel(true);
    for i in 1..=nodes {
        let a = subnet.hosts().nth(i).context("subnet full")?;
        cfg = cfg.neighbor(crate::peers::Neighbor::new(
            std::net::IpAddr::V4(a),
            tor_node_as(i),
        ));
    }
    let conf = dir.join("bird-tor.conf");
    std::fs::write(&conf, crate::peers::render_bird(&cfg))?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns, "bird", "-f", "-c"])
        .arg(&conf)
        .arg("-s")
        .arg(dir.join("bird-tor.ctl"))
        .arg("-P")
        .arg(dir.join("bird-tor.pid"));
    detached::spawn(cmd, &dir.join("bird-tor.log"))
}

/// The route reflectors' cluster ID in the `rr` topology.
pub const RR_CLUSTER_ID: &str = "10.255.0.1";

/// In the `rr` topology, node-1 and node-2 reflect.
pub(super) fn is_reflector(o: &UpOptions, i: usize) -> bool {
    o.topology == "rr" && i <= 2
}

/// Sessions node `i` (1-based) should have once all are up.
pub(super) fn expected_sessions(o: &UpOptions, i: usize) -> usize {
    match o.topology.as_str() {
        // A reflector: the other reflector and every client.
        "rr" if is_reflector(o, i) => o.nodes - 1,
        // A client: the two reflectors.
        "rr" => 2,
        "tor" => 1,
        _ => o.nodes - 1,
    }
}

/// Established sessions of the speaker behind `socket` (0 if unreachable).
pub fn established(socket: &std::path::Path) -> usize {
    control_get(socket, "/v1/peers")
        .ok()
        .and_then(|v| v.as_array().cloned())
        .map(|peers| {
            peers
                .iter()
                .filter(|p| p.get("state").and_then(|s| s.as_str()) == Some("Established"))
                .count()
        })
        .unwrap_or(0)
}
