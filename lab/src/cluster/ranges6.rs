//! The IPv6 Service ranges of a `--dual-stack` lab: where IPv6 ClusterIPs
//! come from (the cluster's second service range, as a dual-stack API
//! server's `--service-cluster-ip-range=<v4>,<v6>`), and the IPv6 network
//! of the LoadBalancerIPPool `lab-lb`. Both are ULA networks apart from
//! the lab's other IPv6 ones: the pod pool, the nodes' underlay
//! addresses and the peer labs' links.

use anyhow::{Result, bail};
use ipnet::Ipv6Net;

use super::state::DEFAULT_POOL6;

/// Where a dual-stack lab's IPv6 ClusterIPs come from: a /112, the
/// 65536 addresses the API server's bitmap of an IPv6 range holds.
pub const DEFAULT_SERVICE_CIDR6: &str = "fd00:10:96::/112";

/// The IPv6 network of a dual-stack lab's LoadBalancerIPPool.
pub const DEFAULT_LB_CIDR6: &str = "fd00:10:97::/120";

/// The lab's other IPv6 networks: the pod pool, the nodes' underlay
/// addresses (`fd00:213:<subnet>::<i>/64`) and the links of
/// [`crate::topo`] (`fd00:0:0:<n>::/64`).
fn taken() -> Result<[(&'static str, Ipv6Net); 3]> {
    Ok([
        ("the pod pool", DEFAULT_POOL6.parse()?),
        (
            "the lab underlays (fd00:213::/32)",
            "fd00:213::/32".parse()?,
        ),
        ("the lab's peer links (fd00::/48)", "fd00::/48".parse()?),
    ])
}

/// The IPv6 service range of a lab: `given` (`--service-cidr6`) or the
/// default when `dual_stack`; none for a single-stack lab, which refuses
/// one given.
pub fn service_range6(given: Option<&str>, dual_stack: bool) -> Result<Option<String>> {
    if !dual_stack {
        if let Some(g) = given {
            bail!("--service-cidr6 {g}: only with --dual-stack (IPv6 Services need IPv6 pods)");
        }
        return Ok(None);
    }
    let s = given.unwrap_or(DEFAULT_SERVICE_CIDR6);
    let n: Ipv6Net = s.parse().map_err(|_| {
        anyhow::anyhow!("--service-cidr6 {s:?}: give an IPv6 prefix, e.g. {DEFAULT_SERVICE_CIDR6}")
    })?;
    if n.trunc() != n {
        bail!(
            "--service-cidr6 {s}: host bits set; did you mean {}?",
            n.trunc()
        );
    }
    // The API server's own bound (its bitmap allocator hands out only the
    // first 65536 addresses of a larger range).
    if n.prefix_len() < 108 {
        bail!(
            "--service-cidr6 {n}: too large; for 128-bit addresses the mask must be >= 108, as the API server requires"
        );
    }
    if n.prefix_len() > 124 {
        bail!("--service-cidr6 {n}: too small; use /124 or larger");
    }
    let overlap = |a: &Ipv6Net, b: &Ipv6Net| a.contains(&b.network()) || b.contains(&a.network());
    let lb: Ipv6Net = DEFAULT_LB_CIDR6.parse()?;
    if overlap(&n, &lb) {
        bail!("--service-cidr6 {n} overlaps the LoadBalancer range {lb}");
    }
    for (what, t) in taken()? {
        if overlap(&n, &t) {
            bail!("--service-cidr6 {n} overlaps {what} {t}");
        }
    }
    Ok(Some(n.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipv6_service_range_is_checked_as_the_api_server_checks_it() {
        assert_eq!(service_range6(None, false).unwrap(), None);
        assert_eq!(
            service_range6(None, true).unwrap().as_deref(),
            Some(DEFAULT_SERVICE_CIDR6)
        );
        assert!(
            service_range6(Some("fd00:10:96::/112"), false)
                .unwrap_err()
                .to_string()
                .contains("only with --dual-stack")
        );
        for (bad, why) in [
            ("10.96.0.0/16", "give an IPv6 prefix"),
            ("fd00:10:96::1/112", "host bits set"),
            ("fd00:10::/64", "the mask must be >= 108"),
            ("fd00:10:96::/126", "too small"),
            ("fd00:10:244::/112", "overlaps the pod pool"),
            ("fd00:213:5::/112", "overlaps the lab underlays"),
            ("fd00:10:97::/112", "overlaps the LoadBalancer range"),
        ] {
            let e = service_range6(Some(bad), true).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(
            service_range6(Some("fd00:99::/108"), true)
                .unwrap()
                .as_deref(),
            Some("fd00:99::/108")
        );
    }
}
