//! Single-hop (RFC 5881) or multihop (RFC 5883) BFD: which one a BGP
//! neighbor gets, and the TTL (hop limit) each accepts.

use std::net::IpAddr;

use super::socket::GTSM_TTL;

/// How far away a session's peer is, and so which port, socket and TTL
/// rule its packets use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hops {
    /// RFC 5881: port 3784, TTL 255 sent and required (the peer is on a
    /// directly connected network).
    Single,
    /// RFC 5883: port 4784, TTL 255 sent, and a received TTL of at least
    /// `min_ttl` (1: any, the rule for every BGP neighbor).
    Multi { min_ttl: u8 },
}

impl Hops {
    /// The mode of a BGP neighbor's session, as FRR's bgpd decides it
    /// (PEER_IS_MULTIHOP): multihop for eBGP allowed more than one hop
    /// (`ttl`, its multihop TTL or GTSM hop count, above 1), and for any
    /// neighbor whose address is on none of the node's connected networks
    /// (iBGP to a route reflector behind a router, say); single hop
    /// otherwise.
    ///
    /// RFC 5883 leaves the TTL of multihop packets unchecked and does not
    /// say with which TTL they are sent (BIRD sends them with the system's
    /// default, 64, whatever its BGP's GTSM setting; FRR with 255), so a
    /// multihop session takes any TTL. GTSM (RFC 5082, `ttlSecurity`)
    /// governs the BGP connection only.
    pub fn for_neighbor(ibgp: bool, ttl: u8, connected: bool) -> Hops {
        if (!ibgp && ttl > 1) || !connected {
            Hops::Multi { min_ttl: 1 }
        } else {
            Hops::Single
        }
    }

    pub fn is_multihop(self) -> bool {
        matches!(self, Hops::Multi { .. })
    }

    /// "single-hop" or "multihop", for logs and docs.
    pub fn name(self) -> &'static str {
        match self {
            Hops::Single => "single-hop",
            Hops::Multi { .. } => "multihop",
        }
    }

    /// Whether a packet that arrived with `ttl` (None: the kernel did not
    /// say) may be for this session: exactly 255 for single hop (RFC 5881
    /// section 5), at least `min_ttl` for multihop.
    pub fn accepts_ttl(self, ttl: Option<u8>) -> bool {
        match self {
            Hops::Single => ttl == Some(GTSM_TTL),
            Hops::Multi { min_ttl } => min_ttl <= 1 || ttl.is_some_and(|t| t >= min_ttl),
        }
    }
}

/// Whether `peer` is on a network directly connected to this node: inside
/// the prefix of an address of an interface that is up, or the far end of
/// a point-to-point link. Read from the node's interface addresses when the
/// session is made (what FRR's "shared network" test looks at too); an
/// unreadable list counts as not connected, which gives multihop, the mode
/// that works over one hop as well when the peer agrees.
pub fn is_connected(peer: IpAddr) -> bool {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return false;
    };
    let peer = peer.to_canonical();
    addrs
        .filter(|a| a.flags.contains(nix::net::if_::InterfaceFlags::IFF_UP))
        .any(|a| {
            let ip = |s: Option<&nix::sys::socket::SockaddrStorage>| -> Option<IpAddr> {
                let s = s?;
                if let Some(v4) = s.as_sockaddr_in() {
                    Some(IpAddr::V4(v4.ip()))
                } else {
                    s.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
                }
            };
            let local = ip(a.address.as_ref());
            let mask = ip(a.netmask.as_ref());
            let far_end = a
                .flags
                .contains(nix::net::if_::InterfaceFlags::IFF_POINTOPOINT)
                .then(|| ip(a.destination.as_ref()))
                .flatten();
            far_end == Some(peer)
                || matches!((local, mask), (Some(l), Some(m)) if same_network(peer, l, m))
        })
}

