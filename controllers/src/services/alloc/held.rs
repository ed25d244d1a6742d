//! What the Services hold of the ranges (ClusterIPs, NodePorts, and on a
//! dual-stack cluster the IPv6 ClusterIPs): read from the stored bitmaps,
//! or gathered from a listing of Services with each holder named.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;

use ipnet::{Ipv4Net, Ipv6Net};
use k8s_openapi::api::core::v1::Service;

use super::Ranges;
use super::bitmap::Bitmap;
use super::claims::Claims;
use super::fields::{cluster_ip_list, health_port, key};

/// The most members of an IPv6 service range's bitmap: as the API
/// server, only the range's first 65536 addresses are handed out (its
/// first, the network's, never), whatever the prefix.
pub const IPV6_MEMBERS: u64 = 1 << 16;

/// What Services hold, per range.
#[derive(Clone, Debug)]
pub struct Held {
    pub cluster_ips: Claims<Ipv4Addr>,
    pub node_ports: Claims<u16>,
    /// The IPv6 service range's, on a dual-stack cluster.
    pub cluster_ips6: Option<Claims<Ipv6Addr>>,
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

/// The bitmap's length over an IPv6 range (at most [`IPV6_MEMBERS`]),
/// and the offsets handed out: all but the network's (IPv6 has no
/// broadcast address).
pub fn ipv6_offsets(net: &Ipv6Net) -> (u64, Range<u64>) {
    let bits = 128 - u32::from(net.prefix_len());
    let len = if bits >= 16 {
        IPV6_MEMBERS
    } else {
        1u64 << bits
    };
    (len, u64::from(len > 1).min(len)..len)
}

impl Held {
    /// Nothing held.
    pub fn empty(r: &Ranges) -> Held {
        let bits = Held::lengths(r).into_iter().map(Bitmap::new).collect();
        Held::from_bits(r, bits)
    }

    /// The number of members of each range: service, NodePorts, and the
    /// IPv6 service range when there is one.
    pub fn lengths(r: &Ranges) -> Vec<u64> {
        let mut l = vec![
            host_offsets(&r.service, true).0,
            u64::from(r.node_ports.end().saturating_sub(*r.node_ports.start())) + 1,
        ];
        if let Some(v6) = &r.service6 {
            l.push(ipv6_offsets(v6).0);
        }
        l
    }

    /// As stored (bitmaps of [`Held::lengths`]).
    pub fn from_bits(r: &Ranges, bits: Vec<Bitmap>) -> Held {
        let mut bits = bits.into_iter();
        let ips = bits.next().unwrap_or_else(|| Bitmap::new(0));
        let ports = bits.next().unwrap_or_else(|| Bitmap::new(0));
        let ports_len = ports.len();
        let cluster_ips6 = r.service6.map(|net| {
            let bits = bits
                .next()
                .unwrap_or_else(|| Bitmap::new(ipv6_offsets(&net).0));
            Claims::with_bits(net.network(), bits, ipv6_offsets(&net).1)
        });
        Held {
            cluster_ips: Claims::with_bits(
                r.service.network(),
                ips,
                host_offsets(&r.service, true).1,
            ),
            node_ports: Claims::with_bits(*r.node_ports.start(), ports, 0..ports_len),
            cluster_ips6,
        }
    }

    /// The bitmaps, in the order of [`Held::lengths`].
    pub fn bits(&self) -> Vec<&Bitmap> {
        let mut b = vec![self.cluster_ips.bits(), self.node_ports.bits()];
        b.extend(self.cluster_ips6.as_ref().map(Claims::bits));
        b
    }

    /// `ip` held by `key`; who held it before (then nothing changes).
    /// An IPv6 address on a cluster without an IPv6 range is not
    /// tracked.
    pub fn insert_ip(&mut self, ip: IpAddr, key: &str) -> Option<super::claims::Holder> {
        match ip {
            IpAddr::V4(a) => self.cluster_ips.insert(a, key),
            IpAddr::V6(a) => self.cluster_ips6.as_mut()?.insert(a, key),
        }
    }

    /// What `s` holds, held by it.
    pub fn add(&mut self, s: &Service) {
        let k = key(s);
        for ip in cluster_ips(s) {
            self.insert_ip(ip, &k);
        }
        for np in node_ports(s) {
            self.node_ports.insert(np, &k);
        }
    }

    /// What `s` holds, free again.
    pub fn remove(&mut self, s: &Service) {
        for ip in cluster_ips(s) {
            match ip {
                IpAddr::V4(a) => self.cluster_ips.remove(a),
                IpAddr::V6(a) => {
                    if let Some(c) = self.cluster_ips6.as_mut() {
                        c.remove(a);
                    }
                }
            }
        }
        for np in node_ports(s) {
            self.node_ports.remove(np);
        }
    }
}

fn cluster_ips(s: &Service) -> Vec<IpAddr> {
    s.spec
        .as_ref()
        .map(cluster_ip_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

fn node_ports(s: &Service) -> Vec<u16> {
    let ports = s.spec.iter().flat_map(|sp| sp.ports.iter().flatten());
    ports
        .filter_map(|p| p.node_port)
        .chain(health_port(s))
        .filter_map(|n| u16::try_from(n).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_range_is_a_bitmap_of_at_most_65536_addresses() {
        let small: Ipv6Net = "fd00:10:96::/120".parse().unwrap();
        assert_eq!(ipv6_offsets(&small), (256, 1..256));
        let lab: Ipv6Net = "fd00:10:96::/112".parse().unwrap();
        assert_eq!(ipv6_offsets(&lab), (65536, 1..65536));
        let big: Ipv6Net = "fd00:10:96::/64".parse().unwrap();
        assert_eq!(ipv6_offsets(&big), (65536, 1..65536));
        let r = Ranges::dual_stack("10.96.0.0/16".parse().unwrap(), lab);
        assert_eq!(Held::lengths(&r), vec![65536, 2768, 65536]);
        assert_eq!(Held::lengths(&Ranges::new(r.service)).len(), 2);
    }
}
