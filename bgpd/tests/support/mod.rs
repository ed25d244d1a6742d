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
