//! Network namespaces with unique names, removed (with every process still
//! inside them) when the guard is dropped.
use anyhow::{Context, Result, bail};
use std::fs::File;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call: `<prefix>-<pid>-<n>`, at most
/// 15 characters so that it can also name a link.
pub fn unique_name(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let mut name = format!("{prefix}{pid}x{n}");
    if name.len() > 15 {
        // Keep the unique tail; shorten the human-readable prefix.
        let tail = format!("{pid}x{n}");
        let keep = 15usize.saturating_sub(tail.len());
        name = format!("{}{tail}", &prefix[..keep.min(prefix.len())]);
    }
    name
}

/// Runs a command and fails with its stderr when it exits non-zero.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out)
}

/// Runs `ip ARGS…`.
pub fn ip(args: &[&str]) -> Result<String> {
    let out = run(Command::new("ip").args(args))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace owned by this guard.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates `<prefix><pid>x<n>` with its loopback up.
    pub fn new(prefix: &str) -> Result<Netns> {
        let name = unique_name(prefix);
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS…`.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// A command that will run inside this namespace (`ip netns exec`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs a program inside the namespace and returns its stdout; fails
    /// when it exits non-zero.
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String> {
        let out = run(self.command(program).args(args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Moves the calling thread into this namespace. Sockets the thread
    /// opens afterwards (netlink included) belong to the namespace. Use it
    /// on a thread of its own.
    pub fn enter_current_thread(&self) -> Result<()> {
        let f = File::open(format!("/run/netns/{}", self.name))
            .with_context(|| format!("open namespace {}", self.name))?;
        nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)
            .with_context(|| format!("setns into {}", self.name))?;
        Ok(())
    }

    /// Pids of every process inside the namespace.
    pub fn pids(&self) -> Vec<i32> {
        ip(&["netns", "pids", &self.name])
            .map(|s| {
                s.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("warning: could not remove namespace {}: {e}", self.name);
        }
    }
}

/// Joins two namespaces with a veth pair; `a_addrs`/`b_addrs` are CIDR
/// strings ("10.0.0.1/24", "fd00::1/64"). The links disappear with either
/// namespace. Returns the interface names (in a, in b).
pub fn veth(a: &Netns, a_addrs: &[&str], b: &Netns, b_addrs: &[&str]) -> Result<(String, String)> {
    let an = unique_name("va");
    let bn = unique_name("vb");
    ip(&[
        "link",
        "add",
        &an,
        "netns",
        a.name(),
        "type",
        "veth",
        "peer",
        "name",
        &bn,
        "netns",
        b.name(),
    ])?;
    for (ns, dev, addrs) in [(a, &an, a_addrs), (b, &bn, b_addrs)] {
        for addr in addrs {
            // nodad: tests must not wait for IPv6 duplicate address detection.
            if addr.contains(':') {
                ns.ip(&["addr", "add", addr, "dev", dev, "nodad"])?;
            } else {
                ns.ip(&["addr", "add", addr, "dev", dev])?;
            }
        }
        ns.ip(&["link", "set", dev, "up"])?;
    }
    Ok((an, bn))
}

/// A veth pair whose end `outside` stays where it is made (the root
/// namespace, or `at`) and whose peer, `eth0`, goes into `netns`: how a
/// host, a node or a pod is plugged in.
pub fn veth_eth0(at: Option<&str>, outside: &str, netns: &str) -> Result<String> {
    let mut args = Vec::new();
    if let Some(at) = at {
        args.extend(["-n", at]);
    }
    args.extend([
        "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", netns,
    ]);
    ip(&args)
}

/// Polls `f` until it returns Some or the timeout passes.
pub fn wait_for<T>(
    what: &str,
    timeout: std::time::Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Result<T> {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > timeout {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
