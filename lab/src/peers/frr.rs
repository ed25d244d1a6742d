//! FRR: zebra and bgpd run directly (no watchfrr, no /etc/frr), each with
//! its vty socket, zserv socket and pid file in the instance's directory,
//! queried with `vtysh --vty_socket DIR`.
use super::client;
use super::config::{BgpConfig, Neighbor};
use crate::netns::{Netns, run, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use crate::topo::Family;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::fmt::Write;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const ZEBRA: &str = "/usr/lib/frr/zebra";
const BGPD: &str = "/usr/lib/frr/bgpd";
const BFDD: &str = "/usr/lib/frr/bfdd";

/// An FRR instance (zebra + bgpd). zebra installs bgpd's best routes into
/// the namespace's kernel (protocol "bgp") unless `kernel` is off.
///
/// Quirks: FRR refuses to run as root without being in the `frrvty` group,
/// so both daemons run as user `frr` and the directory is chowned to it.
/// bgpd's `-l ADDR` implies `--no_kernel`, so `listen` is honoured only
/// with `kernel` off; use `Neighbor::local_address` (update-source)
/// otherwise.
#[derive(Debug)]
pub struct Frr {
    // Field order: bgpd stops before zebra, both before the directory goes.
    bgpd: Daemon,
    /// Runs when some neighbor has BFD.
    bfdd: Option<Daemon>,
    zebra: Daemon,
    config: BgpConfig,
    dir: TempDir,
}

impl Frr {
    pub fn start(ns: &Netns, config: BgpConfig) -> Result<Frr> {
        let dir = TempDir::new("frr")?;
        dir.write("zebra.conf", "")?;
        dir.write("bgpd.conf", render(&config))?;
        dir.write("bfdd.conf", render_bfd(&config))?;
        run(Command::new("chown")
            .args(["-R", "frr:frr"])
            .arg(dir.path()))?;
        let zebra = spawn_zebra(ns, dir.path())?;
        let bfdd = if config.neighbors.iter().any(|n| n.bfd.is_some()) {
            Some(spawn_checked(
                ns,
                "bfdd",
                BFDD,
                &common_args(dir.path(), "bfdd"),
                dir.path(),
            )?)
        } else {
            None
        };
        let bgpd = spawn_bgpd(ns, dir.path(), &config)?;
        Ok(Frr {
            bgpd,
            bfdd,
            zebra,
            config,
            dir,
        })
    }

    pub fn config(&self) -> &BgpConfig {
        &self.config
    }

    pub fn config_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("bgpd.conf")).unwrap_or_default()
    }

    pub fn bgpd(&self) -> &Daemon {
        &self.bgpd
    }

    pub fn zebra(&self) -> &Daemon {
        &self.zebra
    }

    pub fn bfdd(&self) -> Option<&Daemon> {
        self.bfdd.as_ref()
    }

    /// Runs one vtysh command (`show …`, or a `configure` block with
    /// newlines) and returns its output.
    pub fn vtysh(&self, command: &str) -> Result<String> {
        let dir = self.dir.path().to_string_lossy().into_owned();
        client("vtysh", &["--vty_socket", &dir, "-c", command])
    }

    /// FRR's view of its BFD session with `peer`, from `show bfd peers
    /// json`.
    pub fn bfd_peer(&self, peer: std::net::IpAddr) -> Option<serde_json::Value> {
        let v = self.json("show bfd peers json").ok()?;
        v.as_array()?
            .iter()
            .find(|p| p.get("peer").and_then(serde_json::Value::as_str) == Some(&peer.to_string()))
            .cloned()
    }

    /// Runs a `… json` show command and parses its output.
    pub fn json(&self, command: &str) -> Result<Value> {
        let out = self.vtysh(command)?;
        serde_json::from_str(&out).with_context(|| format!("vtysh {command}: {out}"))
    }

    /// `show bgp summary json`.
    pub fn summary(&self) -> Result<Value> {
        self.json("show bgp summary json")
    }

    /// bgpState of the session with `addr` ("Established", "Active", …).
    pub fn neighbor_state(&self, addr: IpAddr) -> Result<String> {
        let v = self.json(&format!("show bgp neighbors {addr} json"))?;
        v.get(addr.to_string())
            .and_then(|n| n.get("bgpState"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .with_context(|| format!("no bgpState for {addr}: {v}"))
    }

    pub fn wait_established(&self, timeout: Duration) -> Result<()> {
        for n in &self.config.neighbors {
            wait_for(
                &format!("FRR session with {} established", n.address),
                timeout,
                || (self.neighbor_state(n.address).ok()? == "Established").then_some(()),
            )
            .map_err(|e| e.context(self.bgpd.log_tail(20)))?;
        }
        Ok(())
    }

    /// Every path of `show bgp ipv4|ipv6 unicast json`.
    pub fn routes(&self, family: Family) -> Result<Vec<FrrRoute>> {
        let v = self.json(&format!("show bgp {} unicast json", afi(family)))?;
        let mut out = Vec::new();
        let routes = v.get("routes").and_then(Value::as_object);
        for (prefix, paths) in routes.into_iter().flatten() {
            for p in paths.as_array().into_iter().flatten() {
                out.push(FrrRoute::from_json(prefix, p));
            }
        }
        Ok(out)
    }

    /// `show bgp ipv4|ipv6 unicast PREFIX json`: the detailed view with
    /// communities, originator id, cluster list, …
    pub fn route_detail(&self, prefix: &str) -> Result<Value> {
        let fam = if prefix.contains(':') {
            Family::V6
        } else {
            Family::V4
        };
        self.json(&format!("show bgp {} unicast {prefix} json", afi(fam)))
    }

    /// Waits until a path for `prefix` learned from a peer is present.
    pub fn wait_route(&self, prefix: &str, timeout: Duration) -> Result<FrrRoute> {
        let fam = if prefix.contains(':') {
            Family::V6
        } else {
            Family::V4
        };
        wait_for(&format!("FRR route {prefix}"), timeout, || {
            self.routes(fam)
                .ok()?
                .into_iter()
                .find(|r| r.prefix == prefix && r.peer.is_some())
        })
    }

    /// Like [`Self::wait_route`], but waits until FRR has also selected the
    /// path as best: a path can be listed a moment before best-path
    /// selection has run on it.
    pub fn wait_best_route(&self, prefix: &str, timeout: Duration) -> Result<FrrRoute> {
        let fam = if prefix.contains(':') {
            Family::V6
        } else {
            Family::V4
        };
        wait_for(&format!("FRR best route {prefix}"), timeout, || {
            self.routes(fam)
                .ok()?
                .into_iter()
                .find(|r| r.prefix == prefix && r.peer.is_some() && r.best)
        })
    }

    /// Kills bgpd with SIGKILL, as a crash would (zebra keeps running).
    pub fn crash_bgpd(&self) -> Result<()> {
        self.bgpd.kill(nix::sys::signal::Signal::SIGKILL)?;
        self.bgpd.stop();
        Ok(())
    }

    /// Stops bgpd (if it runs) and starts it again with the same config.
    pub fn restart_bgpd(&mut self, ns: &Netns) -> Result<()> {
        self.bgpd.stop();
        self.bgpd = spawn_bgpd(ns, self.dir.path(), &self.config)?;
        Ok(())
    }
}

impl Frr {
    /// Renders `config` and has bgpd check it (`bgpd -C`, dry run) without
    /// starting; returns the text.
    pub fn check_config(config: &BgpConfig) -> Result<String> {
        let dir = TempDir::new("frr-check")?;
        let text = render(config);
        let conf = dir.write("bgpd.conf", &text)?;
        let out = run(Command::new(BGPD)
            .args(["-C", "-u", "frr", "-g", "frr", "-f"])
            .arg(&conf))
        .map_err(|e| e.context(text.clone()))?;
        // bgpd -C exits 0 even on bad lines; it only logs them.
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if said.contains("No such command") || said.contains("Unknown command") {
            bail!("bgpd rejects the configuration: {said}\n{text}");
        }
        Ok(text)
    }
}

fn afi(f: Family) -> &'static str {
    match f {
        Family::V4 => "ipv4",
        Family::V6 => "ipv6",
    }
}

