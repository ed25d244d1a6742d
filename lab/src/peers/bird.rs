//! BIRD 2: `bird -f -c CONF -s SOCK -P PIDFILE`, queried with `birdc -s SOCK`.
use super::client;
use super::config::{BgpConfig, Neighbor, Route};
use crate::netns::{Netns, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use crate::topo::Family;
use anyhow::{Result, bail};
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};
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
        let s: String = addr
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        format!("n_{s}")
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

/// The generated bird.conf.
pub fn render(c: &BgpConfig) -> String {
    let mut s = String::new();
    let kexport = if c.kernel {
        "where source = RTS_BGP"
    } else {
        "none"
    };
    // `learn` imports routes others put in the kernel (static routes to
    // multihop peers) so recursive next hops resolve.
    let _ = write!(
        s,
        "log stderr all;\nrouter id {};\n\
         protocol device {{ scan time 2; }}\n\
         protocol direct {{ ipv4; ipv6; }}\n\
         protocol kernel kernel4 {{ learn; scan time 2; merge paths on;\n  \
           ipv4 {{ import all; export {kexport}; }};\n}}\n\
         protocol kernel kernel6 {{ learn; scan time 2; merge paths on;\n  \
           ipv6 {{ import all; export {kexport}; }};\n}}\n",
        c.router_id
    );
    for (name, v6) in [("static4", false), ("static6", true)] {
        let routes: Vec<&Route> = c.routes.iter().filter(|r| r.is_ipv6() == v6).collect();
        if routes.is_empty() {
            continue;
        }
        let chan = if v6 { "ipv6" } else { "ipv4" };
        let _ = writeln!(s, "protocol static {name} {{\n  {chan} {{ import filter {{");
        for r in &routes {
            if r.communities.is_empty() && r.large_communities.is_empty() {
                continue;
            }
            let _ = write!(s, "    if net = {} then {{", r.prefix);
            for (a, v) in &r.communities {
                let _ = write!(s, " bgp_community.add(({a},{v}));");
            }
            for (a, b, x) in &r.large_communities {
                let _ = write!(s, " bgp_large_community.add(({a},{b},{x}));");
            }
            s.push_str(" }\n");
        }
        s.push_str("    accept;\n  }; };\n");
        for r in &routes {
            let _ = writeln!(s, "  route {} blackhole;", r.prefix);
        }
        s.push_str("}\n");
    }
    for n in &c.neighbors {
        render_neighbor(&mut s, c, n);
    }
    s.push_str(&c.extra);
    s
}

fn render_neighbor(s: &mut String, c: &BgpConfig, n: &Neighbor) {
    let _ = writeln!(s, "protocol bgp {} {{", Bird::protocol_name(n.address));
    match n.local_address.or(c.listen) {
        Some(a) => {
            let _ = writeln!(s, "  local {a} as {};", c.local_as);
        }
        None => {
            let _ = writeln!(s, "  local as {};", c.local_as);
        }
    }
    let _ = writeln!(s, "  neighbor {} as {};", n.address, n.remote_as);
    // BIRD's defaults (5 s connect delay, long error waits) slow tests.
    s.push_str("  connect delay time 1;\n  connect retry time 3;\n  error wait time 1, 10;\n");
    if n.passive {
        s.push_str("  passive on;\n");
    }
    if let Some(p) = &n.password {
        let _ = writeln!(s, "  password \"{p}\";");
    }
    if let Some(ttl) = n.multihop {
        let _ = writeln!(s, "  multihop {ttl};");
    }
    if n.rr_client {
        s.push_str("  rr client;\n");
        if let Some(id) = c.cluster_id {
            let _ = writeln!(s, "  rr cluster id {id};");
        }
    }
    match n.graceful_restart {
        Some(t) => {
            let _ = writeln!(s, "  graceful restart on;\n  graceful restart time {t};");
        }
        None => s.push_str("  graceful restart off;\n"),
    }
    let nhs = if n.next_hop_self {
        " next hop self;"
    } else {
        ""
    };
    let export = "import all; export where source ~ [RTS_STATIC, RTS_BGP];";
    if n.ipv4 {
        // IPv4 over an IPv6 session needs RFC 8950 next hops.
        let ext = if n.address.is_ipv6() {
            " extended next hop on;"
        } else {
            ""
        };
        let _ = writeln!(s, "  ipv4 {{ {export}{nhs}{ext} }};");
    }
    if n.ipv6 {
        let _ = writeln!(s, "  ipv6 {{ {export}{nhs} }};");
    }
    s.push_str("}\n");
}

/// One path of `birdc show route all`.
#[derive(Debug, Clone, PartialEq)]
pub struct BirdRoute {
    pub prefix: String,
    /// The protocol it came from ("n_10_0_0_2", "static4", …).
    pub proto: String,
    /// Marked `*` (the best path).
    pub primary: bool,
    /// Addresses of the `via` lines (several for multipath).
    pub next_hops: Vec<IpAddr>,
    /// Attribute lines as (name, value): ("BGP.as_path", "65001 65002"),
    /// ("BGP.originator_id", "10.0.0.1"), ("BGP.f0 [t]", "01 02"), …
    pub attrs: Vec<(String, String)>,
    /// The path's text as birdc printed it.
    pub text: String,
}

