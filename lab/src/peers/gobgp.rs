//! GoBGP: `gobgpd -f gobgpd.toml --api-hosts unix://DIR/gobgp.sock`,
//! driven with the `gobgp` CLI (`--target unix://…`): a unix socket per
//! instance instead of a TCP gRPC port, so instances never collide.
use super::client;
use super::config::{BgpConfig, Neighbor, Route};
use crate::netns::{Netns, wait_for};
use crate::process::Daemon;
use crate::tempdir::TempDir;
use crate::topo::Family;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::fmt::Write;
use std::net::IpAddr;
use std::time::Duration;

/// A GoBGP instance. GoBGP keeps routes in its RIB only: without zebra it
/// installs nothing in the kernel (`kernel` is ignored), and
/// `Neighbor::next_hop_self` is ignored (GoBGP sets it by global policy
/// only). Originated routes are added with `gobgp global rib add` after
/// start; routes may also be added or removed later.
#[derive(Debug)]
pub struct Gobgp {
    daemon: Daemon,
    config: BgpConfig,
    target: String,
    dir: TempDir,
}

impl Gobgp {
    pub fn start(ns: &Netns, config: BgpConfig) -> Result<Gobgp> {
        let dir = TempDir::new("gobgp")?;
        let conf = dir.write("gobgpd.toml", render(&config))?;
        let sock = dir.join("gobgp.sock");
        let target = format!("unix://{}", sock.display());
        let conf = conf.to_string_lossy().into_owned();
        let daemon = Daemon::spawn(
            ns,
            "gobgpd",
            "gobgpd",
            &[
                "-f",
                &conf,
                "--api-hosts",
                &target,
                "--pprof-disable",
                "--log-plain",
            ],
        )?;
        let g = Gobgp {
            daemon,
            config,
            target,
            dir,
        };
        let up = wait_for("gobgpd API", Duration::from_secs(10), || {
            if !g.daemon.is_running() {
                return Some(false);
            }
            g.gobgp(&["global"]).ok().map(|_| true)
        })?;
        if !up {
            bail!("gobgpd exited: {}", g.daemon.log_tail(20));
        }
        for r in g.config.routes.clone() {
            g.add_route(&r, None)?;
        }
        Ok(g)
    }

    pub fn config(&self) -> &BgpConfig {
        &self.config
    }

    pub fn config_text(&self) -> String {
        std::fs::read_to_string(self.dir.join("gobgpd.toml")).unwrap_or_default()
    }

    pub fn daemon(&self) -> &Daemon {
        &self.daemon
    }

    /// Runs `gobgp --target unix://SOCK ARGS…`.
    pub fn gobgp(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["--target", self.target.as_str()];
        full.extend_from_slice(args);
        client("gobgp", &full)
    }

    pub fn json(&self, args: &[&str]) -> Result<Value> {
        let out = self.gobgp(args)?;
        serde_json::from_str(&out).with_context(|| format!("gobgp {args:?}: {out}"))
    }

    /// Originates `route` (next hop `next_hop`, or GoBGP's own address when
    /// None).
    pub fn add_route(&self, route: &Route, next_hop: Option<IpAddr>) -> Result<()> {
        self.gobgp(
            &rib_args("add", route, next_hop)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )?;
        Ok(())
    }

    pub fn del_route(&self, route: &Route) -> Result<()> {
        self.gobgp(
            &rib_args("del", route, None)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )?;
        Ok(())
    }