fn common_args(dir: &Path, name: &str) -> Vec<String> {
    let d = dir.to_string_lossy();
    [
        "-u", "frr", "-g", "frr", // see the type's doc
        "--log", "stdout", "-P", "0", // no vty TCP port
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--vty_socket".into(),
        d.to_string(),
        "-z".into(),
        format!("{d}/zserv.api"),
        "-i".into(),
        format!("{d}/{name}.pid"),
        "-f".into(),
        format!("{d}/{name}.conf"),
    ])
    .collect()
}

fn spawn_checked(
    ns: &Netns,
    name: &str,
    program: &str,
    args: &[String],
    dir: &Path,
) -> Result<Daemon> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let d = Daemon::spawn(ns, name, program, &args)?;
    let vty = dir.join(format!("{name}.vty"));
    let up = wait_for(
        &format!("{name} vty socket"),
        Duration::from_secs(10),
        || {
            if !d.is_running() {
                return Some(false);
            }
            vty.exists().then_some(true)
        },
    )?;
    if !up {
        bail!("{name} exited: {}", d.log_tail(20));
    }
    Ok(d)
}

fn spawn_zebra(ns: &Netns, dir: &Path) -> Result<Daemon> {
    spawn_checked(ns, "zebra", ZEBRA, &common_args(dir, "zebra"), dir)
}

