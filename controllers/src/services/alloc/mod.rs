//! What the API server gives a Service: its IP family fields
//! ([`families`]), a ClusterIP from the service range of each of its
//! families (IPv4, and IPv6 on a dual-stack cluster), NodePorts from
//! 30000–32767 (one set per Service, whatever its families) (LoadBalancer ingress addresses are
//! the LoadBalancerIPPool controller's, [`crate::lbpool`]). Pure: the
//! Services already stored and those being written in, the written ones
//! with their addresses and ports filled in, or every problem found (and
//! then nothing is written).
//!
//! - A value the Service gives is kept: a ClusterIP outside the service
//!   range as given (only one inside it must be free), a NodePort if it
//!   is in range and free.
//! - A Service written again without them keeps what it holds (as `kubectl
//!   apply` does, the file never named them); a changed ClusterIP is
//!   refused (it is immutable).
//! - Lowest free first: the service range's first address is left for the
//!   `kubernetes` Service, as the API server does.

pub mod bitmap;
mod checks;
pub mod claims;
mod families;
mod fields;
pub mod held;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::ops::RangeInclusive;

use ipnet::{Ipv4Net, Ipv6Net};
use k8s_openapi::api::core::v1::Service;

use checks::{carry_over, own_problems};
pub use fields::key;
use fields::{
    cluster_ip_list, given_cluster_ip_spec, health_port, type_of, wants_health_port,
    wants_node_ports,
};
pub use held::Held;

/// The NodePort range of a default API server.
pub const NODE_PORTS: RangeInclusive<u16> = 30000..=32767;

/// Where addresses and ports come from.
#[derive(Debug, Clone)]
pub struct Ranges {
    /// The primary family's service range.
    pub service: Ipv4Net,
    /// A dual-stack cluster's IPv6 service range (its secondary family).
    pub service6: Option<Ipv6Net>,
    pub node_ports: RangeInclusive<u16>,
}

impl Ranges {
    /// A single-stack IPv4 cluster's.
    pub fn new(service: Ipv4Net) -> Ranges {
        Ranges {
            service,
            service6: None,
            node_ports: NODE_PORTS,
        }
    }

    /// A dual-stack cluster's: IPv4 first, IPv6 second.
    pub fn dual_stack(service: Ipv4Net, service6: Ipv6Net) -> Ranges {
        Ranges {
            service6: Some(service6),
            ..Ranges::new(service)
        }
    }

    pub fn is_dual_stack(&self) -> bool {
        self.service6.is_some()
    }

    /// The NodePort range as messages give it, `30000-32767`.
    fn node_port_text(&self) -> String {
        format!("{}-{}", self.node_ports.start(), self.node_ports.end())
    }
}

/// Why Services were refused: every problem, and whether any is a value
/// already taken or a range run out (which a stored bitmap may say
/// wrongly, when a claim leaked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub problems: Vec<String>,
    pub taken: bool,
}

/// `incoming` with ClusterIPs and NodePorts
/// filled in, given the Services `stored` (every Service, or at least
/// every one holding something); or every problem.
pub fn allocate(
    ranges: &Ranges,
    stored: &[Service],
    incoming: &[Service],
) -> Result<Vec<Service>, Vec<String>> {
    allocate_held(ranges, stored, incoming)
        .0
        .map_err(|r| r.problems)
}

/// [`allocate`], and what is held afterwards.
fn allocate_held(
    ranges: &Ranges,
    stored: &[Service],
    incoming: &[Service],
) -> (Result<Vec<Service>, Refusal>, Held) {
    let incoming_keys: BTreeSet<String> = incoming.iter().map(key).collect();
    let mut held = Held::empty(ranges);
    for s in stored.iter().filter(|s| !incoming_keys.contains(&key(s))) {
        held.add(s);
    }
    let selves: BTreeMap<String, &Service> = stored
        .iter()
        .filter(|s| incoming_keys.contains(&key(s)))
        .map(|s| (key(s), s))
        .collect();
    let done = allocate_in(ranges, &mut held, &selves, incoming);
    (done, held)
}