/// Whether `peer` and `local` share the network of `mask`, and are not the
/// same address.
fn same_network(peer: IpAddr, local: IpAddr, mask: IpAddr) -> bool {
    match (peer, local, mask) {
        (IpAddr::V4(p), IpAddr::V4(l), IpAddr::V4(m)) => {
            let m = u32::from(m);
            p != l && u32::from(p) & m == u32::from(l) & m
        }
        (IpAddr::V6(p), IpAddr::V6(l), IpAddr::V6(m)) => {
            let m = u128::from(m);
            p != l && u128::from(p) & m == u128::from(l) & m
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ebgp_with_a_multihop_ttl_is_multihop_even_on_a_shared_network() {
        assert_eq!(
            Hops::for_neighbor(false, 2, true),
            Hops::Multi { min_ttl: 1 }
        );
        assert_eq!(
            Hops::for_neighbor(false, 10, false),
            Hops::Multi { min_ttl: 1 }
        );
    }

    #[test]
    fn no_multihop_session_sets_a_minimum_ttl() {
        // A peer that sends with its default TTL (BIRD: 64) is heard two
        // hops away.
        let hops = Hops::for_neighbor(false, 2, true);
        assert_eq!(hops, Hops::Multi { min_ttl: 1 });
        assert!(hops.accepts_ttl(Some(63)));
    }

    #[test]
    fn a_peer_on_a_connected_network_without_multihop_is_single_hop() {
        assert_eq!(Hops::for_neighbor(false, 1, true), Hops::Single);
        // iBGP's TTL is 255 by default: only the network decides.
        assert_eq!(Hops::for_neighbor(true, 255, true), Hops::Single);
        assert_eq!(Hops::for_neighbor(true, 2, true), Hops::Single);
    }

    #[test]
    fn a_peer_on_no_connected_network_is_multihop() {
        assert_eq!(
            Hops::for_neighbor(true, 255, false),
            Hops::Multi { min_ttl: 1 }
        );
        // eBGP TTL 1 to a router's loopback: multihop too.
        assert_eq!(
            Hops::for_neighbor(false, 1, false),
            Hops::Multi { min_ttl: 1 }
        );
    }

    #[test]
    fn single_hop_takes_ttl_255_only() {
        assert!(Hops::Single.accepts_ttl(Some(255)));
        assert!(!Hops::Single.accepts_ttl(Some(254)));
        assert!(!Hops::Single.accepts_ttl(None));
    }

    #[test]
    fn multihop_takes_at_least_its_minimum_ttl() {
        let two = Hops::Multi { min_ttl: 254 };
        assert!(two.accepts_ttl(Some(255)) && two.accepts_ttl(Some(254)));
        assert!(!two.accepts_ttl(Some(253)));
        assert!(!two.accepts_ttl(None), "unknown TTL fails a real minimum");
        let any = Hops::Multi { min_ttl: 1 };
        assert!(any.accepts_ttl(Some(1)) && any.accepts_ttl(Some(200)) && any.accepts_ttl(None));
    }

    #[test]
    fn networks_are_compared_under_the_mask() {
        let v4 = |s: &str| -> IpAddr { s.parse().unwrap() };
        let m24 = v4("255.255.255.0");
        assert!(same_network(v4("10.0.1.2"), v4("10.0.1.1"), m24));
        assert!(!same_network(v4("10.0.2.2"), v4("10.0.1.1"), m24));
        assert!(
            !same_network(v4("10.0.1.1"), v4("10.0.1.1"), m24),
            "ourselves"
        );
        let m64: IpAddr = "ffff:ffff:ffff:ffff::".parse().unwrap();
        assert!(same_network(v4("fd00::2"), v4("fd00::1"), m64));
        assert!(!same_network(v4("fd00:0:0:1::2"), v4("fd00::1"), m64));
        assert!(!same_network(v4("10.0.1.2"), v4("fd00::1"), m64));
    }

    #[test]
    fn the_loopback_network_is_connected() {
        // 127.0.0.1/8 is up wherever tests run; which other networks are
        // connected depends on the machine.
        assert!(is_connected("127.0.0.2".parse().unwrap()));
    }
}
