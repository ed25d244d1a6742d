//! The host's own IPv4 networks (addresses and routes of the namespace the
//! lab is started from), which the lab's ranges must stay clear of: a
//! LoadBalancer range that is the host's uplink would hand out the host's
//! own address.

use anyhow::{Context, Result, bail};
use ipnet::Ipv4Net;
use serde_json::Value;

use crate::netns::ip;

/// One network of the host, with how to name it in a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNet {
    pub net: Ipv4Net,
    /// "address 192.0.2.2/24 on eth0", "route 10.0.0.0/8 dev wg0".
    pub what: String,
}

/// Reads `ip -j -4 addr show` and `ip -j -4 route show`.
pub fn read() -> Result<Vec<HostNet>> {
    let addrs: Value = serde_json::from_str(&ip(&["-j", "-4", "addr", "show"])?)
        .context("ip -j addr show: unreadable")?;
    let routes: Value = serde_json::from_str(&ip(&["-j", "-4", "route", "show"])?)
        .context("ip -j route show: unreadable")?;
    Ok(parse(&addrs, &routes))
}

/// The host's networks from `ip -j`'s address and route listings: each
/// address with its prefix, each route but the default one.
pub fn parse(addrs: &Value, routes: &Value) -> Vec<HostNet> {
    let mut out = Vec::new();
    for link in addrs.as_array().into_iter().flatten() {
        let dev = link["ifname"].as_str().unwrap_or("?");
        for a in link["addr_info"].as_array().into_iter().flatten() {
            let (Some(local), Some(len)) = (a["local"].as_str(), a["prefixlen"].as_u64()) else {
                continue;
            };
            let Ok(addr) = local.parse() else {
                continue;
            };
            let Ok(net) = Ipv4Net::new(addr, len.min(32) as u8) else {
                continue;
            };
            out.push(HostNet {
                net: net.trunc(),
                what: format!("address {local}/{len} on {dev}"),
            });
        }
    }
    for r in routes.as_array().into_iter().flatten() {
        let Some(dst) = r["dst"].as_str() else {
            continue;
        };
        // The default route covers everything: it says where traffic goes
        // when nothing nearer does, not which addresses are taken.
        if dst == "default" {
            continue;
        }
        let net = if dst.contains('/') {
            dst.parse::<Ipv4Net>().ok()
        } else {
            dst.parse().ok().and_then(|a| Ipv4Net::new(a, 32).ok())
        };
        let Some(net) = net else {
            continue;
        };
        let mut what = format!("route {dst}");
        if let Some(gw) = r["gateway"].as_str() {
            what.push_str(&format!(" via {gw}"));
        }
        if let Some(dev) = r["dev"].as_str() {
            what.push_str(&format!(" dev {dev}"));
        }
        out.push(HostNet { net, what });
    }
    out
}

pub fn overlaps(a: &Ipv4Net, b: &Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The first of the host's networks that `n` overlaps.
pub fn overlap<'a>(n: &Ipv4Net, host: &'a [HostNet]) -> Option<&'a HostNet> {
    host.iter().find(|h| overlaps(n, &h.net))
}

/// Refuses `flag`'s range `n` when it overlaps one of the host's networks.
pub fn check(flag: &str, n: &Ipv4Net, host: &[HostNet]) -> Result<()> {
    if let Some(h) = overlap(n, host) {
        bail!(
            "{flag} {n} overlaps the host's {}: the lab would shadow it; choose another range",
            h.what
        );
    }
    Ok(())
}

/// Candidates for the LoadBalancer range, in order: the three TEST-NETs
/// (RFC 5737), which no public network uses, then private /24s.
pub const LB_CANDIDATES: &[&str] = &[
    "192.0.2.0/24",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "10.212.0.0/24",
    "172.31.254.0/24",
];

/// Candidates for the ClusterIP range: kubeadm's default first.
pub const SERVICE_CANDIDATES: &[&str] = &[
    "10.96.0.0/16",
    "10.97.0.0/16",
    "10.98.0.0/16",
    "172.30.0.0/16",
    "192.168.240.0/20",
];

/// The first candidate that overlaps neither the host nor `avoid`.
pub fn pick(
    what: &str,
    candidates: &[&str],
    host: &[HostNet],
    avoid: &[Ipv4Net],
) -> Result<Ipv4Net> {
    for c in candidates {
        let n: Ipv4Net = c.parse()?;
        if overlap(&n, host).is_none() && !avoid.iter().any(|a| overlaps(&n, a)) {
            return Ok(n);
        }
    }
    bail!(
        "no default {what} is free on this host (tried {}); give one explicitly",
        candidates.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn host() -> Vec<HostNet> {
        parse(
            &json!([
                {"ifname": "lo", "addr_info": [{"local": "127.0.0.1", "prefixlen": 8}]},
                {"ifname": "eth0", "addr_info": [{"local": "192.0.2.2", "prefixlen": 24}]}
            ]),
            &json!([
                {"dst": "default", "gateway": "192.0.2.1", "dev": "eth0"},
                {"dst": "192.0.2.0/24", "dev": "eth0"},
                {"dst": "10.96.4.0/24", "gateway": "192.0.2.9", "dev": "eth0"},
                {"dst": "203.0.113.7", "dev": "eth0"}
            ]),
        )
    }

    #[test]
    fn addresses_and_routes_but_not_the_default() {
        let h = host();
        assert_eq!(h.len(), 5);
        assert_eq!(h[1].net, "192.0.2.0/24".parse::<Ipv4Net>().unwrap());
        assert_eq!(h[1].what, "address 192.0.2.2/24 on eth0");
        assert_eq!(h[4].net, "203.0.113.7/32".parse::<Ipv4Net>().unwrap());
        assert!(h.iter().all(|n| n.net.prefix_len() > 0));
    }

    #[test]
    fn defaults_skip_what_the_host_uses() {
        let h = host();
        let lb = pick("LoadBalancer range", LB_CANDIDATES, &h, &[]).unwrap();
        assert_eq!(lb.to_string(), "198.51.100.0/24");
        let svc = pick("service range", SERVICE_CANDIDATES, &h, &[]).unwrap();
        assert_eq!(svc.to_string(), "10.97.0.0/16");
        let avoid = ["198.51.100.0/24".parse().unwrap()];
        let lb = pick("LoadBalancer range", LB_CANDIDATES, &h, &avoid).unwrap();
        assert_eq!(lb.to_string(), "10.212.0.0/24");
    }

    #[test]
    fn explicit_overlap_names_the_host_address() {
        let h = host();
        let e = check("--lb-cidr", &"192.0.2.128/25".parse().unwrap(), &h).unwrap_err();
        assert!(
            e.to_string().contains("address 192.0.2.2/24 on eth0"),
            "{e}"
        );
        let e = check("--service-cidr", &"10.96.0.0/16".parse().unwrap(), &h).unwrap_err();
        assert!(
            e.to_string().contains("route 10.96.4.0/24 via 192.0.2.9"),
            "{e}"
        );
        assert!(check("--lb-cidr", &"198.51.100.0/24".parse().unwrap(), &h).is_ok());
    }
}
