//! Tartan's own speaker, `tartan-bgpd`, rendered from the same
//! configuration model as the other peers, with a small client for its
//! control socket.
use super::config::BgpConfig;
use crate::netns::{Netns, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::fmt::Write;
use std::io::{Read, Write as _};
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tartan_api::bgp::{PeerStatus, RouteEntry, SessionState, SpeakerStatus};

/// Settings of tartan-bgpd that the shared model does not have.
#[derive(Debug, Clone)]
pub struct TartanOptions {
    /// Seconds between connection attempts.
    pub connect_retry: u64,
    /// Hold time for every neighbor (None: the daemon's default, 90 s).
    pub hold_time: Option<u16>,
    pub max_prefix: HashMap<IpAddr, u32>,
    pub ttl_security: bool,
    /// Graceful restart: our restart time and how long we keep stale routes.
    pub restart_time: Option<u16>,
    pub stale_routes_time: Option<u64>,
    /// Neighbors we only receive from (`export = false`).
    pub receive_only: Vec<IpAddr>,
    /// RFC 8212 on eBGP neighbors without filters. Off by default: the
    /// lab's peers exchange every route, as its BIRD peers are told to.
    pub ebgp_requires_policy: bool,
}

impl Default for TartanOptions {
    fn default() -> Self {
        TartanOptions {
            connect_retry: 1,
            hold_time: None,
            max_prefix: HashMap::new(),
            ttl_security: false,
            restart_time: None,
            stale_routes_time: None,
            receive_only: Vec::new(),
            ebgp_requires_policy: false,
        }
    }
}

/// Renders the TOML file tartan-bgpd reads.
pub fn render(c: &BgpConfig, o: &TartanOptions) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "router_id = \"{}\"\nasn = {}", c.router_id, c.local_as);
    let _ = writeln!(s, "connect_retry = {}", o.connect_retry);
    let _ = writeln!(s, "ebgp_requires_policy = {}", o.ebgp_requires_policy);
    if let Some(id) = c.cluster_id {
        let _ = writeln!(s, "cluster_id = \"{id}\"");
    }
    if let Some(l) = c.listen {
        let _ = writeln!(s, "[listen]\naddresses = [\"{l}\"]");
    }
    let _ = writeln!(s, "[kernel]\ninstall = {}", c.kernel);
    if o.restart_time.is_some() || o.stale_routes_time.is_some() {
        let _ = writeln!(s, "[graceful_restart]");
        if let Some(t) = o.restart_time {
            let _ = writeln!(s, "restart_time = {t}");
        }
        if let Some(t) = o.stale_routes_time {
            let _ = writeln!(s, "stale_routes_time = {t}");
        }
    }
    for n in &c.neighbors {
        let _ = writeln!(
            s,
            "\n[[neighbor]]\naddress = \"{}\"\nasn = {}",
            n.address, n.remote_as
        );
        let mut fams = Vec::new();
        if n.ipv4 {
            fams.push("\"ipv4-unicast\"");
        }
        if n.ipv6 {
            fams.push("\"ipv6-unicast\"");
        }
        let _ = writeln!(s, "families = [{}]", fams.join(", "));
        if n.passive {
            let _ = writeln!(s, "passive = true");
        }
        if let Some(p) = &n.password {
            let _ = writeln!(s, "password = \"{p}\"");
        }
        if let Some(m) = n.multihop {
            let _ = writeln!(s, "multihop = {m}");
        }
        if n.rr_client {
            let _ = writeln!(s, "route_reflector_client = true");
        }
        let _ = writeln!(s, "graceful_restart = {}", n.graceful_restart.is_some());
        if n.next_hop_self {
            let _ = writeln!(s, "next_hop_self = true");
        }
        if let Some(a) = n.local_address {
            let _ = writeln!(s, "local_address = \"{a}\"");
        }
        if let Some(h) = o.hold_time {
            let _ = writeln!(s, "hold_time = {h}");
        }
        if let Some(m) = o.max_prefix.get(&n.address) {
            let _ = writeln!(s, "max_prefix = {m}");
        }
        if o.receive_only.contains(&n.address) {
            let _ = writeln!(s, "export = false");
        }
        if o.ttl_security {
            let _ = writeln!(s, "ttl_security = true");
        }
        if let Some(b) = n.bfd {
            let _ = writeln!(
                s,
                "bfd = {{ min_rx = \"{}ms\", min_tx = \"{}ms\", multiplier = {} }}",
                b.min_rx_ms, b.min_tx_ms, b.multiplier
            );
        }
    }
    for r in &c.routes {
        let _ = writeln!(s, "\n[[announce]]\nprefix = \"{}\"", r.prefix);
        if !r.communities.is_empty() {
            let list: Vec<String> = r
                .communities
                .iter()
                .map(|(a, v)| format!("\"{a}:{v}\""))
                .collect();
            let _ = writeln!(s, "communities = [{}]", list.join(", "));
        }
        if !r.large_communities.is_empty() {
            let list: Vec<String> = r
                .large_communities
                .iter()
                .map(|(a, b, c)| format!("\"{a}:{b}:{c}\""))
                .collect();
            let _ = writeln!(s, "large_communities = [{}]", list.join(", "));
        }
    }
    s.push_str(&c.extra);
    s
}