impl BirdRoute {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first `via` address, else the first BGP.next_hop address.
    pub fn next_hop(&self) -> Option<IpAddr> {
        self.next_hops.first().copied().or_else(|| {
            self.attr("BGP.next_hop")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    }

    /// AS numbers of BGP.as_path in order (AS_SET members included, braces
    /// dropped).
    pub fn as_path(&self) -> Vec<u32> {
        self.attr("BGP.as_path")
            .unwrap_or("")
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    /// BGP.community as (asn, value) pairs.
    pub fn communities(&self) -> Vec<(u16, u16)> {
        tuples(self.attr("BGP.community").unwrap_or(""))
            .into_iter()
            .filter_map(|t| Some((t.first()?.parse().ok()?, t.get(1)?.parse().ok()?)))
            .collect()
    }

    /// BGP.large_community as triples.
    pub fn large_communities(&self) -> Vec<(u32, u32, u32)> {
        tuples(self.attr("BGP.large_community").unwrap_or(""))
            .into_iter()
            .filter_map(|t| {
                Some((
                    t.first()?.parse().ok()?,
                    t.get(1)?.parse().ok()?,
                    t.get(2)?.parse().ok()?,
                ))
            })
            .collect()
    }

    pub fn originator_id(&self) -> Option<Ipv4Addr> {
        self.attr("BGP.originator_id")?.trim().parse().ok()
    }

    pub fn cluster_list(&self) -> Vec<Ipv4Addr> {
        self.attr("BGP.cluster_list")
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect()
    }
}

/// "(1,2) (3, 4)" → [["1","2"],["3","4"]].
fn tuples(s: &str) -> Vec<Vec<String>> {
    s.split('(')
        .skip(1)
        .map(|t| {
            t.split(')')
                .next()
                .unwrap_or("")
                .split(',')
                .map(|x| x.trim().to_string())
                .collect()
        })
        .collect()
}

/// Parses `birdc show route all` (banner already removed or not).
pub fn parse_routes(out: &str) -> Vec<BirdRoute> {
    let mut routes: Vec<BirdRoute> = Vec::new();
    let mut prefix = String::new();
    for line in out.lines() {
        if line.trim().is_empty() || line.starts_with("Table ") || line.starts_with("BIRD ") {
            continue;
        }
        if let Some(body) = line.strip_prefix('\t') {
            let Some(r) = routes.last_mut() else { continue };
            r.text.push('\n');
            r.text.push_str(line);
            let body = body.trim();
            if let Some(via) = body.strip_prefix("via ") {
                if let Some(a) = via.split_whitespace().next().and_then(|a| a.parse().ok()) {
                    r.next_hops.push(a);
                }
            } else if let Some((k, v)) = body.split_once(':') {
                r.attrs.push((k.trim().to_string(), v.trim().to_string()));
            }
            continue;
        }
        // A new prefix starts at column 0; another path for the same prefix
        // is indented with spaces.
        let rest = if line.starts_with(' ') {
            line.trim_start()
        } else {
            let mut it = line.splitn(2, char::is_whitespace);
            prefix = it.next().unwrap_or("").to_string();
            it.next().unwrap_or("").trim_start()
        };
        let proto = rest
            .split('[')
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("")
            .trim_end_matches(']')
            .to_string();
        routes.push(BirdRoute {
            prefix: prefix.clone(),
            proto,
            primary: rest.contains("] * ") || rest.contains("] *\t"),
            next_hops: Vec::new(),
            attrs: Vec::new(),
            text: line.to_string(),
        });
    }
    routes
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "BIRD 2.0.12 ready.\nTable master4:\n\
198.18.0.0/24        unicast [n_10_0_0_1 04:15:08.961] * (100) [AS65001i]\n\
\tvia 10.0.0.1 on ve2\n\
\tType: BGP univ\n\
\tBGP.origin: IGP\n\
\tBGP.as_path: 65001 65003\n\
\tBGP.next_hop: 10.0.0.1\n\
\tBGP.local_pref: 100\n\
\tBGP.community: (65001,7) (65001,8)\n\
\tBGP.large_community: (1, 2, 3)\n\
\tBGP.originator_id: 10.0.0.9\n\
\tBGP.cluster_list: 1.1.1.1 2.2.2.2\n\
\tBGP.f0 [t]: 01 02 03 04 05\n\
\x20                    unicast [n_10_0_0_3 04:15:09.000] (100) [AS65003i]\n\
\tvia 10.0.0.3 on ve2\n\
\tBGP.as_path: 65003\n\
203.0.113.0/24       blackhole [static4 04:15:00.549] * (200)\n\
\tType: static univ\n";

    #[test]
    fn parses_show_route_all() {
        let r = parse_routes(SAMPLE);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].prefix, "198.18.0.0/24");
        assert_eq!(r[0].proto, "n_10_0_0_1");
        assert!(r[0].primary);
        assert_eq!(r[0].next_hop(), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(r[0].as_path(), vec![65001, 65003]);
        assert_eq!(r[0].communities(), vec![(65001, 7), (65001, 8)]);
        assert_eq!(r[0].large_communities(), vec![(1, 2, 3)]);
        assert_eq!(r[0].originator_id(), Some(Ipv4Addr::new(10, 0, 0, 9)));
        assert_eq!(r[0].cluster_list().len(), 2);
        assert_eq!(r[0].attr("BGP.f0 [t]"), Some("01 02 03 04 05"));
        assert_eq!(r[1].prefix, "198.18.0.0/24");
        assert!(!r[1].primary);
        assert_eq!(r[1].as_path(), vec![65003]);
        assert_eq!(r[2].proto, "static4");
        assert_eq!(r[2].next_hop(), None);
    }

    #[test]
    fn protocol_names_are_identifiers() {
        assert_eq!(Bird::protocol_name("fd00::2".parse().unwrap()), "n_fd00__2");
    }
}
