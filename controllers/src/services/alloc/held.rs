//! What the Services already hold (ClusterIPs, NodePorts, LoadBalancer
//! IPs, each with its holder), and the lowest free address or port.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::ops::RangeInclusive;

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Service;

use super::fields::{given_cluster_ip, health_port, ingress_ips, key, type_of};

/// What other Services hold, with who holds it.
#[derive(Default)]
pub(super) struct Held {
    pub(super) cluster_ips: BTreeMap<Ipv4Addr, String>,
    pub(super) node_ports: BTreeMap<u16, String>,
    pub(super) lb_ips: BTreeMap<Ipv4Addr, String>,
}

impl Held {
    pub(super) fn add(&mut self, s: &Service) {
        let k = key(s);
        if let Some(ip) = given_cluster_ip(s).and_then(|ip| ip.parse().ok()) {
            self.cluster_ips.insert(ip, k.clone());
        }
        for p in s.spec.iter().flat_map(|sp| sp.ports.iter().flatten()) {
            if let Some(np) = p.node_port.and_then(|n| u16::try_from(n).ok()) {
                self.node_ports.insert(np, k.clone());
            }
        }
        if let Some(np) = health_port(s).and_then(|n| u16::try_from(n).ok()) {
            self.node_ports.insert(np, k.clone());
        }
        if type_of(s) == "LoadBalancer" {
            for ip in ingress_ips(s).iter().filter_map(|ip| ip.parse().ok()) {
                self.lb_ips.insert(ip, k.clone());
            }
        }
    }

    /// The lowest NodePort of `range` nobody holds, now held by `k`.
    pub(super) fn take_node_port(&mut self, range: &RangeInclusive<u16>, k: &str) -> Option<u16> {
        let n = range.clone().find(|n| !self.node_ports.contains_key(n))?;
        self.node_ports.insert(n, k.to_string());
        Some(n)
    }
}

/// The first host of `net` not in `taken` (skipping the first when
/// `skip_first`).
pub(super) fn lowest_free(
    net: &Ipv4Net,
    skip_first: bool,
    taken: &BTreeMap<Ipv4Addr, String>,
) -> Option<Ipv4Addr> {
    net.hosts()
        .skip(usize::from(skip_first))
        .find(|a| !taken.contains_key(a))
}
