//! What is read off the real node: a process's CPU time and memory from
//! /proc, the routes bgpd installed, and when a route arrives (a route
//! monitor in the node's namespace).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// bgpd's routes in the kernel carry this protocol number.
const RTPROT_TARTAN: &str = "201";

/// CPU time of `pid` so far, its own and its waited-for children's (felix
/// runs `nft`), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may hold spaces: state is the
    // first; utime, stime, cutime and cstime the 12th to 15th.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f
        .get(11..15)?
        .iter()
        .filter_map(|s| s.parse::<u64>().ok())
        .sum();
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks as f64 / hz.max(1) as f64)
}

/// Waits until `pids` together use less than 2 % of a core over 3 s
/// (done with their start); how long that took. The error names each
/// one's share over the last 3 s.
pub fn wait_quiet(pids: &[u32], limit: Duration) -> Result<Duration> {
    let t = Instant::now();
    loop {
        let before: Vec<Option<f64>> = pids.iter().map(|p| cpu_seconds(*p)).collect();
        std::thread::sleep(Duration::from_secs(3));
        let after: Vec<Option<f64>> = pids.iter().map(|p| cpu_seconds(*p)).collect();
        let mut shares = Vec::new();
        for (a, b) in before.iter().zip(&after) {
            match (a, b) {
                (Some(a), Some(b)) => shares.push((b - a) / 3.0),
                _ => bail!("a daemon exited"),
            }
        }
        if shares.iter().sum::<f64>() < 0.02 {
            return Ok(t.elapsed());
        }
        if t.elapsed() > limit {
            let each: Vec<String> = pids
                .iter()
                .zip(&shares)
                .map(|(p, s)| format!("pid {p} {:.1} %", s * 100.0))
                .collect();
            bail!(
                "the daemons were still busy after {limit:?} ({})",
                each.join(", ")
            );
        }
    }
}

/// Routes of bgpd's in namespace `ns`.
pub fn tartan_routes(ns: &str) -> usize {
    Command::new("ip")
        .args(["-n", ns, "-4", "route", "show", "proto", RTPROT_TARTAN])
        .output()
        .map(|o| {
            // A multipath route continues on indented `nexthop` lines.
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.starts_with(char::is_whitespace))
                .count()
        })
        .unwrap_or(0)
}

/// Waits until `ns` holds `want` of bgpd's routes.
pub fn wait_routes(
    ns: &str,
    want: usize,
    limit: Duration,
    alive: impl Fn() -> bool,
) -> Result<Duration> {
    let t = Instant::now();
    loop {
        let have = tartan_routes(ns);
        if have >= want {
            return Ok(t.elapsed());
        }
        if !alive() {
            bail!("tartan-bgpd exited with {have} of {want} routes installed");
        }
        if t.elapsed() > limit {
            bail!("{have} of {want} routes installed after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `ip monitor route` in a namespace: each line with the moment it came.
pub struct RouteMonitor {
    child: Child,
    pub lines: mpsc::Receiver<(Instant, String)>,
}

impl RouteMonitor {
    pub fn start(ns: &str) -> Result<RouteMonitor> {
        let mut child = Command::new("ip")
            .args(["-n", ns, "monitor", "route"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("start ip monitor route")?;
        let out = child.stdout.take().context("monitor stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send((Instant::now(), l)).is_err() {
                    break;
                }
            }
        });
        let m = RouteMonitor { child, lines };
        m.wait_subscribed(ns)?;
        Ok(m)
    }

    /// Waits until the monitor reports a route it saw added (so that it
    /// has subscribed before anything is timed), then removes it.
    fn wait_subscribed(&self, ns: &str) -> Result<()> {
        const MARK: &str = "198.51.100.255";
        let route = |verb: &str| {
            Command::new("ip")
                .args(["-n", ns, "route", verb, "unreachable", MARK])
                .status()
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            route("replace").context("add the marker route")?;
            let seen = self
                .lines
                .recv_timeout(Duration::from_millis(200))
                .map(|(_, l)| l.contains(MARK));
            let _ = route("del");
            if seen == Ok(true) {
                return Ok(());
            }
        }
        bail!("ip monitor route reported nothing in {ns}")
    }

    /// The moment a route to `prefix` was added, waiting up to `limit`.
    pub fn added(&self, prefix: &str, limit: Duration) -> Result<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, line) = self
                .lines
                .recv_timeout(left)
                .map_err(|_| anyhow::anyhow!("no route to {prefix} within {limit:?}"))?;
            if line.starts_with(&format!("{prefix} ")) {
                return Ok(at);
            }
        }
    }

    /// Forgets lines seen so far.
    pub fn drain(&self) {
        while self.lines.try_recv().is_ok() {}
    }
}

impl Drop for RouteMonitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
