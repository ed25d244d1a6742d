//! ExaBGP 4: `exabgp CONF` with settings passed as environment variables
//! (foreground, logging to stdout, run as root, no CLI pipes), and an API
//! process that relays lines written to a FIFO, so tests can announce and
//! withdraw routes with arbitrary attributes while the session is up.
use super::config::{BgpConfig, Neighbor, Route};
use crate::netns::{Netns, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

const FEED: &str = include_str!("exabgp_feed.py");

/// Settings ExaBGP reads from its environment.
const ENV: &[(&str, &str)] = &[
    ("exabgp.daemon.daemonize", "false"),
    ("exabgp.daemon.user", "root"),
    ("exabgp.daemon.drop", "false"),
    ("exabgp.log.destination", "stdout"),
    // No "done" acknowledgements to the API process, no /run/exabgp pipes.
    ("exabgp.api.ack", "false"),
    ("exabgp.api.cli", "false"),
];

/// An ExaBGP instance. Every neighbor needs a local address (its own or
/// `listen`). ExaBGP has no RIB and installs nothing; it connects out (it
/// does not listen). Messages it receives (parsed updates, session state
/// changes) are kept as JSON lines: see [`ExaBgp::events`].
#[derive(Debug)]
pub struct ExaBgp {
    daemon: Daemon,
    config: BgpConfig,
    fifo: PathBuf,
    events: PathBuf,
    dir: TempDir,
}

impl ExaBgp {
    pub fn start(ns: &Netns, config: BgpConfig) -> Result<ExaBgp> {
        let dir = TempDir::new("exabgp")?;
        let fifo = dir.join("api.fifo");
        let events = dir.join("events.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .context("mkfifo")?;
        let feed = dir.write("feed.py", FEED)?;
        let conf = dir.write(
            "exabgp.conf",
            render(
                &config,
                &format!(
                    "/usr/bin/python3 {} {} {}",
                    feed.display(),
                    fifo.display(),
                    events.display()
                ),
            )?,
        )?;
        let mut cmd = ns.command("exabgp");
        cmd.arg(&conf);
        for (k, v) in ENV {
            cmd.env(k, v);
        }
        let daemon = Daemon::start("exabgp", cmd)?;
        let e = ExaBgp {
            daemon,
            config,
            fifo,
            events,
            dir,
        };
        // The helper creates the events file when it starts.
        let up = wait_for("ExaBGP API process", Duration::from_secs(15), || {
            if !e.daemon.is_running() {
                return Some(false);
            }
            e.events.exists().then_some(true)
        })?;
        if !up {
            bail!("exabgp exited: {}", e.daemon.log_tail(30));
        }
        Ok(e)
    }

    pub fn config(&self) -> &BgpConfig {
        &self.config
    }

    pub fn config_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("exabgp.conf")).unwrap_or_default()
    }

    pub fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    /// Sends one API command line, e.g. `announce route 192.0.2.0/24
    /// next-hop self attribute [0xf0 0xc0 0x0102]` or `neighbor 10.0.0.2
    /// withdraw route 192.0.2.0/24`.
    pub fn command(&self, line: &str) -> Result<()> {
        // Non-blocking: fails at once instead of hanging if no reader is up.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&self.fifo)
            .context("open ExaBGP API FIFO")?;
        f.write_all(format!("{}\n", line.trim_end()).as_bytes())
            .context("write ExaBGP API FIFO")
    }

    /// `announce route SPEC`, where SPEC is ExaBGP's route syntax:
    /// `PREFIX next-hop ADDR|self [as-path [..]] [community [..]]
    /// [attribute [0xCODE 0xFLAGS 0xVALUE]] …`.
    pub fn announce(&self, spec: &str) -> Result<()> {
        self.command(&format!("announce route {spec}"))
    }

    /// `withdraw route SPEC` (`PREFIX next-hop ADDR|self`).
    pub fn withdraw(&self, spec: &str) -> Result<()> {
        self.command(&format!("withdraw route {spec}"))
    }

    /// Announces `prefix` via `next_hop` with one raw path attribute (for
    /// unknown or malformed attribute tests): `flags` as on the wire (0xc0 =
    /// optional transitive), `value` as bytes.
    pub fn announce_with_attribute(
        &self,
        prefix: &str,
        next_hop: IpAddr,
        code: u8,
        flags: u8,
        value: &[u8],
    ) -> Result<()> {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let value = if hex.is_empty() {
            String::new()
        } else {
            format!(" 0x{hex}")
        };
        self.announce(&format!(
            "{prefix} next-hop {next_hop} attribute [0x{code:02x} 0x{flags:02x}{value}]"
        ))
    }

    /// Everything ExaBGP told its API process so far, one JSON value per
    /// line: `{"type":"state", "neighbor":{…,"state":"up"}}`,
    /// `{"type":"update", "neighbor":{…,"message":{"update":…}}}`, ….
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The last reported state of the session with `addr` ("up",
    /// "connected", "down"), if any.
    pub fn neighbor_state(&self, addr: IpAddr) -> Option<String> {
        let a = addr.to_string();
        self.events()
            .iter()
            .rev()
            .filter(|e| e.get("type").and_then(Value::as_str) == Some("state"))
            .filter(|e| e.pointer("/neighbor/address/peer").and_then(Value::as_str) == Some(&a))
            .find_map(|e| e.pointer("/neighbor/state").and_then(Value::as_str))
            .map(str::to_string)
    }

    /// Waits until every configured session is up.
    pub fn wait_established(&self, timeout: Duration) -> Result<()> {
        for n in &self.config.neighbors {
            wait_for(
                &format!("ExaBGP session with {} up", n.address),
                timeout,
                || (self.neighbor_state(n.address)? == "up").then_some(()),
            )
            .map_err(|e| e.context(self.daemon.log_tail(20)))?;
        }
        Ok(())
    }
}

impl ExaBgp {
    /// Renders `config` and has ExaBGP validate it (`exabgp --validate`)
    /// without starting; returns the text.
    pub fn check_config(config: &BgpConfig) -> Result<String> {
        let dir = TempDir::new("exabgp-check")?;
        let text = render(config, "/bin/cat")?;
        let conf = dir.write("exabgp.conf", &text)?;
        let mut cmd = std::process::Command::new("exabgp");
        cmd.arg("--validate").arg(&conf);
        for (k, v) in ENV {
            cmd.env(k, v);
        }
        crate::netns::run(&mut cmd).map_err(|e| e.context(text.clone()))?;
        Ok(text)
    }
}

/// The generated exabgp.conf; `run` is the API process command line.
pub(crate) fn render(c: &BgpConfig, run: &str) -> Result<String> {
    let mut s = format!("process tartan-api {{\n  run {run};\n  encoder json;\n}}\n");
    for n in &c.neighbors {
        render_neighbor(&mut s, c, n)?;
    }
    s.push_str(&c.extra);
    Ok(s)
}

fn render_neighbor(s: &mut String, c: &BgpConfig, n: &Neighbor) -> Result<()> {
    let Some(local) = n.local_address.or(c.listen) else {
        bail!("ExaBGP neighbor {} needs a local address", n.address);
    };
    let _ = writeln!(
        s,
        "neighbor {} {{\n  router-id {};\n  local-address {local};\n  local-as {};\n  peer-as {};",
        n.address, c.router_id, c.local_as, n.remote_as
    );
    if let Some(p) = &n.password {
        let _ = writeln!(s, "  md5-password \"{p}\";");
    }
    if n.passive {
        s.push_str("  passive true;\n");
    }
    s.push_str("  family {\n");
    if n.ipv4 {
        s.push_str("    ipv4 unicast;\n");
    }
    if n.ipv6 {
        s.push_str("    ipv6 unicast;\n");
    }
    s.push_str("  }\n");
    if let Some(t) = n.graceful_restart {
        let _ = writeln!(s, "  capability {{ graceful-restart {t}; }}");
    }
    s.push_str(
        "  api {\n    processes [ tartan-api ];\n    neighbor-changes;\n    \
         receive { parsed; update; notification; }\n  }\n",
    );
    let routes: Vec<&Route> = c
        .routes
        .iter()
        .filter(|r| (r.is_ipv6() && n.ipv6) || (!r.is_ipv6() && n.ipv4))
        .collect();
    if !routes.is_empty() {
        s.push_str("  static {\n");
        for r in routes {
            let _ = write!(s, "    route {} next-hop self", r.prefix);
            if !r.communities.is_empty() {
                let l: Vec<String> = r
                    .communities
                    .iter()
                    .map(|(a, v)| format!("{a}:{v}"))
                    .collect();
                let _ = write!(s, " community [ {} ]", l.join(" "));
            }
            if !r.large_communities.is_empty() {
                let l: Vec<String> = r
                    .large_communities
                    .iter()
                    .map(|(a, b, x)| format!("{a}:{b}:{x}"))
                    .collect();
                let _ = write!(s, " large-community [ {} ]", l.join(" "));
            }
            s.push_str(";\n");
        }
        s.push_str("  }\n");
    }
    s.push_str("}\n");
    Ok(())
}
