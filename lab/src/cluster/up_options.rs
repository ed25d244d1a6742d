//! What `tartan-lab up` is asked for: the cluster's name, size, topology
//! and encapsulation, and the service and LoadBalancer ranges, checked
//! against the host and each other.

use anyhow::{Result, bail};
use serde_json::json;
use tartan_api::resources::ippool::EncapMode;

use super::hostnets;
use super::state::DEFAULT_POOL;

pub struct UpOptions {
    pub name: String,
    pub nodes: usize,
    pub topology: String,
    /// The default pool's encapsulation.
    pub vxlan_mode: EncapMode,
    pub ipip_mode: EncapMode,
    /// IPv6 node addresses, BGP over IPv6 and an IPv6 pool too.
    pub dual_stack: bool,
    /// Where ClusterIPs come from; None: the first of
    /// [`hostnets::SERVICE_CANDIDATES`] the host does not use.
    pub service_cidr: Option<String>,
    /// Where a dual-stack lab's IPv6 ClusterIPs come from; None:
    /// [`super::ranges6::DEFAULT_SERVICE_CIDR6`].
    pub service_cidr6: Option<String>,
    /// Where LoadBalancer ingress IPs come from; None: the first of
    /// [`hostnets::LB_CANDIDATES`] the host does not use.
    pub lb_cidr: Option<String>,
    /// etcd, or the Kubernetes API (the API server stand-in).
    pub datastore: LabDatastore,
}

/// What the lab's cluster keeps its objects in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LabDatastore {
    /// etcd; the lab writes the default pools itself.
    #[default]
    Etcd,
    /// The API server stand-in with deploy/'s RBAC enforced; every
    /// program uses the `kubernetes` backend with its own kubeconfig, and
    /// the default pools come from the ConfigMap `tartan-config`.
    Kubernetes,
}

impl std::str::FromStr for LabDatastore {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "etcd" => Ok(LabDatastore::Etcd),
            "kubernetes" => Ok(LabDatastore::Kubernetes),
            other => bail!("--datastore {other:?}: use etcd or kubernetes"),
        }
    }
}

/// The ranges a lab uses: the explicit ones, refused when they overlap an
/// address or route of the host, and defaults that overlap nothing.
pub fn resolve_ranges(
    service: Option<&str>,
    lb: Option<&str>,
    host: &[hostnets::HostNet],
) -> Result<(String, String)> {
    let taken: Vec<ipnet::Ipv4Net> = vec![DEFAULT_POOL.parse()?, "10.213.0.0/16".parse()?];
    let explicit = |flag: &str, s: &str| -> Result<ipnet::Ipv4Net> {
        // check_ranges then checks its size and host bits.
        let n: ipnet::Ipv4Net = s
            .parse()
            .map_err(|_| anyhow::anyhow!("{flag} {s:?}: give an IPv4 prefix, e.g. 10.96.0.0/16"))?;
        hostnets::check(flag, &n.trunc(), host)?;
        Ok(n)
    };
    let svc = match service {
        Some(s) => explicit("--service-cidr", s)?,
        None => hostnets::pick("service range", hostnets::SERVICE_CANDIDATES, host, &taken)?,
    };
    let mut avoid = taken;
    avoid.push(svc.trunc());
    let lbn = match lb {
        Some(s) => explicit("--lb-cidr", s)?,
        None => hostnets::pick("LoadBalancer range", hostnets::LB_CANDIDATES, host, &avoid)?,
    };
    let (svc, lbn) = (svc.to_string(), lbn.to_string());
    check_ranges(&svc, &lbn)?;
    Ok((svc, lbn))
}

/// The service and LoadBalancer ranges: IPv4 prefixes of at least 4
/// addresses (16 for the service range, whose tenth is the DNS Service's),
/// apart from each other, the pools and the underlays.
pub fn check_ranges(service: &str, lb: &str) -> Result<()> {
    use ipnet::Ipv4Net;
    let parse = |flag: &str, s: &str| -> Result<Ipv4Net> {
        let n: Ipv4Net = s
            .parse()
            .map_err(|_| anyhow::anyhow!("{flag} {s:?}: give an IPv4 prefix, e.g. 10.96.0.0/16"))?;
        if n.prefix_len() > 30 {
            bail!("{flag} {s}: too small; use /30 or larger");
        }
        if n.trunc() != n {
            bail!("{flag} {s}: host bits set; did you mean {}?", n.trunc());
        }
        Ok(n)
    };
    let svc = parse("--service-cidr", service)?;
    // The DNS Service takes the range's tenth address (as kubeadm gives
    // it): a /28 is the smallest range holding it below its broadcast.
    if svc.prefix_len() > 28 {
        bail!(
            "--service-cidr {svc}: too small for the DNS Service, which takes its tenth address; use /28 or larger"
        );
    }
    let lbn = parse("--lb-cidr", lb)?;
    let overlap = |a: &Ipv4Net, b: &Ipv4Net| a.contains(&b.network()) || b.contains(&a.network());
    if overlap(&svc, &lbn) {
        bail!("--service-cidr {svc} and --lb-cidr {lbn} overlap");
    }
    let taken: [(&str, Ipv4Net); 2] = [
        ("the pod pool", DEFAULT_POOL.parse()?),
        (
            "the lab underlays (10.213.0.0/16)",
            "10.213.0.0/16".parse()?,
        ),
    ];
    for (flag, n) in [("--service-cidr", svc), ("--lb-cidr", lbn)] {
        for (what, t) in &taken {
            if overlap(&n, t) {
                bail!("{flag} {n} overlaps {what} {t}");
            }
        }
    }
    Ok(())
}

/// `Never`, `Always` or `CrossSubnet`, as in an IPPool.
pub fn parse_mode(flag: &str, s: &str) -> Result<EncapMode> {
    serde_json::from_value(json!(s))
        .map_err(|_| anyhow::anyhow!("{flag} {s:?}: use Never, Always or CrossSubnet"))
}

/// The default pool's encapsulation for `topology` when none is asked:
/// two subnets joined by a router that knows no pod routes need VXLAN
/// across the router.
pub fn default_vxlan_mode(topology: &str) -> EncapMode {
    if topology == "two-subnets" {
        EncapMode::CrossSubnet
    } else {
        EncapMode::Never
    }
}

pub(super) fn encap_text(o: &UpOptions) -> String {
    let mode = |m: EncapMode| {
        serde_json::to_value(m)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    };
    if o.vxlan_mode != EncapMode::Never {
        format!(" (vxlanMode {})", mode(o.vxlan_mode))
    } else if o.ipip_mode != EncapMode::Never {
        format!(" (ipipMode {})", mode(o.ipip_mode))
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_range_without_a_tenth_address_is_refused_up_front() {
        let lb = "198.51.100.0/24";
        for small in ["10.96.0.0/29", "10.96.0.0/30"] {
            let e = check_ranges(small, lb).unwrap_err().to_string();
            assert!(e.contains("tenth address"), "{small}: {e}");
        }
        check_ranges("10.96.0.0/28", lb).unwrap();
        // The LoadBalancer range keeps its own, smaller, minimum.
        check_ranges("10.96.0.0/16", "198.51.100.0/30").unwrap();
    }
}
