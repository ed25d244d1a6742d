//! What the Services hold of the two ranges (ClusterIPs, NodePorts):
//! read from the stored bitmaps, or gathered from a
//! listing of Services with each holder named.

use std::net::Ipv4Addr;
use std::ops::Range;

use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::Service;

use super::Ranges;
use super::bitmap::Bitmap;
use super::claims::Claims;
use super::fields::{given_cluster_ip, health_port, key};

/// What Services hold, per range.
#[derive(Clone, Debug)]
pub struct Held {
    pub cluster_ips: Claims<Ipv4Addr>,
    pub node_ports: Claims<u16>,
}

/// The number of addresses of `net`, and the offsets of its hosts (the
/// first skipped when `skip_first`, as the API server keeps the service
/// range's first host for the `kubernetes` Service).
fn host_offsets(net: &Ipv4Net, skip_first: bool) -> (u64, Range<u64>) {
    let len = 1u64 << (32 - u32::from(net.prefix_len()));
    let hosts = if len <= 2 { 0..len } else { 1..len - 1 };
    let start = (hosts.start + u64::from(skip_first)).min(hosts.end);
    (len, start..hosts.end)
}

impl Held {
    /// Nothing held.
    pub fn empty(r: &Ranges) -> Held {
        let [a, b] = Held::lengths(r);
        Held::from_bits(r, [Bitmap::new(a), Bitmap::new(b)])
    }

    /// The number of members of each range: service, NodePorts.
    pub fn lengths(r: &Ranges) -> [u64; 2] {
        [
            host_offsets(&r.service, true).0,
            u64::from(r.node_ports.end().saturating_sub(*r.node_ports.start())) + 1,
        ]
    }

    /// As stored (bitmaps of [`Held::lengths`]).
    pub fn from_bits(r: &Ranges, [ips, ports]: [Bitmap; 2]) -> Held {
        let ports_len = ports.len();
        Held {
            cluster_ips: Claims::with_bits(
                r.service.network(),
                ips,
                host_offsets(&r.service, true).1,
            ),
            node_ports: Claims::with_bits(*r.node_ports.start(), ports, 0..ports_len),
        }
    }

    /// The bitmaps: service, NodePorts.
    pub fn bits(&self) -> [&Bitmap; 2] {
        [self.cluster_ips.bits(), self.node_ports.bits()]
    }

    /// What `s` holds, held by it.
    pub fn add(&mut self, s: &Service) {
        let k = key(s);
        if let Some(ip) = cluster_ips(s) {
            self.cluster_ips.insert(ip, &k);
        }
        for np in node_ports(s) {
            self.node_ports.insert(np, &k);
        }
    }

    /// What `s` holds, free again.
    pub fn remove(&mut self, s: &Service) {
        if let Some(ip) = cluster_ips(s) {
            self.cluster_ips.remove(ip);
        }
        for np in node_ports(s) {
            self.node_ports.remove(np);
        }
    }
}

fn cluster_ips(s: &Service) -> Option<Ipv4Addr> {
    given_cluster_ip(s).and_then(|ip| ip.parse().ok())
}

fn node_ports(s: &Service) -> Vec<u16> {
    let ports = s.spec.iter().flat_map(|sp| sp.ports.iter().flatten());
    ports
        .filter_map(|p| p.node_port)
        .chain(health_port(s))
        .filter_map(|n| u16::try_from(n).ok())
        .collect()
}
