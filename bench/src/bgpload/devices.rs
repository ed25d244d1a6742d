//! The devices under test, each configured with the injectors and the sink
//! as passive eBGP neighbors (the generator connects), no kernel install,
//! and nothing exported back to the injectors where the device can filter.
use super::topology::{DEVICE_AS, SINK_AS, Topology};
use anyhow::{Result, bail};
use std::fmt::Write;
use std::net::IpAddr;
use std::process::Command;
use tartan_lab::peers::{
    BgpConfig, Bird, Frr, Gobgp, Neighbor, Tartan, TartanOptions, bgpd_binary,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    Tartan,
    Bird,
    Gobgp,
    Frr,
}

impl DeviceKind {
    pub fn parse(s: &str) -> Result<DeviceKind> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "tartan" | "tartan-bgpd" => DeviceKind::Tartan,
            "bird" | "bird2" => DeviceKind::Bird,
            "gobgp" | "gobgpd" => DeviceKind::Gobgp,
            "frr" => DeviceKind::Frr,
            other => bail!("unknown device {other:?} (tartan, bird, gobgp, frr)"),
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Tartan => "tartan",
            DeviceKind::Bird => "bird",
            DeviceKind::Gobgp => "gobgp",
            DeviceKind::Frr => "frr",
        }
    }

    /// The version line of the installed program.
    pub fn version(self) -> String {
        let (prog, args): (String, &[&str]) = match self {
            DeviceKind::Tartan => (bgpd_binary().to_string_lossy().into_owned(), &["--version"]),
            DeviceKind::Bird => ("bird".into(), &["--version"]),
            DeviceKind::Gobgp => ("gobgpd".into(), &["--version"]),
            DeviceKind::Frr => ("/usr/lib/frr/bgpd".into(), &["--version"]),
        };
        let out = Command::new(&prog).args(args).output();
        let text = out
            .map(|o| {
                let mut t = String::from_utf8_lossy(&o.stdout).into_owned();
                t.push_str(&String::from_utf8_lossy(&o.stderr));
                t
            })
            .unwrap_or_default();
        let line = text.lines().map(str::trim).find(|l| !l.is_empty());
        match (self, line) {
            (_, Some(l)) => {
                let v = l.rsplit(' ').next().unwrap_or(l);
                match self {
                    DeviceKind::Frr => format!("FRR {v} (bgpd + zebra)"),
                    DeviceKind::Bird => format!("BIRD {v}"),
                    DeviceKind::Gobgp => format!("GoBGP {v}"),
                    DeviceKind::Tartan => l.to_string(),
                }
            }
            (DeviceKind::Tartan, None) => "tartan-bgpd (this tree)".into(),
            (_, None) => format!("{} (version unknown)", self.name()),
        }
    }

    /// How it is configured, for the report.
    pub fn config_note(self) -> &'static str {
        match self {
            DeviceKind::Bird => {
                "one `protocol bgp` per peer, passive; injectors `import all; export none`, \
                 sink `export where source ~ [RTS_STATIC, RTS_BGP]`; kernel protocols `export none`"
            }
            DeviceKind::Frr => {
                "bgpd (`-n`: no FIB, so nothing reaches zebra or the kernel) + zebra; \
                 `no bgp ebgp-requires-policy`, `advertisement-interval 0`, passive peers; \
                 `route-map … deny` out towards each injector"
            }
            DeviceKind::Gobgp => {
                "passive peers; global export policy rejecting routes towards a \
                 neighbor-set of the injectors (default accept); no zebra"
            }
            DeviceKind::Tartan => {
                "passive peers, `[kernel] install = false`, `export = false` towards \
                 each injector"
            }
        }
    }
}

/// A running device.
#[derive(Debug)]
pub enum Device {
    Tartan(Tartan),
    Bird(Bird),
    Gobgp(Gobgp),
    Frr(Frr),
}