fn spawn_bgpd(ns: &Netns, dir: &Path, c: &BgpConfig) -> Result<Daemon> {
    let _ = std::fs::remove_file(dir.join("bgpd.vty"));
    let mut args = common_args(dir, "bgpd");
    args.extend(["-p".into(), "179".into()]);
    if !c.kernel {
        args.push("-n".into());
        if let Some(l) = c.listen {
            args.extend(["-l".into(), l.to_string()]);
        }
    }
    spawn_checked(ns, "bgpd", BGPD, &args, dir)
}

/// The generated bgpd.conf.
pub(crate) fn render(c: &BgpConfig) -> String {
    let mut s = String::from("frr defaults traditional\nhostname tartan-frr\n!\n");
    for (i, r) in c.routes.iter().enumerate() {
        if r.communities.is_empty() && r.large_communities.is_empty() {
            continue;
        }
        let _ = writeln!(s, "route-map TARTAN-NET-{i} permit 10");
        if !r.communities.is_empty() {
            let list: Vec<String> = r
                .communities
                .iter()
                .map(|(a, v)| format!("{a}:{v}"))
                .collect();
            let _ = writeln!(s, " set community {} additive", list.join(" "));
        }
        if !r.large_communities.is_empty() {
            let list: Vec<String> = r
                .large_communities
                .iter()
                .map(|(a, b, x)| format!("{a}:{b}:{x}"))
                .collect();
            let _ = writeln!(s, " set large-community {} additive", list.join(" "));
        }
        s.push_str("exit\n!\n");
    }
    let _ = writeln!(s, "router bgp {}", c.local_as);
    let _ = writeln!(s, " bgp router-id {}", c.router_id);
    // Announce `network` prefixes without a matching IGP route, accept
    // eBGP routes without policy, and activate families explicitly.
    s.push_str(" no bgp ebgp-requires-policy\n no bgp network import-check\n");
    s.push_str(" no bgp default ipv4-unicast\n");
    if let Some(id) = c.cluster_id {
        let _ = writeln!(s, " bgp cluster-id {id}");
    }
    let gr_time = c.neighbors.iter().filter_map(|n| n.graceful_restart).max();
    if let Some(t) = gr_time {
        let _ = writeln!(
            s,
            " bgp graceful-restart\n bgp graceful-restart restart-time {t}"
        );
    }
    for (i, n) in c.neighbors.iter().enumerate() {
        render_neighbor(&mut s, n, i, gr_time.is_some());
    }
    for (fam, v6) in [("ipv4", false), ("ipv6", true)] {
        let _ = writeln!(s, " address-family {fam} unicast");
        for (i, r) in c.routes.iter().enumerate() {
            if r.is_ipv6() != v6 {
                continue;
            }
            if r.communities.is_empty() && r.large_communities.is_empty() {
                let _ = writeln!(s, "  network {}", r.prefix);
            } else {
                let _ = writeln!(s, "  network {} route-map TARTAN-NET-{i}", r.prefix);
            }
        }
        for n in &c.neighbors {
            if (v6 && !n.ipv6) || (!v6 && !n.ipv4) {
                continue;
            }
            let a = n.address;
            let _ = writeln!(s, "  neighbor {a} activate");
            if n.rr_client {
                let _ = writeln!(s, "  neighbor {a} route-reflector-client");
            }
            if n.next_hop_self {
                let _ = writeln!(s, "  neighbor {a} next-hop-self");
            }
        }
        s.push_str(" exit-address-family\n");
    }
    s.push_str("exit\n!\n");
    s.push_str(&c.extra);
    s
}

