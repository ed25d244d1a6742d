//! Which LoadBalancer address each Service holds, pure: from the pools and
//! the Services, the Services whose `status.loadBalancer.ingress` must
//! change, and why any Service cannot have an address.
//!
//! - Tartan serves a Service of type LoadBalancer whose
//!   `spec.loadBalancerClass` is unset or [`CLASS`].
//! - The pools a Service may draw from: those whose `serviceSelector`
//!   matches its labels; of them, the ones its annotation [`POOL_ANNOTATION`]
//!   names (comma-separated), else the `autoAssign` ones (a requested
//!   address may come from any matching pool).
//! - It wants one address per family of `spec.ipFamilies` (IPv4 when
//!   none): `spec.loadBalancerIP` when given (it must lie in a pool it may
//!   use and be free), else the address it holds if still allowed, else
//!   the lowest free address of its pools, in pool name order.
//! - Of two Services holding one address, the older (creation time, then
//!   namespace/name) keeps it.
//! - A Service Tartan no longer serves (deleted, or its type changed)
//!   gives its address back: one that is no longer of type LoadBalancer
//!   loses an ingress address that lies in a pool.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::{IpAddrRange, IpNet, Ipv4AddrRange, Ipv6AddrRange};
use k8s_openapi::api::core::v1::Service;
use tartan_api::resources::LoadBalancerIpPool;
use tartan_api::selector::Selector;

/// The `spec.loadBalancerClass` Tartan serves (besides none).
pub const CLASS: &str = "tartan.dev/loadbalancer";

/// Names the pools (comma-separated) a Service's address comes from.
pub const POOL_ANNOTATION: &str = "tartan.dev/loadbalancer-ip-pool";

/// A Service whose ingress addresses change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub namespace: String,
    pub name: String,
    /// The version read; the write replaces only it.
    pub version: String,
    pub from: Vec<IpAddr>,
    pub to: Vec<IpAddr>,
}

/// The outcome of one pass.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub changes: Vec<Change>,
    /// `namespace/name: why` for each Service that could not have all
    /// the addresses it wants.
    pub problems: Vec<String>,
    /// Per pool: (addresses, in use).
    pub usage: BTreeMap<String, (u128, u128)>,
}

struct Pool {
    name: String,
    nets: Vec<IpNet>,
    auto: bool,
    selector: Option<Selector>,
}

impl Pool {
    fn contains(&self, a: IpAddr) -> bool {
        self.nets.iter().any(|n| n.contains(&a))
    }

    fn size(&self) -> u128 {
        self.nets
            .iter()
            .map(|n| 1u128 << (n.max_prefix_len() - n.prefix_len()).min(127))
            .sum()
    }
}

fn key(s: &Service) -> String {
    format!(
        "{}/{}",
        s.metadata.namespace.as_deref().unwrap_or("default"),
        s.metadata.name.as_deref().unwrap_or("")
    )
}

/// Whether Tartan gives `s` its LoadBalancer addresses.
pub fn served(s: &Service) -> bool {
    let Some(spec) = &s.spec else { return false };
    spec.type_.as_deref() == Some("LoadBalancer")
        && spec
            .load_balancer_class
            .as_deref()
            .is_none_or(|c| c == CLASS)
        && s.metadata.deletion_timestamp.is_none()
}

/// The ingress addresses `s` holds now.
pub fn ingress(s: &Service) -> Vec<IpAddr> {
    let Some(lb) = s.status.as_ref().and_then(|st| st.load_balancer.as_ref()) else {
        return vec![];
    };
    lb.ingress
        .iter()
        .flatten()
        .filter_map(|i| i.ip.as_deref()?.parse().ok())
        .collect()
}

fn families(s: &Service) -> Vec<bool> {
    // true: IPv6.
    let fams: Vec<bool> = s
        .spec
        .as_ref()
        .and_then(|sp| sp.ip_families.as_ref())
        .map(|f| f.iter().map(|x| x == "IPv6").collect())
        .unwrap_or_default();
    if fams.is_empty() { vec![false] } else { fams }
}