    /// Session state with `addr`: "Idle", "Connect", "Active", "OpenSent",
    /// "OpenConfirm", "Established".
    pub fn neighbor_state(&self, addr: IpAddr) -> Result<String> {
        let v = self.json(&["neighbor", "-j"])?;
        let a = addr.to_string();
        let n = v
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n.pointer("/state/neighbor_address").and_then(Value::as_str) == Some(&a))
            .with_context(|| format!("no neighbor {a} in {v}"))?;
        Ok(match n.pointer("/state/session_state") {
            Some(Value::Number(x)) => match x.as_u64() {
                Some(1) => "Idle",
                Some(2) => "Connect",
                Some(3) => "Active",
                Some(4) => "OpenSent",
                Some(5) => "OpenConfirm",
                Some(6) => "Established",
                _ => "Unknown",
            }
            .to_string(),
            Some(Value::String(s)) => s.clone(),
            _ => "Unknown".to_string(),
        })
    }

    pub fn wait_established(&self, timeout: Duration) -> Result<()> {
        for n in &self.config.neighbors {
            wait_for(
                &format!("GoBGP session with {} established", n.address),
                timeout,
                || (self.neighbor_state(n.address).ok()? == "Established").then_some(()),
            )
            .map_err(|e| e.context(self.daemon.log_tail(20)))?;
        }
        Ok(())
    }

    /// Every path of the global RIB (`gobgp global rib -j -a ipv4|ipv6`).
    pub fn routes(&self, family: Family) -> Result<Vec<GobgpRoute>> {
        let fam = match family {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        };
        let v = self.json(&["global", "rib", "-j", "-a", fam])?;
        let mut out = Vec::new();
        for (prefix, paths) in v.as_object().into_iter().flatten() {
            for p in paths.as_array().into_iter().flatten() {
                out.push(GobgpRoute::from_json(prefix, p));
            }
        }
        Ok(out)
    }

    /// Waits until a path for `prefix` learned from a peer is present.
    pub fn wait_route(&self, prefix: &str, timeout: Duration) -> Result<GobgpRoute> {
        let fam = if prefix.contains(':') {
            Family::V6
        } else {
            Family::V4
        };
        wait_for(&format!("GoBGP route {prefix}"), timeout, || {
            self.routes(fam)
                .ok()?
                .into_iter()
                .find(|r| r.prefix == prefix && r.neighbor.is_some())
        })
    }
}

impl Gobgp {
    /// Renders `config` and has gobgpd check it (`gobgpd -d`) without
    /// starting; returns the text.
    pub fn check_config(config: &BgpConfig) -> Result<String> {
        let dir = TempDir::new("gobgp-check")?;
        let text = render(config);
        let conf = dir.write("gobgpd.toml", &text)?;
        let conf = conf.to_string_lossy().into_owned();
        client("gobgpd", &["-d", "-f", &conf]).map_err(|e| e.context(text.clone()))?;
        Ok(text)
    }
}

fn rib_args(op: &str, r: &Route, next_hop: Option<IpAddr>) -> Vec<String> {
    let fam = if r.is_ipv6() { "ipv6" } else { "ipv4" };
    let mut a: Vec<String> = ["global", "rib", "-a", fam, op, &r.prefix]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if op == "add" {
        if let Some(nh) = next_hop {
            a.extend(["nexthop".into(), nh.to_string()]);
        }
        if !r.communities.is_empty() {
            let l: Vec<String> = r
                .communities
                .iter()
                .map(|(x, y)| format!("{x}:{y}"))
                .collect();
            a.extend(["community".into(), l.join(",")]);
        }
        if !r.large_communities.is_empty() {
            let l: Vec<String> = r
                .large_communities
                .iter()
                .map(|(x, y, z)| format!("{x}:{y}:{z}"))
                .collect();
            a.extend(["large-community".into(), l.join(",")]);
        }
    }
    a
}

/// The generated gobgpd.toml.
pub(crate) fn render(c: &BgpConfig) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "[global.config]\n  as = {}\n  router-id = \"{}\"\n  port = 179",
        c.local_as, c.router_id
    );
    if let Some(l) = c.listen {
        let _ = writeln!(s, "  local-address-list = [\"{l}\"]");
    }
    for n in &c.neighbors {
        render_neighbor(&mut s, c, n);
    }
    s.push_str(&c.extra);
    s
}