/// bfdd.conf: one profile per neighbor with BFD (`tartan-0`, …, in
/// neighbor order), which bgpd.conf refers to. An eBGP multihop neighbor
/// with a local address also gets a multihop `peer` of its own in bfdd
/// (minimum TTL 256 − hops): FRR's bgpd alone asks for a multihop BFD
/// session only once it has a BGP connection, and a peer that opens BGP
/// only with BFD Up (RFC 5882 clients such as tartan-bgpd) would wait
/// forever.
pub(crate) fn render_bfd(c: &BgpConfig) -> String {
    let mut s = String::from("bfd\n");
    for (i, n) in c.neighbors.iter().enumerate() {
        if let Some(b) = n.bfd {
            let _ = writeln!(
                s,
                " profile tartan-{i}\n  receive-interval {}\n  transmit-interval {}\n  detect-multiplier {}\n exit\n !",
                b.min_rx_ms, b.min_tx_ms, b.multiplier
            );
        }
    }
    for (i, n) in c.neighbors.iter().enumerate() {
        if let (Some(_), Some(hops), Some(local)) = (n.bfd, n.multihop, n.local_address)
            && hops > 1
        {
            let _ = writeln!(
                s,
                " peer {} multihop local-address {local}\n  profile tartan-{i}\n  minimum-ttl {}\n exit\n !",
                n.address,
                256 - u16::from(hops)
            );
        }
    }
    s.push_str("exit\n!\n");
    s
}

fn render_neighbor(s: &mut String, n: &Neighbor, index: usize, gr_global: bool) {
    let a = n.address;
    let _ = writeln!(s, " neighbor {a} remote-as {}", n.remote_as);
    // Quick retries and no MRAI delay keep tests fast.
    let _ = writeln!(s, " neighbor {a} timers connect 2");
    let _ = writeln!(s, " neighbor {a} advertisement-interval 0");
    if let Some(p) = &n.password {
        let _ = writeln!(s, " neighbor {a} password {p}");
    }
    if let Some(ttl) = n.multihop {
        let _ = writeln!(s, " neighbor {a} ebgp-multihop {ttl}");
    }
    if n.passive {
        let _ = writeln!(s, " neighbor {a} passive");
    }
    if let Some(l) = n.local_address {
        let _ = writeln!(s, " neighbor {a} update-source {l}");
    }
    if gr_global && n.graceful_restart.is_none() {
        let _ = writeln!(s, " neighbor {a} graceful-restart-disable");
    }
    if n.bfd.is_some() {
        let _ = writeln!(s, " neighbor {a} bfd profile tartan-{index}");
    }
}

/// One path of `show bgp … unicast json`.
#[derive(Debug, Clone)]
pub struct FrrRoute {
    pub prefix: String,
    pub best: bool,
    pub valid: bool,
    pub as_path: Vec<u32>,
    pub next_hops: Vec<IpAddr>,
    /// The peer it came from; None for locally originated paths.
    pub peer: Option<IpAddr>,
    /// The path's JSON as FRR printed it.
    pub raw: Value,
}

impl FrrRoute {
    fn from_json(prefix: &str, p: &Value) -> FrrRoute {
        let flag = |k: &str| p.get(k).and_then(Value::as_bool).unwrap_or(false);
        FrrRoute {
            prefix: prefix.to_string(),
            best: flag("bestpath"),
            valid: flag("valid"),
            as_path: p
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("")
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|t| t.parse().ok())
                .collect(),
            next_hops: p
                .get("nexthops")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|n| n.get("ip")?.as_str()?.parse().ok())
                .collect(),
            peer: p
                .get("peerId")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok()),
            raw: p.clone(),
        }
    }
}
