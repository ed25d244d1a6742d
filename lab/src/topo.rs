//! Small topologies and kernel-state queries for tests.
use crate::netns::{Netns, ip, run, veth};
use anyhow::{Context, Result};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(addr: IpAddr) -> Family {
        if addr.is_ipv4() {
            Family::V4
        } else {
            Family::V6
        }
    }
}

/// Two namespaces joined by one veth: a has 10.0.N.1/24 and fd00:0:0:N::1/64,
/// b has .2 and ::2. Dropping it removes both namespaces.
#[derive(Debug)]
pub struct Pair {
    pub a: Netns,
    pub b: Netns,
    a_if: String,
    b_if: String,
    subnet: u8,
}

impl Pair {
    /// A pair on subnet 0 (10.0.0.0/24, fd00::/64).
    pub fn new(prefix: &str) -> Result<Pair> {
        Pair::with_subnet(prefix, 0)
    }

    /// A pair on 10.0.`subnet`.0/24 and fd00:0:0:`subnet`::/64.
    pub fn with_subnet(prefix: &str, subnet: u8) -> Result<Pair> {
        let a = Netns::new(&format!("{prefix}a"))?;
        let b = Netns::new(&format!("{prefix}b"))?;
        let a4 = format!("10.0.{subnet}.1/24");
        let b4 = format!("10.0.{subnet}.2/24");
        let a6 = format!("fd00:0:0:{subnet:x}::1/64");
        let b6 = format!("fd00:0:0:{subnet:x}::2/64");
        let (a_if, b_if) = veth(&a, &[&a4, &a6], &b, &[&b4, &b6])?;
        Ok(Pair {
            a,
            b,
            a_if,
            b_if,
            subnet,
        })
    }

    pub fn a_v4(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, self.subnet, 1)
    }

    pub fn b_v4(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 0, self.subnet, 2)
    }

    pub fn a_v6(&self) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0, 0, self.subnet.into(), 0, 0, 0, 1)
    }

    pub fn b_v6(&self) -> Ipv6Addr {
        Ipv6Addr::new(0xfd00, 0, 0, self.subnet.into(), 0, 0, 0, 2)
    }

    /// a's address in `family`.
    pub fn a_addr(&self, family: Family) -> IpAddr {
        match family {
            Family::V4 => self.a_v4().into(),
            Family::V6 => self.a_v6().into(),
        }
    }

    /// b's address in `family`.
    pub fn b_addr(&self, family: Family) -> IpAddr {
        match family {
            Family::V4 => self.b_v4().into(),
            Family::V6 => self.b_v6().into(),
        }
    }

    /// The veth end in a.
    pub fn a_if(&self) -> &str {
        &self.a_if
    }

    /// The veth end in b.
    pub fn b_if(&self) -> &str {
        &self.b_if
    }
}

/// A route of the kernel's main table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    /// "192.0.2.0/24", "2001:db8::/48", or "default".
    pub dst: String,
    /// Gateways, one per next hop (several for multipath routes).
    pub gateways: Vec<IpAddr>,
    /// "bgp", "bird", "kernel", "static", or a number.
    pub proto: String,
    /// The device of a single-path route, or of the first next hop.
    pub dev: Option<String>,
}

/// Routes in the main table of `ns` (`ip -j [-6] -n NS route show`),
/// optionally only those of protocol `proto`.
pub fn kernel_routes(ns: &Netns, family: Family, proto: Option<&str>) -> Result<Vec<KernelRoute>> {
    let mut args = vec!["-j"];
    if family == Family::V6 {
        args.push("-6");
    }
    args.extend(["-n", ns.name(), "route", "show"]);
    if let Some(p) = proto {
        args.extend(["proto", p]);
    }
    let out = ip(&args)?;
    parse_routes(&out)
}

/// Waits until the main table of `ns` has a route to `dst` (of protocol
/// `proto` when given) and returns it.
pub fn wait_kernel_route(
    ns: &Netns,
    dst: &str,
    proto: Option<&str>,
    timeout: std::time::Duration,
) -> Result<KernelRoute> {
    let family = if dst.contains(':') {
        Family::V6
    } else {
        Family::V4
    };
    crate::netns::wait_for(
        &format!("kernel route {dst} in {}", ns.name()),
        timeout,
        || {
            kernel_routes(ns, family, proto)
                .ok()?
                .into_iter()
                .find(|r| r.dst == dst)
        },
    )
}

pub(crate) fn parse_routes(json: &str) -> Result<Vec<KernelRoute>> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Vec<Value> = serde_json::from_str(json).context("parse ip -j route output")?;
    Ok(v.iter()
        .map(|r| {
            let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
            let mut gateways = Vec::new();
            let mut dev = s(r, "dev");
            if let Some(g) = s(r, "gateway").and_then(|g| g.parse().ok()) {
                gateways.push(g);
            }
            for nh in r
                .get("nexthops")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(g) = s(nh, "gateway").and_then(|g| g.parse().ok()) {
                    gateways.push(g);
                }
                if dev.is_none() {
                    dev = s(nh, "dev");
                }
            }
            KernelRoute {
                dst: s(r, "dst").unwrap_or_default(),
                gateways,
                proto: match r.get("protocol") {
                    Some(Value::String(p)) => p.clone(),
                    Some(other) => other.to_string(),
                    None => "boot".to_string(),
                },
                dev,
            }
        })
        .collect())
}

/// Pings `addr` from inside `ns` `count` times (0.2 s apart, 1 s wait for
/// each reply); true when any reply came back.
pub fn ping(ns: &Netns, addr: IpAddr, count: u32) -> bool {
    let count = count.max(1).to_string();
    let addr = addr.to_string();
    run(ns
        .command("ping")
        .args(["-n", "-q", "-c", &count, "-i", "0.2", "-W", "1", &addr]))
    .is_ok()
}

/// Pings `addr` from inside `ns` until a reply comes back, for at most
/// `timeout`: a link just made may take a moment to carry traffic on a
/// busy host.
pub fn wait_ping(ns: &Netns, addr: IpAddr, timeout: std::time::Duration) -> Result<()> {
    crate::netns::wait_for(
        &format!("a reply from {addr} in {}", ns.name()),
        timeout,
        || ping(ns, addr, 1).then_some(()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_multipath_routes() {
        let json = r#"[{"dst":"10.0.0.0/24","dev":"vx1","protocol":"kernel","scope":"link","prefsrc":"10.0.0.1","flags":[]},
            {"dst":"198.51.100.0/24","nhid":6,"gateway":"10.0.0.2","dev":"vx1","protocol":"bgp","metric":20,"flags":[]},
            {"dst":"192.0.2.0/24","protocol":"bird","metric":32,"flags":[],"nexthops":[{"gateway":"10.0.0.2","dev":"a","weight":1,"flags":[]},{"gateway":"10.0.1.2","dev":"b","weight":1,"flags":[]}]}]"#;
        let r = parse_routes(json).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].gateways, Vec::<IpAddr>::new());
        assert_eq!(r[1].proto, "bgp");
        assert_eq!(r[1].gateways, vec!["10.0.0.2".parse::<IpAddr>().unwrap()]);
        assert_eq!(r[2].gateways.len(), 2);
        assert_eq!(r[2].dev.as_deref(), Some("a"));
    }
}