fn render_neighbor(s: &mut String, c: &BgpConfig, n: &Neighbor) {
    let _ = writeln!(
        s,
        "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{}\"\n    peer-as = {}",
        n.address, n.remote_as
    );
    if let Some(p) = &n.password {
        let _ = writeln!(s, "    auth-password = \"{p}\"");
    }
    // GoBGP waits up to connect-retry before its first attempt.
    s.push_str("  [neighbors.timers.config]\n    connect-retry = 2\n");
    if n.passive || n.local_address.is_some() {
        s.push_str("  [neighbors.transport.config]\n");
        if n.passive {
            s.push_str("    passive-mode = true\n");
        }
        if let Some(l) = n.local_address {
            let _ = writeln!(s, "    local-address = \"{l}\"");
        }
    }
    if let Some(ttl) = n.multihop {
        let _ = writeln!(
            s,
            "  [neighbors.ebgp-multihop.config]\n    enabled = true\n    multihop-ttl = {ttl}"
        );
    }
    if n.rr_client {
        let id = c.cluster_id.unwrap_or(c.router_id);
        let _ = writeln!(
            s,
            "  [neighbors.route-reflector.config]\n    route-reflector-client = true\n    route-reflector-cluster-id = \"{id}\""
        );
    }
    if let Some(t) = n.graceful_restart {
        let _ = writeln!(
            s,
            "  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = {t}"
        );
    }
    for (on, name) in [(n.ipv4, "ipv4-unicast"), (n.ipv6, "ipv6-unicast")] {
        if !on {
            continue;
        }
        let _ = writeln!(
            s,
            "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"{name}\""
        );
        if n.graceful_restart.is_some() {
            s.push_str(
                "    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n",
            );
        }
    }
}

/// One path of the GoBGP RIB.
#[derive(Debug, Clone)]
pub struct GobgpRoute {
    pub prefix: String,
    pub best: bool,
    pub as_path: Vec<u32>,
    pub next_hop: Option<IpAddr>,
    /// The peer it came from; None for locally originated paths.
    pub neighbor: Option<IpAddr>,
    /// Path attributes as GoBGP prints them: objects with a numeric "type".
    pub attrs: Vec<Value>,
    pub raw: Value,
}

impl GobgpRoute {
    fn from_json(prefix: &str, p: &Value) -> GobgpRoute {
        let attrs: Vec<Value> = p
            .get("attrs")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let of_type = |t: u64| {
            attrs
                .iter()
                .find(|a| a.get("type").and_then(Value::as_u64) == Some(t))
        };
        let as_path = of_type(2)
            .and_then(|a| a.get("as_paths"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|seg| {
                seg.get("asns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|x| x.as_u64().map(|x| x as u32))
            .collect();
        // NEXT_HOP (3) for IPv4, MP_REACH_NLRI (14) for IPv6.
        let next_hop = of_type(3)
            .and_then(|a| a.get("nexthop"))
            .or_else(|| of_type(14).and_then(|a| a.get("nexthop")))
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok());
        let neighbor = p
            .get("neighbor-ip")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<IpAddr>().ok())
            .filter(|a| !a.is_unspecified());
        GobgpRoute {
            prefix: prefix.to_string(),
            best: p.get("best").and_then(Value::as_bool).unwrap_or(false),
            as_path,
            next_hop,
            neighbor,
            raw: p.clone(),
            attrs,
        }
    }

    /// The attribute of type `code`, as GoBGP prints it.
    pub fn attr(&self, code: u64) -> Option<&Value> {
        self.attrs
            .iter()
            .find(|a| a.get("type").and_then(Value::as_u64) == Some(code))
    }

    /// Standard communities as (asn, value).
    pub fn communities(&self) -> Vec<(u16, u16)> {
        self.attr(8)
            .and_then(|a| a.get("communities"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_u64())
            .map(|c| ((c >> 16) as u16, c as u16))
            .collect()
    }
}
