//! The network a session's two ends share, read from the addresses of the
//! local interfaces: what decides whether a next hop may be passed on to
//! an external peer as it is (RFC 4271 5.1.3).

use std::net::IpAddr;

use ipnet::IpNet;
use nix::ifaddrs::getifaddrs;

/// The connected network of `local` (an address of this host), when `peer`
/// is inside it; None when the peer is further away or `local` is not
/// found (then nothing is assumed to be shared).
pub fn shared_subnet(local: IpAddr, peer: IpAddr) -> Option<IpNet> {
    let addrs = match getifaddrs() {
        Ok(a) => a,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list interface addresses; no shared subnet assumed");
            return None;
        }
    };
    addrs
        .filter_map(|ifa| {
            let addr = sockaddr_ip(ifa.address.as_ref()?)?;
            let mask = sockaddr_ip(ifa.netmask.as_ref()?)?;
            (addr == local).then(|| network(addr, mask)).flatten()
        })
        .find(|net| net.prefix_len() < net.max_prefix_len() && net.contains(&peer))
}

fn sockaddr_ip(sa: &nix::sys::socket::SockaddrStorage) -> Option<IpAddr> {
    if let Some(v4) = sa.as_sockaddr_in() {
        return Some(IpAddr::V4(v4.ip()));
    }
    sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
}

/// The network of `addr` under `mask` (a contiguous mask; None otherwise).
fn network(addr: IpAddr, mask: IpAddr) -> Option<IpNet> {
    let len = match mask {
        IpAddr::V4(m) => ipnet::ipv4_mask_to_prefix(m).ok()?,
        IpAddr::V6(m) => ipnet::ipv6_mask_to_prefix(m).ok()?,
    };
    IpNet::new(addr, len).ok().map(|n| n.trunc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_of_an_address_and_mask() {
        let n = network(
            "10.1.2.3".parse().unwrap(),
            "255.255.255.0".parse().unwrap(),
        );
        assert_eq!(n, Some("10.1.2.0/24".parse().unwrap()));
        let n = network(
            "2001:db8::5".parse().unwrap(),
            "ffff:ffff::".parse().unwrap(),
        );
        assert_eq!(n, Some("2001:db8::/32".parse().unwrap()));
        // Not contiguous: not a network.
        assert_eq!(
            network("10.1.2.3".parse().unwrap(), "255.0.255.0".parse().unwrap()),
            None
        );
    }

    #[test]
    fn loopback_is_shared_with_itself_only() {
        // Every host has 127.0.0.1/8 on lo.
        let lo = "127.0.0.1".parse().unwrap();
        assert_eq!(
            shared_subnet(lo, "127.0.0.2".parse().unwrap()),
            Some("127.0.0.0/8".parse().unwrap())
        );
        assert_eq!(shared_subnet(lo, "192.0.2.1".parse().unwrap()), None);
        // An address of no interface here shares nothing.
        assert_eq!(
            shared_subnet("192.0.2.77".parse().unwrap(), "192.0.2.1".parse().unwrap()),
            None
        );
    }
}