impl Device {
    pub fn start(kind: DeviceKind, topo: &Topology) -> Result<Device> {
        let ns = &topo.device;
        let n = topo.peers();
        let injector = |i: u32| {
            Neighbor::new(
                IpAddr::V4(Topology::injector_addr(i)),
                Topology::injector_as(i),
            )
            .local_address(IpAddr::V4(Topology::device_injector_side(i)))
            .passive()
        };
        let sink = Neighbor::new(IpAddr::V4(Topology::sink_addr()), SINK_AS)
            .local_address(IpAddr::V4(Topology::device_sink_side()))
            .passive();
        let base = BgpConfig::new(Topology::device_sink_side(), DEVICE_AS)
            .kernel(false)
            .neighbor(sink);
        Ok(match kind {
            DeviceKind::Bird => Device::Bird(Bird::start(ns, base.extra(&bird_injectors(n)))?),
            DeviceKind::Frr => {
                let c = (0..n).fold(base, |c, i| c.neighbor(injector(i)));
                Device::Frr(Frr::start(ns, c.extra(&frr_no_export(n)))?)
            }
            DeviceKind::Gobgp => {
                let c = (0..n).fold(base, |c, i| c.neighbor(injector(i)));
                Device::Gobgp(Gobgp::start(ns, c.extra(&gobgp_no_export(n)))?)
            }
            DeviceKind::Tartan => {
                let c = (0..n).fold(base, |c, i| c.neighbor(injector(i)));
                let bin = bgpd_binary();
                if !bin.exists() {
                    bail!(
                        "{} not found (build tartan-bgpd or set TARTAN_BGPD)",
                        bin.display()
                    );
                }
                // Receive only from injectors, as the other devices are set up.
                let options = TartanOptions {
                    receive_only: c
                        .neighbors
                        .iter()
                        .filter(|n| n.remote_as != SINK_AS)
                        .map(|n| n.address)
                        .collect(),
                    ..TartanOptions::default()
                };
                Device::Tartan(Tartan::start(ns, &bin, &c, &options)?)
            }
        })
    }

    /// The device's processes.
    pub fn pids(&self) -> Vec<u32> {
        match self {
            Device::Tartan(t) => vec![t.daemon().pid()],
            Device::Bird(b) => vec![b.daemon().pid()],
            Device::Gobgp(g) => vec![g.daemon().pid()],
            Device::Frr(f) => vec![f.bgpd().pid(), f.zebra().pid()],
        }
    }

    pub fn is_running(&self) -> bool {
        match self {
            Device::Tartan(t) => t.daemon().is_running(),
            Device::Bird(b) => b.daemon().is_running(),
            Device::Gobgp(g) => g.daemon().is_running(),
            Device::Frr(f) => f.bgpd().is_running() && f.zebra().is_running(),
        }
    }

    /// Peak resident memory (VmHWM) summed over the device's processes.
    pub fn peak_rss(&self) -> Result<u64> {
        self.pids().into_iter().map(vm_hwm).sum()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        match self {
            Device::Tartan(t) => t.daemon().log_tail(lines),
            Device::Bird(b) => b.daemon().log_tail(lines),
            Device::Gobgp(g) => g.daemon().log_tail(lines),
            Device::Frr(f) => f.bgpd().log_tail(lines),
        }
    }
}

/// VmHWM of a process, in bytes.
fn vm_hwm(pid: u32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"));
    let kb = line
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok());
    match kb {
        Some(kb) => Ok(kb * 1024),
        None => bail!("no VmHWM for pid {pid}"),
    }
}

/// BIRD: the injectors as raw protocols, so that they can export nothing.
fn bird_injectors(n: u32) -> String {
    let mut s = String::new();
    for i in 0..n {
        let a = Topology::injector_addr(i);
        let _ = write!(
            s,
            "protocol bgp {} {{\n  local {} as {DEVICE_AS};\n  neighbor {a} as {};\n  \
             passive on;\n  graceful restart off;\n  ipv4 {{ import all; export none; }};\n}}\n",
            Bird::protocol_name(IpAddr::V4(a)),
            Topology::device_injector_side(i),
            Topology::injector_as(i),
        );
    }
    s
}

/// FRR: a deny-all route-map outbound towards every injector.
fn frr_no_export(n: u32) -> String {
    let mut s = format!("route-map TARTAN-BENCH-NONE deny 10\nexit\n!\nrouter bgp {DEVICE_AS}\n");
    s.push_str(" address-family ipv4 unicast\n");
    for i in 0..n {
        let _ = writeln!(
            s,
            "  neighbor {} route-map TARTAN-BENCH-NONE out",
            Topology::injector_addr(i)
        );
    }
    s.push_str(" exit-address-family\nexit\n!\n");
    s
}

/// GoBGP: a global export policy rejecting routes towards the injectors
/// (for export, a neighbor condition matches the receiving peer).
fn gobgp_no_export(n: u32) -> String {
    let list: Vec<String> = (0..n)
        .map(|i| format!("\"{}\"", Topology::injector_addr(i)))
        .collect();
    format!(
        "\n[[defined-sets.neighbor-sets]]\n  neighbor-set-name = \"injectors\"\n  neighbor-info-list = [{}]\n\
         \n[[policy-definitions]]\n  name = \"not-to-injectors\"\n  [[policy-definitions.statements]]\n    \
         name = \"reject\"\n    [policy-definitions.statements.conditions.match-neighbor-set]\n      \
         neighbor-set = \"injectors\"\n      match-set-options = \"any\"\n    \
         [policy-definitions.statements.actions]\n      route-disposition = \"reject-route\"\n\
         \n[global.apply-policy.config]\n  export-policy-list = [\"not-to-injectors\"]\n  \
         default-export-policy = \"accept-route\"\n",
        list.join(", ")
    )
}
