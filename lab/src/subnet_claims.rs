//! Underlay subnets claimed while labs are being built. Labs started at
//! the same moment (tests run side by side, each `tartan-lab up` its own
//! process) would each read the host's networks, see the same /24 free,
//! and both put it on a bridge. So the choice is made under a host-wide
//! lock, and the chosen /24 is claimed in a file holding the claimer's
//! pid and start time until its address or route is on the host: a claim
//! counts while its process lives (or until it is released), and the claim
//! of a process that is gone, a zombie, or whose pid another process now
//! has, is removed by the next one to choose.

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

/// A process's identity: its pid and its start time (field 22 of
/// `/proc/<pid>/stat`, in clock ticks since boot), so that a pid used
/// again by another process does not inherit a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owner {
    pid: u32,
    start: u64,
}

impl Owner {
    fn me() -> Option<Owner> {
        Owner::of(std::process::id())
    }

    /// The process `pid` as it is now, unless it is gone or a zombie
    /// (exited, not yet reaped: it holds nothing any more).
    fn of(pid: u32) -> Option<Owner> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat_owner(pid, &stat)
    }

    fn to_line(self) -> String {
        format!("{} {}", self.pid, self.start)
    }

    /// A claim file's owner. One written by an older version holds the pid
    /// alone: it is that process as it is now, unless gone or a zombie.
    fn parse(line: &str) -> Option<Owner> {
        let mut words = line.split_whitespace();
        let pid = words.next()?.parse().ok()?;
        match words.next() {
            Some(start) => Some(Owner {
                pid,
                start: start.parse().ok()?,
            }),
            None => Owner::of(pid),
        }
    }
}

/// The owner a `/proc/<pid>/stat` line describes; None for a zombie or
/// dead process. The command name (field 2) is in parentheses and may
/// hold spaces and parentheses itself: fields are counted after the last
/// `)`.
fn stat_owner(pid: u32, stat: &str) -> Option<Owner> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // Field 3, the state; field 22, the start time (the 20th after ')').
    let state = fields.next()?;
    if matches!(state, "Z" | "X" | "x") {
        return None;
    }
    let start = fields.nth(18)?.parse().ok()?;
    Some(Owner { pid, start })
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
            .and_then(|s| Owner::parse(&s));
        match owner {
            Some(o) if Owner::of(o.pid) == Some(o) => out.push(net),
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
    let me = Owner::me().context("read this process's /proc/self/stat")?;
    write!(f, "{}", me.to_line()).with_context(|| format!("write {}", path.display()))?;
    Ok(net)
}

/// Gives up this process's claim on `net` (its address or route is on
/// the host now, or it is gone).
pub fn release(net: &Ipv4Net) {
    let path = claims_dir().join(file_name(net));
    let mine = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| Owner::parse(&s))
        .is_some_and(|o| Some(o) == Owner::me());
    if mine {
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
    fn a_zombie_or_a_reused_pid_holds_no_claim() {
        let stat = |state: &str, start: u64| {
            format!(
                "41 (tartan-lab (x) y) {state} 1 41 41 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} 1000 10 18446744073709551615"
            )
        };
        assert_eq!(
            stat_owner(41, &stat("S", 777)),
            Some(Owner {
                pid: 41,
                start: 777
            })
        );
        assert_eq!(stat_owner(41, &stat("Z", 777)), None);
        assert_eq!(stat_owner(41, &stat("X", 777)), None);
        // The claim names the process that made it; the same pid started
        // later is another process.
        let claim = Owner::parse(
            &Owner {
                pid: 41,
                start: 777,
            }
            .to_line(),
        )
        .unwrap();
        assert_ne!(stat_owner(41, &stat("R", 900)), Some(claim));
        // This process, as its claims record it, is alive; a claim file of
        // the older format (its pid alone) too.
        let me = Owner::me().unwrap();
        assert_eq!(Owner::of(me.pid), Some(me));
        assert_eq!(Owner::parse(&me.pid.to_string()), Some(me));
    }

    #[test]
    fn claim_file_names_read_back() {
        let net = subnet(17);
        assert_eq!(parse_name(&file_name(&net)), Some(net));
        assert_eq!(parse_name(".lock"), None);
        assert_eq!(parse_name("10.213.1.0_99"), None);
    }
}
