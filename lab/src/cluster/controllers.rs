//! tartan-controllers in the lab: [`REPLICAS`] replicas, replica `r` in
//! node `r`'s namespace (sharing one when the lab has fewer nodes, each on
//! its own health port), electing their leader through the lab's
//! datastore with short periods so that tests see a takeover in seconds.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::detached;
use super::state::{self, LabState};
use crate::cni::tartan_bin_dir;

/// How many replicas a lab runs.
pub const REPLICAS: usize = 2;

/// The first replica's health and metrics port.
pub const HEALTH_PORT: u16 = 9095;

/// The lab's election periods: a Lease of 4 s, renewed every 0.5 s, the
/// holder acting up to 3 s after a renewal began.
pub const LEASE_ARGS: [&str; 6] = [
    "--lease-duration",
    "4",
    "--renew-deadline-ms",
    "3000",
    "--retry-period-ms",
    "500",
];

/// Where replica `r` runs: its node's index and its health address.
pub fn placement(st: &LabState, r: usize) -> Result<(usize, SocketAddr)> {
    let n = st.nodes.len();
    if n == 0 {
        bail!("a lab without nodes runs no controllers");
    }
    let port = HEALTH_PORT + u16::try_from(r / n).unwrap_or(0);
    Ok((r % n, SocketAddr::from((st.nodes[r % n].address, port))))
}

/// Start replica `r`, waiting until it serves `/livez`.
pub fn start(st: &LabState, r: usize) -> Result<state::Proc> {
    let bin = tartan_bin_dir().join("tartan-controllers");
    if !bin.exists() {
        bail!(
            "{} is not built (cargo build --workspace --bins)",
            bin.display()
        );
    }
    let (i, addr) = placement(st, r)?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &st.nodes[i].netns])
        .arg(&bin)
        .args(["--datastore", &st.datastore, "--id"])
        .arg(format!("{}-controllers-{r}", st.name))
        .args(LEASE_ARGS)
        .args([
            "--loadbalancer-interval-ms",
            "500",
            "--ipam-gc-interval-ms",
            "2000",
            "--ipam-gc-grace",
            "5",
            "--health-address",
        ])
        .arg(addr.to_string());
    super::apiserver::datastore_env(&mut cmd, st, super::apiserver::Identity::Controllers);
    let log = state::dir(&st.name).join(format!("controllers-{r}.log"));
    let p = detached::spawn_appending(cmd, &log)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if get(addr, "/livez").is_some_and(|(code, _)| code == 200) {
            return Ok(p);
        }
        if !detached::alive(&p) {
            bail!("tartan-controllers exited; see {}", log.display());
        }
        if Instant::now() > deadline {
            bail!(
                "tartan-controllers not serving after 30 s; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts every replica, saving each in the state.
pub fn start_all(st: &mut LabState, say: &mut dyn FnMut(&str)) -> Result<()> {
    for r in 0..super::controllers::REPLICAS {
        let p = start(st, r)?;
        st.controllers.push(p);
        st.save()?;
    }
    say(&format!(
        "tartan-controllers: {} replicas, one acting (Lease tartan-system/tartan-controllers)",
        st.controllers.len()
    ));
    Ok(())
}

/// `GET path` on `addr`: the status code and body. Asked as HTTP/1.0, so
/// that the body comes whole, never in chunks (Go's servers, etcd's
/// metrics among them, chunk an HTTP/1.1 body of unknown length).
pub fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_string()))
}

/// The replicas' `tartan_controllers_leader` values, in replica order
/// (None where a replica does not answer).
pub fn leaders(st: &LabState) -> Result<Vec<Option<bool>>> {
    (0..st.controllers.len())
        .map(|r| {
            let (_, addr) = placement(st, r)?;
            Ok(get(addr, "/metrics").and_then(|(_, body)| {
                body.lines()
                    .find(|l| l.starts_with("tartan_controllers_leader "))
                    .map(|l| l.ends_with(" 1"))
            }))
        })
        .collect()
}

/// Stop replica `r` (SIGKILL: no goodbye, as a node that dies) and, if
/// `again`, start it anew.
pub fn kill(name: &str, r: usize, again: bool) -> Result<()> {
    let mut st = LabState::load(name)?;
    let p = st
        .controllers
        .get(r)
        .cloned()
        .with_context(|| format!("lab {name} has no controllers replica {r}"))?;
    detached::stop(&p, Duration::ZERO);
    if again {
        st.controllers[r] = start(&st, r)?;
        st.save()?;
    }
    Ok(())
}