/// [`allocate`] against `held`, what the other Services hold (the
/// incoming ones' stored versions `selves`, by key, not included); what
/// the completed Services hold is added to `held`.
pub fn allocate_in(
    ranges: &Ranges,
    held: &mut Held,
    selves: &BTreeMap<String, &Service>,
    incoming: &[Service],
) -> Result<Vec<Service>, Refusal> {
    let mut problems = Vec::new();
    let mut taken = false;
    let incoming_keys: BTreeSet<String> = incoming.iter().map(key).collect();
    if incoming_keys.len() != incoming.len() {
        problems.push("the same Service is given twice".to_string());
    }
    let refuse = |problems, taken| Err(Refusal { problems, taken });
    let mut out: Vec<Service> = incoming.to_vec();
    for s in &mut out {
        own_problems(s, ranges.is_dual_stack(), &mut problems);
        if let Some(old) = selves.get(&key(s)) {
            carry_over(s, old, &mut problems);
        }
    }
    if !problems.is_empty() {
        return refuse(problems, taken);
    }
    // The family fields first: they decide which ClusterIPs a Service
    // keeps (a downgrade drops its second) and which it is given.
    for s in &mut out {
        let k = key(s);
        if type_of(s) == "ExternalName" {
            continue;
        }
        let Some(sp) = s.spec.as_mut() else { continue };
        if let Some(ip) = given_cluster_ip_spec(sp) {
            // As the API server normalizes a Service: `clusterIP` from
            // `clusterIPs[0]` and `clusterIPs` from `clusterIP`,
            // whichever was left out (`None` for a headless one too).
            if sp.cluster_ip.as_deref().is_none_or(str::is_empty) {
                sp.cluster_ip = Some(ip.clone());
            }
            if sp.cluster_ips.as_ref().is_none_or(Vec::is_empty) {
                sp.cluster_ips = Some(vec![ip]);
            }
        }
        let old = selves.get(&k).and_then(|o| o.spec.as_ref());
        let wrong = families::fill(sp, old, ranges.is_dual_stack());
        problems.extend(
            wrong
                .into_iter()
                .map(|(field, why)| format!("Service {k}: {field}: {why}")),
        );
    }
    if !problems.is_empty() {
        return refuse(problems, taken);
    }
    // What the incoming Services give themselves, checked against the
    // others and each other.
    for s in &out {
        let k = key(s);
        let given = s.spec.as_ref().map(cluster_ip_list).unwrap_or_default();
        for (i, ip) in given.iter().enumerate() {
            let Ok(ip) = ip.parse::<IpAddr>() else {
                continue;
            };
            let field = if i == 0 {
                "spec.clusterIP".to_string()
            } else {
                format!("spec.clusterIPs[{i}]")
            };
            if let Some(why) = unusable(ranges, ip) {
                problems.push(format!("Service {k}: {field}: {why}"));
            }
            if let Some(other) = held.insert_ip(ip, &k) {
                taken = true;
                problems.push(format!(
                    "Service {k}: {field}: {ip} is already allocated{other}"
                ));
            }
        }
        let mut own_ports: BTreeSet<u16> = BTreeSet::new();
        for (i, p) in s
            .spec
            .iter()
            .flat_map(|sp| sp.ports.iter().flatten())
            .enumerate()
        {
            let Some(np) = p.node_port.filter(|n| *n != 0) else {
                continue;
            };
            let in_range = u16::try_from(np)
                .ok()
                .filter(|n| ranges.node_ports.contains(n));
            let Some(np) = in_range else {
                problems.push(format!(
                    "Service {k}: spec.ports[{i}].nodePort: {np} is not in the NodePort range {}",
                    ranges.node_port_text()
                ));
                continue;
            };
            // One Service may use a port number for TCP and UDP alike.
            if !own_ports.insert(np) {
                continue;
            }
            if let Some(other) = held.node_ports.insert(np, &k) {
                taken = true;
                problems.push(format!(
                    "Service {k}: spec.ports[{i}].nodePort: {np} is already allocated{other}"
                ));
            }
        }
        if let Some(np) = health_port(s) {
            match u16::try_from(np)
                .ok()
                .filter(|n| ranges.node_ports.contains(n))
            {
                None => problems.push(format!(
                    "Service {k}: spec.healthCheckNodePort: {np} is not in the NodePort range {}",
                    ranges.node_port_text()
                )),
                Some(n) => {
                    if let Some(other) = held.node_ports.insert(n, &k) {
                        taken = true;
                        problems.push(format!(
                            "Service {k}: spec.healthCheckNodePort: {np} is already allocated{}",
                            if other.is(&k) {
                                " to one of its ports".to_string()
                            } else {
                                other.to_string()
                            }
                        ));
                    }
                }
            }
        }
    }
    if !problems.is_empty() {
        return refuse(problems, taken);
    }
    // Fill in what is missing, lowest free first.
    for s in &mut out {
        let k = key(s);
        let t = type_of(s).to_string();
        let node_ports = wants_node_ports(s);
        let health = wants_health_port(s) && health_port(s).is_none();
        let Some(sp) = s.spec.as_mut() else { continue };
        if t != "ExternalName" && sp.cluster_ip.as_deref() != Some("None") {
            // One ClusterIP per family, in the families' order: those
            // given are kept, the others taken from their family's range.
            let families = sp.ip_families.clone().unwrap_or_default();
            let mut ips = sp.cluster_ips.clone().unwrap_or_default();
            for fam in families.iter().skip(ips.len()) {
                let next = if fam == "IPv6" {
                    held.cluster_ips6
                        .as_mut()
                        .and_then(|c| c.take(&k))
                        .map(|a| a.to_string())
                } else {
                    held.cluster_ips.take(&k).map(|a| a.to_string())
                };
                match next {
                    Some(ip) => ips.push(ip),
                    None => {
                        taken = true;
                        let range = match (fam.as_str(), &ranges.service6) {
                            ("IPv6", Some(net)) => net.to_string(),
                            _ => ranges.service.to_string(),
                        };
                        problems.push(format!(
                            "Service {k}: no free ClusterIP left in the service range {range}"
                        ));
                        break;
                    }
                }
            }
            sp.cluster_ip = ips.first().cloned();
            sp.cluster_ips = (!ips.is_empty()).then_some(ips);
        }
        if node_ports {
            for p in sp.ports.iter_mut().flatten() {
                if p.node_port.unwrap_or(0) != 0 {
                    continue;
                }
                match held.node_ports.take(&k) {
                    Some(n) => p.node_port = Some(i32::from(n)),
                    None => {
                        taken = true;
                        problems.push(format!(
                            "Service {k}: no free NodePort left in {}",
                            ranges.node_port_text()
                        ));
                    }
                }
            }
        }
        if health {
            match held.node_ports.take(&k) {
                Some(n) => sp.health_check_node_port = Some(i32::from(n)),
                None => {
                    taken = true;
                    problems.push(format!(
                        "Service {k}: no free NodePort left in {} for the healthCheckNodePort",
                        ranges.node_port_text()
                    ));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        refuse(problems, taken)
    }
}

/// Why `ip`, given, cannot be a ClusterIP of its family's service range
/// (`None`: it can, or it lies outside the range, where the lab keeps it
/// unrecorded).
fn unusable(ranges: &Ranges, ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(ip) => {
            let net = ranges.service;
            (net.contains(&ip) && (ip == net.network() || ip == net.broadcast()))
                .then(|| format!("{ip} is the service range's network or broadcast address"))
        }
        IpAddr::V6(ip) => {
            let net = ranges.service6?;
            if !net.contains(&ip) {
                return None;
            }
            // As the API server's bitmap: only the first 65536 addresses,
            // never the network's.
            let offset = u128::from(ip) - u128::from(net.network());
            let (len, usable) = held::ipv6_offsets(&net);
            let inside = offset < u128::from(len) && usable.contains(&(offset as u64));
            (!inside).then(|| {
                format!(
                    "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {net}"
                )
            })
        }
    }
}

#[cfg(test)]
mod dual_tests;
#[cfg(test)]
mod tests;
