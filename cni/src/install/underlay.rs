//! The underlay: the interface carrying the node's default route and its
//! MTU, from the kernel's route tables as `/proc/net/route` and
//! `/proc/net/ipv6_route` print them (the IPv4 default route first; the
//! IPv6 one where there is none) and `/sys/class/net/<if>/mtu`. The
//! parsing is pure; [`detect`] reads the files.

use std::path::Path;

use tartan_api::mtu::Family;
use tartan_api::tartan_config::Underlay;

const RTF_UP: u32 = 0x1;
const RTF_REJECT: u32 = 0x200;

/// The interface of the IPv4 default route of lowest metric in
/// `/proc/net/route`'s text.
pub fn ipv4_default(table: &str) -> Option<String> {
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let iface: &str = f.first()?;
            let dest: &str = f.get(1)?;
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            let metric = f.get(6)?.parse::<u32>().ok()?;
            let mask: &str = f.get(7)?;
            let zero = |s: &str| u32::from_str_radix(s, 16).ok() == Some(0);
            (zero(dest) && zero(mask) && flags & RTF_UP != 0 && flags & RTF_REJECT == 0)
                .then(|| (metric, iface.to_string()))
        })
        .min()
        .map(|(_, i)| i)
}

/// The interface of the IPv6 default route (`::/0`) of lowest metric in
/// `/proc/net/ipv6_route`'s text; the kernel's unreachable default on
/// `lo` is not one.
pub fn ipv6_default(table: &str) -> Option<String> {
    table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 10 {
                return None;
            }
            let dest_zero = f[0].len() == 32 && f[0].bytes().all(|b| b == b'0');
            let metric = u32::from_str_radix(f[5], 16).ok()?;
            let flags = u32::from_str_radix(f[8], 16).ok()?;
            let iface = f[9];
            (dest_zero
                && f[1] == "00"
                && flags & RTF_UP != 0
                && flags & RTF_REJECT == 0
                && iface != "lo")
                .then(|| (metric, iface.to_string()))
        })
        .min()
        .map(|(_, i)| i)
}

/// The underlay's interface and family: `interface` if given (its family
/// from which default route it carries, IPv4 if none), else the IPv4
/// default route's, else the IPv6 one's.
pub fn choose(interface: Option<&str>, route: &str, ipv6_route: &str) -> Option<(String, Family)> {
    let v4 = ipv4_default(route);
    let v6 = ipv6_default(ipv6_route);
    match interface {
        Some(i) if v4.as_deref() != Some(i) && v6.as_deref() == Some(i) => {
            Some((i.to_string(), Family::Ipv6))
        }
        Some(i) => Some((i.to_string(), Family::Ipv4)),
        None => v4
            .map(|i| (i, Family::Ipv4))
            .or(v6.map(|i| (i, Family::Ipv6))),
    }
}

/// The underlay as the files under `proc` and `sys` (normally `/proc` and
/// `/sys`) show it; `None` when no default route is found. A missing
/// route table reads as empty (a kernel without IPv6).
pub fn detect(
    proc: &Path,
    sys: &Path,
    interface: Option<&str>,
) -> Result<Option<(String, Underlay)>, String> {
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let route = read(&proc.join("net/route"));
    let ipv6_route = read(&proc.join("net/ipv6_route"));
    let Some((iface, family)) = choose(interface, &route, &ipv6_route) else {
        return Ok(None);
    };
    if iface.contains('/') || iface.starts_with('.') {
        return Err(format!("{iface:?} is not an interface name"));
    }
    let path = sys.join("class/net").join(&iface).join("mtu");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("read the MTU of {iface} ({}): {e}", path.display()))?;
    let mtu = text
        .trim()
        .parse::<u32>()
        .map_err(|_| format!("{}: {:?} is not an MTU", path.display(), text.trim()))?;
    Ok(Some((iface, Underlay { mtu, family })))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth1\t00000000\t010200C0\t0003\t0\t0\t200\t00000000\t0\t0\t0
eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";
    const IPV6_ROUTE: &str = "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000003 00000000 00000003     ens3
";

    #[test]
    fn the_lowest_metric_default_route_wins() {
        assert_eq!(ipv4_default(ROUTE).as_deref(), Some("eth0"));
        assert_eq!(ipv6_default(IPV6_ROUTE).as_deref(), Some("ens3"));
    }

    #[test]
    fn no_default_route_or_garbage_is_none_not_a_panic() {
        let only_subnet = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n\
            eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n";
        assert_eq!(ipv4_default(only_subnet), None);
        assert_eq!(ipv4_default("Iface\nx y\n\u{0}\t00000000\tzz\n"), None);
        // Only the kernel's unreachable default on lo.
        let lo = IPV6_ROUTE.lines().nth(1).unwrap();
        assert_eq!(ipv6_default(lo), None);
        assert_eq!(ipv6_default("short line\n"), None);
    }

    #[test]
    fn ipv4_first_then_ipv6_or_the_named_interface() {
        assert_eq!(
            choose(None, ROUTE, IPV6_ROUTE),
            Some(("eth0".into(), Family::Ipv4))
        );
        assert_eq!(
            choose(None, "", IPV6_ROUTE),
            Some(("ens3".into(), Family::Ipv6))
        );
        assert_eq!(
            choose(Some("ens3"), ROUTE, IPV6_ROUTE),
            Some(("ens3".into(), Family::Ipv6))
        );
        assert_eq!(
            choose(Some("bond0"), ROUTE, IPV6_ROUTE),
            Some(("bond0".into(), Family::Ipv4))
        );
        assert_eq!(choose(None, "", ""), None);
    }

    #[test]
    fn detect_reads_the_mtu_of_the_chosen_interface() {
        let dir = std::env::temp_dir().join(format!("tartan-underlay-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("proc/net")).unwrap();
        std::fs::create_dir_all(dir.join("sys/class/net/eth0")).unwrap();
        std::fs::write(dir.join("proc/net/route"), ROUTE).unwrap();
        std::fs::write(dir.join("sys/class/net/eth0/mtu"), "9001\n").unwrap();
        let got = detect(&dir.join("proc"), &dir.join("sys"), None);
        let named = detect(&dir.join("proc"), &dir.join("sys"), Some("eth9"));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            got,
            Ok(Some((
                "eth0".into(),
                Underlay {
                    mtu: 9001,
                    family: Family::Ipv4
                }
            )))
        );
        assert!(named.unwrap_err().contains("read the MTU of eth9"));
    }
}
