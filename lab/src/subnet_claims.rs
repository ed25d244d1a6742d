//! Underlay subnets claimed while labs are being built. Labs started at
//! the same moment (tests run side by side, each `tartan-lab up` its own
//! process) would each read the host's networks, see the same /24 free,
//! and both put it on a bridge. So the choice is made under a host-wide
//! lock, and the chosen /24 is claimed in a file holding the claimer's
//! pid until its address or route is on the host: a claim counts while
//! its process lives (or until it is released), and a dead process's
//! claim is removed by the next one to choose.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ipnet::Ipv4Net;
use nix::fcntl::{Flock, FlockArg};

use crate::cluster::hostnets::{self, HostNet};
use crate::cluster::state::STATE_ROOT;

/// How many /24s under 10.213.0.0/16 an underlay may use (10.213.1.0 to
/// 10.213.250.0).
const UNDERLAY_SUBNETS: u32 = 250;

fn claims_dir() -> PathBuf {
    Path::new(STATE_ROOT).join(".underlays")
}

fn file_name(net: &Ipv4Net) -> String {
    format!("{}_{}", net.addr(), net.prefix_len())
}

fn parse_name(name: &str) -> Option<Ipv4Net> {
    let (addr, len) = name.split_once('_')?;
    Ipv4Net::new(addr.parse().ok()?, len.parse().ok()?).ok()
}

/// The /24 at `n` (1..=250).
fn subnet(n: u32) -> Ipv4Net {
    Ipv4Net::new([10, 213, n as u8, 0].into(), 24).expect("a /24 is a valid prefix")
}

/// The first /24, trying from `start` on (wrapping), that overlaps
/// neither a network of the host nor a claimed one.
pub fn pick(start: u32, host: &[HostNet], claimed: &[Ipv4Net]) -> Result<Ipv4Net> {
    let mut last = None;
    for i in 0..UNDERLAY_SUBNETS {
        let net = subnet((start + i) % UNDERLAY_SUBNETS + 1);
        if let Some(h) = hostnets::overlap(&net, host) {
            last = Some(h.what.clone());
        } else if claimed.iter().any(|c| hostnets::overlaps(c, &net)) {
            last = Some(format!("underlay {net}, being set up by another lab"));
        } else {
            return Ok(net);
        }
    }
    bail!(
        "no free /24 under 10.213.0.0/16 for an underlay (the last one tried overlaps the host's {})",
        last.unwrap_or_default()
    )
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The claims of living processes; a dead process's claim is removed.
fn living_claims(dir: &Path) -> Vec<Ipv4Net> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut out = vec![];
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(net) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let owner = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        match owner {
            Some(pid) if alive(pid) => out.push(net),
            _ => {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    out
}

/// Chooses a /24 that the host does not use and no other lab has
/// claimed, and claims it for this process (until [`release`]).
pub fn claim(start: u32) -> Result<Ipv4Net> {
    let dir = claims_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .with_context(|| format!("open {}/.lock", dir.display()))?;
    let _held: Flock<File> = Flock::lock(lock, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .with_context(|| format!("lock {}/.lock", dir.display()))?;
    let host = hostnets::read()?;
    let net = pick(start, &host, &living_claims(&dir))?;
    let path = dir.join(file_name(&net));
    let mut f = File::create(&path).with_context(|| format!("create {}", path.display()))?;
    write!(f, "{}", std::process::id()).with_context(|| format!("write {}", path.display()))?;
    Ok(net)
}

/// Gives up this process's claim on `net` (its address or route is on
/// the host now, or it is gone).
pub fn release(net: &Ipv4Net) {
    let path = claims_dir().join(file_name(net));
    if std::fs::read_to_string(&path).is_ok_and(|s| s.trim() == std::process::id().to_string()) {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(net: &str) -> HostNet {
        HostNet {
            net: net.parse().unwrap(),
            what: format!("address {net}"),
        }
    }

    #[test]
    fn a_claimed_subnet_is_skipped_like_one_the_host_uses() {
        let first = pick(4, &[], &[]).unwrap();
        assert_eq!(first.to_string(), "10.213.5.0/24");
        let claimed = vec![first];
        assert_eq!(pick(4, &[], &claimed).unwrap().to_string(), "10.213.6.0/24");
        let used = [host("10.213.6.1/24")];
        assert_eq!(
            pick(4, &used, &claimed).unwrap().to_string(),
            "10.213.7.0/24"
        );
    }

    #[test]
    fn the_search_wraps_and_ends_with_the_reason() {
        assert_eq!(pick(249, &[], &[]).unwrap().to_string(), "10.213.250.0/24");
        assert_eq!(
            pick(249, &[], &[subnet(250)]).unwrap().to_string(),
            "10.213.1.0/24"
        );
        let all = [host("10.213.0.0/16")];
        let e = pick(0, &all, &[]).unwrap_err().to_string();
        assert!(e.contains("address 10.213.0.0/16"), "{e}");
    }

    #[test]
    fn claim_file_names_read_back() {
        let net = subnet(17);
        assert_eq!(parse_name(&file_name(&net)), Some(net));
        assert_eq!(parse_name(".lock"), None);
        assert_eq!(parse_name("10.213.1.0_99"), None);
    }
}