/// The pass over `pools` and `services`.
pub fn assign(pools: &[LoadBalancerIpPool], services: &[Service]) -> Outcome {
    let mut out = Outcome::default();
    let mut pools: Vec<Pool> = pools
        .iter()
        .map(|p| Pool {
            name: p.metadata.name.clone().unwrap_or_default(),
            nets: p.spec.networks(),
            auto: p.spec.auto_assign,
            selector: Selector::parse(&p.spec.service_selector).ok(),
        })
        .collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    let in_pool = |a: IpAddr| pools.iter().any(|p| p.contains(a));

    let mut order: Vec<&Service> = services.iter().collect();
    order.sort_by(|a, b| {
        let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
        ta.cmp(&tb).then_with(|| key(a).cmp(&key(b)))
    });
    // Addresses held by Services Tartan does not serve (another class,
    // or no longer of type LoadBalancer and given back below) are not
    // given to another in this pass.
    let mut taken: BTreeSet<IpAddr> = order
        .iter()
        .filter(|s| !served(s))
        .flat_map(|s| ingress(s))
        .collect();
    // First the addresses served Services may keep, oldest first.
    let mut wants: Vec<(&Service, Vec<&Pool>, Vec<IpAddr>)> = Vec::new();
    for s in &order {
        if !served(s) {
            continue;
        }
        let labels = s.metadata.labels.clone().unwrap_or_default();
        let named: Option<BTreeSet<&str>> = s
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POOL_ANNOTATION))
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                    .collect()
            });
        let matching: Vec<&Pool> = pools
            .iter()
            .filter(|p| p.selector.as_ref().is_some_and(|sel| sel.matches(&labels)))
            .filter(|p| named.as_ref().is_none_or(|n| n.contains(p.name.as_str())))
            .collect();
        let requested: Option<IpAddr> = s
            .spec
            .as_ref()
            .and_then(|sp| sp.load_balancer_ip.as_deref())
            .filter(|ip| !ip.is_empty())
            .and_then(|ip| ip.parse().ok());
        let usable: Vec<&Pool> = matching
            .iter()
            .copied()
            .filter(|p| named.is_some() || requested.is_some() || p.auto)
            .collect();
        let mut keep = Vec::new();
        for a in ingress(s) {
            let allowed = usable.iter().any(|p| p.contains(a))
                && requested.is_none_or(|r| r == a)
                && !taken.contains(&a);
            if allowed {
                taken.insert(a);
                keep.push(a);
            }
        }
        wants.push((s, usable, keep));
    }
    // Then new addresses, oldest Service first.
    for (s, usable, mut have) in wants {
        let requested: Option<String> = s
            .spec
            .as_ref()
            .and_then(|sp| sp.load_balancer_ip.clone())
            .filter(|ip| !ip.is_empty());
        for v6 in families(s) {
            if have.iter().any(|a| a.is_ipv6() == v6) {
                continue;
            }
            if let Some(r) = &requested {
                match r.parse::<IpAddr>() {
                    Ok(a) if a.is_ipv6() != v6 => {}
                    Ok(a) if !usable.iter().any(|p| p.contains(a)) => out.problems.push(format!(
                        "{}: spec.loadBalancerIP {a} is in no LoadBalancerIPPool it may use",
                        key(s)
                    )),
                    Ok(a) if taken.contains(&a) => out.problems.push(format!(
                        "{}: spec.loadBalancerIP {a} is held by another Service",
                        key(s)
                    )),
                    Ok(a) => {
                        taken.insert(a);
                        have.push(a);
                    }
                    Err(_) => out.problems.push(format!(
                        "{}: spec.loadBalancerIP {r:?} is not an address",
                        key(s)
                    )),
                }
                continue;
            }
            match usable.iter().find_map(|p| lowest_free(p, v6, &taken)) {
                Some(a) => {
                    taken.insert(a);
                    have.push(a);
                }
                None if usable.is_empty() => out.problems.push(format!(
                    "{}: no LoadBalancerIPPool may give it an address",
                    key(s)
                )),
                None => out.problems.push(format!(
                    "{}: its LoadBalancerIPPools have no free {} address",
                    key(s),
                    if v6 { "IPv6" } else { "IPv4" }
                )),
            }
        }
        push_change(&mut out, s, have);
    }
    // Services Tartan does not serve, not of type LoadBalancer: give back
    // pool addresses.
    for s in &order {
        let lb = s.spec.as_ref().and_then(|sp| sp.type_.as_deref()) == Some("LoadBalancer");
        if served(s) || lb {
            continue;
        }
        let now = ingress(s);
        if now.iter().any(|a| in_pool(*a)) {
            let keep = now.into_iter().filter(|a| !in_pool(*a)).collect();
            push_change(&mut out, s, keep);
        }
    }
    for p in &pools {
        let used = taken.iter().filter(|a| p.contains(**a)).count() as u128;
        out.usage.insert(p.name.clone(), (p.size(), used));
    }
    out
}

fn push_change(out: &mut Outcome, s: &Service, to: Vec<IpAddr>) {
    let from = ingress(s);
    let same = from.len() == to.len() && from.iter().all(|a| to.contains(a));
    if same {
        return;
    }
    out.changes.push(Change {
        namespace: s
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: s.metadata.name.clone().unwrap_or_default(),
        version: s.metadata.resource_version.clone().unwrap_or_default(),
        from,
        to,
    });
}

/// The lowest address of `p` in the family that is not taken.
fn lowest_free(p: &Pool, v6: bool, taken: &BTreeSet<IpAddr>) -> Option<IpAddr> {
    for n in p.nets.iter().filter(|n| matches!(n, IpNet::V6(_)) == v6) {
        // Bounded: a pool of 2^64 addresses is not walked past what is
        // taken plus one.
        let all: IpAddrRange = match n {
            IpNet::V4(n) => Ipv4AddrRange::new(n.network(), n.broadcast()).into(),
            IpNet::V6(n) => Ipv6AddrRange::new(n.network(), n.broadcast()).into(),
        };
        for a in all.take(taken.len() + 1) {
            if !taken.contains(&a) {
                return Some(a);
            }
        }
    }
    None
}
