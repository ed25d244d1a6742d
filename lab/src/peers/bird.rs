//! BIRD 2: `bird -f -c CONF -s SOCK -P PIDFILE`, queried with `birdc -s SOCK`.
use super::bird_config::{protocol_name, render};
use super::bird_routes::{BirdRoute, parse_routes};
use super::bird_since::StateSince;
use super::client;
use super::config::BgpConfig;
use crate::netns::{Netns, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use crate::topo::Family;
use anyhow::{Result, bail};
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A BIRD instance. Each neighbor becomes `protocol bgp` named by
/// [`Bird::protocol_name`]. Originated routes are static blackholes;
/// BGP exports static and BGP routes; when `kernel` is on, BGP routes are
/// exported to the namespace's main table (protocol "bird").
#[derive(Debug)]
pub struct Bird {
    // Field order: the daemon stops before its directory goes.
    daemon: Daemon,
    config: BgpConfig,
    conf: PathBuf,
    sock: String,
    ns_name: String,
    dir: TempDir,
}

impl Bird {
    pub fn start(ns: &Netns, config: BgpConfig) -> Result<Bird> {
        let dir = TempDir::new("bird")?;
        let conf = dir.write("bird.conf", render(&config))?;
        let sock = dir.join("bird.ctl").to_string_lossy().into_owned();
        let daemon = spawn(ns, &dir, &conf, &sock)?;
        Ok(Bird {
            daemon,
            config,
            conf,
            sock,
            ns_name: ns.name().to_string(),
            dir,
        })
    }

    /// The name of the `protocol bgp` for a neighbor address.
    pub fn protocol_name(addr: IpAddr) -> String {
        protocol_name(addr)
    }

    pub fn config(&self) -> &BgpConfig {
        &self.config
    }

    pub fn config_text(&self) -> String {
        std::fs::read_to_string(&self.conf).unwrap_or_default()
    }

    pub fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    pub fn namespace(&self) -> &str {
        &self.ns_name
    }

    /// Runs `birdc -s SOCK ARGS…` and returns its output without the
    /// banner line.
    pub fn birdc(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["-s", self.sock.as_str()];
        full.extend_from_slice(args);
        let out = client("birdc", &full)?;
        Ok(out
            .lines()
            .filter(|l| !l.starts_with("BIRD ") || !l.ends_with(" ready."))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// BIRD's line for `peer` in `show bfd sessions`, split in words:
    /// address, interface (`---` for multihop), state, since (one or two
    /// words), interval, timeout.
    pub fn bfd_session(&self, peer: IpAddr) -> Option<Vec<String>> {
        let out = self.birdc(&["show", "bfd", "sessions"]).ok()?;
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
            .find(|w| w.first().map(String::as_str) == Some(&peer.to_string()))
    }

    /// "Established", "Active", "Connect", "Idle", …; for non-BGP protocols
    /// the state column ("up", "down").
    pub fn protocol_state(&self, name: &str) -> Result<String> {
        let out = self.birdc(&["show", "protocols", "all", name])?;
        if let Some(l) = out
            .lines()
            .find(|l| l.trim_start().starts_with("BGP state:"))
        {
            return Ok(l.split(':').nth(1).unwrap_or("").trim().to_string());
        }
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name));
        match row.and_then(|r| r.split_whitespace().nth(3)) {
            Some(s) => Ok(s.to_string()),
            None => bail!("no protocol {name} in birdc output: {out}"),
        }
    }

    /// State of the session with `addr`.
    pub fn neighbor_state(&self, addr: IpAddr) -> Result<String> {
        self.protocol_state(&Bird::protocol_name(addr))
    }

    /// When the session with `addr` last changed state; see
    /// [`StateSince::same_as`] for comparing two readings.
    pub fn state_since(&self, addr: IpAddr) -> Result<StateSince> {
        let name = Bird::protocol_name(addr);
        StateSince::from_listing(&self.birdc(&["show", "protocols", &name])?, &name)
    }

    /// Waits until every configured session is Established.
    pub fn wait_established(&self, timeout: Duration) -> Result<()> {
        for n in &self.config.neighbors {
            wait_for(
                &format!("BIRD session with {} established", n.address),
                timeout,
                || (self.neighbor_state(n.address).ok()? == "Established").then_some(()),
            )
            .map_err(|e| e.context(self.daemon.log_tail(20)))?;
        }
        Ok(())
    }

    /// Routes of the master table of `family`.
    pub fn routes(&self, family: Family) -> Result<Vec<BirdRoute>> {
        let table = match family {
            Family::V4 => "master4",
            Family::V6 => "master6",
        };
        self.routes_in_table(table)
    }

    pub fn routes_in_table(&self, table: &str) -> Result<Vec<BirdRoute>> {
        Ok(parse_routes(
            &self.birdc(&["show", "route", "all", "table", table])?,
        ))
    }

    /// Routes for one prefix (all paths, best first as BIRD lists them).
    pub fn routes_for(&self, prefix: &str) -> Result<Vec<BirdRoute>> {
        let family = if prefix.contains(':') {
            Family::V6
        } else {
            Family::V4
        };
        Ok(self
            .routes(family)?
            .into_iter()
            .filter(|r| r.prefix == prefix)
            .collect())
    }

    /// Waits until a route for `prefix` from some BGP protocol is present.
    pub fn wait_route(&self, prefix: &str, timeout: Duration) -> Result<BirdRoute> {
        wait_for(&format!("BIRD route {prefix}"), timeout, || {
            self.routes_for(prefix)
                .ok()?
                .into_iter()
                .find(|r| r.proto.starts_with("n_"))
        })
    }

    /// Rewrites the configuration and applies it with `birdc configure`.
    pub fn reconfigure(&mut self, config: BgpConfig) -> Result<()> {
        std::fs::write(&self.conf, render(&config))?;
        let out = self.birdc(&["configure"])?;
        if !out.contains("Reconfigured") && !out.contains("Reconfiguration in progress") {
            bail!("birdc configure: {out}");
        }
        self.config = config;
        Ok(())
    }

    /// Kills BIRD with SIGKILL (no goodbye to peers), as a crash would.
    pub fn crash(&self) -> Result<()> {
        self.daemon.kill(nix::sys::signal::Signal::SIGKILL)?;
        self.daemon.stop();
        Ok(())
    }

    /// Stops BIRD (if it runs) and starts it again with the same config.
    pub fn restart(&mut self, ns: &Netns) -> Result<()> {
        self.daemon.stop();
        self.daemon = spawn(ns, &self.dir, &self.conf, &self.sock)?;
        Ok(())
    }
}

impl Bird {
    /// Renders `config` and has BIRD parse it (`bird -p`) without starting;
    /// returns the text.
    pub fn check_config(config: &BgpConfig) -> Result<String> {
        let dir = TempDir::new("bird-check")?;
        let text = render(config);
        let conf = dir.write("bird.conf", &text)?;
        crate::netns::run(
            std::process::Command::new("bird")
                .arg("-p")
                .arg("-c")
                .arg(&conf),
        )
        .map_err(|e| e.context(text.clone()))?;
        Ok(text)
    }
}

fn spawn(ns: &Netns, dir: &TempDir, conf: &std::path::Path, sock: &str) -> Result<Daemon> {
    let _ = std::fs::remove_file(sock);
    let pid = dir.join("bird.pid").to_string_lossy().into_owned();
    let conf = conf.to_string_lossy().into_owned();
    let daemon = Daemon::spawn(
        ns,
        "bird",
        "bird",
        &["-f", "-c", &conf, "-s", sock, "-P", &pid],
    )?;
    wait_for("BIRD control socket", Duration::from_secs(10), || {
        if !daemon.is_running() {
            return Some(false);
        }
        client("birdc", &["-s", sock, "show", "status"])
            .ok()
            .map(|_| true)
    })
    .and_then(|up| {
        if up {
            Ok(())
        } else {
            bail!("bird exited: {}", daemon.log_tail(20))
        }
    })?;
    Ok(daemon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_names_are_identifiers() {
        assert_eq!(Bird::protocol_name("fd00::2".parse().unwrap()), "n_fd00__2");
    }
}
