//! Real BGP implementations (BIRD 2, FRR, GoBGP, ExaBGP) run inside a
//! namespace from one shared configuration model. Each guard writes its
//! generated configuration into a temporary directory of its own (control
//! sockets and pid files live there too, so instances never interfere) and
//! stops its daemons when dropped.
mod bird;
mod bird_config;
mod bird_routes;
mod bird_since;
mod config;
mod exabgp;
mod frr;
mod gobgp;
mod tartan;

pub use bird::Bird;
pub use bird_config::render as render_bird;
pub use bird_routes::{BirdRoute, parse_routes as parse_bird_routes};
pub use bird_since::StateSince;
pub use config::{Bfd, BgpConfig, Neighbor, Route};
pub use exabgp::ExaBgp;
pub use frr::{Frr, FrrRoute};
pub use gobgp::{Gobgp, GobgpRoute};
pub use tartan::{Tartan, TartanOptions, bgpd_binary, control_get, render as render_tartan};

use crate::netns::run;
use anyhow::Result;
use std::process::Command;

/// Runs a control client (birdc, vtysh, gobgp) and returns its stdout.
fn client(program: &str, args: &[&str]) -> Result<String> {
    let out = run(Command::new(program).args(args))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