/// Where the tartan-bgpd binary is: `TARTAN_BGPD` if set, else beside the
/// running executable (target/debug or target/debug/deps/..).
pub fn bgpd_binary() -> PathBuf {
    if let Ok(p) = std::env::var("TARTAN_BGPD") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join("tartan-bgpd")
}

/// A running tartan-bgpd in a namespace.
#[derive(Debug)]
pub struct Tartan {
    daemon: Option<Daemon>,
    binary: PathBuf,
    ns_name: String,
    conf: PathBuf,
    socket: PathBuf,
    /// Holds the files; removed with the guard, after the daemon stops.
    _dir: TempDir,
}

impl Tartan {
    pub fn start(
        ns: &Netns,
        binary: &Path,
        config: &BgpConfig,
        options: &TartanOptions,
    ) -> Result<Tartan> {
        let dir = TempDir::new("tartan")?;
        let conf = dir.write("bgpd.toml", render(config, options))?;
        let socket = dir.join("bgpd.sock");
        let mut t = Tartan {
            daemon: None,
            binary: binary.to_path_buf(),
            ns_name: ns.name().to_string(),
            conf,
            socket,
            _dir: dir,
        };
        t.spawn(ns)?;
        Ok(t)
    }

    fn spawn(&mut self, ns: &Netns) -> Result<()> {
        let _ = std::fs::remove_file(&self.socket);
        let mut cmd = ns.command(&self.binary.to_string_lossy());
        cmd.arg("--config")
            .arg(&self.conf)
            .arg("--socket")
            .arg(&self.socket);
        cmd.env(
            "TARTAN_LOG",
            std::env::var("TARTAN_LOG").unwrap_or_else(|_| "info,tartan_bgpd=debug".into()),
        );
        self.daemon = Some(Daemon::start("tartan-bgpd", cmd)?);
        let sock = self.socket.clone();
        let d = self.daemon.as_ref().context("no daemon")?;
        wait_for(
            "tartan-bgpd control socket",
            Duration::from_secs(10),
            || {
                if !d.is_running() {
                    return Some(false);
                }
                sock.exists().then_some(true)
            },
        )
        .and_then(|ok| {
            if ok {
                Ok(())
            } else {
                bail!("tartan-bgpd exited at start:\n{}", d.log_tail(30))
            }
        })
    }

    /// Starts the daemon again with the same files (after `kill9`).
    pub fn restart(&mut self, ns: &Netns) -> Result<()> {
        self.daemon = None;
        self.spawn(ns)
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("tartan-bgpd running")
    }

    pub fn namespace(&self) -> &str {
        &self.ns_name
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn config_path(&self) -> &Path {
        &self.conf
    }

    pub fn log(&self) -> String {
        self.daemon.as_ref().map(|d| d.log()).unwrap_or_default()
    }

    /// Kills the daemon with SIGKILL, leaving its kernel routes behind.
    pub fn kill9(&mut self) {
        if let Some(d) = self.daemon.take() {
            let _ = d.kill(nix::sys::signal::Signal::SIGKILL);
            // Drop waits for the process.
        }
    }

    /// Writes a new configuration and sends SIGHUP.
    pub fn reload(&self, text: &str) -> Result<()> {
        std::fs::write(&self.conf, text)?;
        self.daemon().kill(nix::sys::signal::Signal::SIGHUP)
    }

    /// GET on the control socket; the body as JSON.
    pub fn get(&self, path: &str) -> Result<serde_json::Value> {
        control_get(&self.socket, path)
    }

    pub fn peers(&self) -> Result<Vec<PeerStatus>> {
        Ok(serde_json::from_value(self.get("/v1/peers")?)?)
    }

    pub fn peer(&self, addr: IpAddr) -> Result<PeerStatus> {
        self.peers()?
            .into_iter()
            .find(|p| p.address == addr)
            .with_context(|| format!("no peer {addr}"))
    }

    pub fn routes(&self, family: &str) -> Result<Vec<RouteEntry>> {
        Ok(serde_json::from_value(
            self.get(&format!("/v1/routes?family={family}"))?,
        )?)
    }

    pub fn status(&self) -> Result<SpeakerStatus> {
        Ok(serde_json::from_value(self.get("/v1/status")?)?)
    }

    pub fn wait_established(&self, addr: IpAddr, timeout: Duration) -> Result<()> {
        wait_for(&format!("tartan-bgpd session with {addr}"), timeout, || {
            self.peer(addr)
                .ok()
                .filter(|p| p.state == SessionState::Established)
        })
        .map(|_| ())
        .map_err(|e| {
            anyhow::anyhow!(
                "{e}\npeer: {:?}\nlog:\n{}",
                self.peer(addr).ok(),
                self.daemon().log_tail(40)
            )
        })
    }
}

/// GET on a tartan-bgpd control socket; the body as JSON.
pub fn control_get(socket: &Path, path: &str) -> Result<serde_json::Value> {
    let mut s =
        UnixStream::connect(socket).with_context(|| format!("connect {}", socket.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: tartan\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        bail!("GET {path}: {head}\n{body}");
    }
    Ok(serde_json::from_str(body)?)
}
