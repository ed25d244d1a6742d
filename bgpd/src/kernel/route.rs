//! The kernel's view of a route: a prefix and its next hops.
use ipnet::IpNet;
use std::fmt;
use std::net::IpAddr;

/// One next hop of a kernel route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nexthop {
    pub gateway: IpAddr,
    /// The outgoing interface. Required for IPv6 link-local gateways;
    /// `None` lets the kernel choose the device from its routes.
    pub ifindex: Option<u32>,
}

impl Nexthop {
    pub fn new(gateway: IpAddr) -> Nexthop {
        Nexthop {
            gateway,
            ifindex: None,
        }
    }

    pub fn with_ifindex(gateway: IpAddr, ifindex: u32) -> Nexthop {
        Nexthop {
            gateway,
            ifindex: Some(ifindex),
        }
    }

    /// Whether the gateway only means something on one link (fe80::/10),
    /// so that the kernel needs the interface.
    pub fn is_link_local(&self) -> bool {
        match self.gateway {
            IpAddr::V6(a) => a.is_unicast_link_local(),
            IpAddr::V4(_) => false,
        }
    }
}

impl fmt::Display for Nexthop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ifindex {
            Some(i) => write!(f, "{}%{i}", self.gateway),
            None => write!(f, "{}", self.gateway),
        }
    }
}

/// A route as installed in the main table: the prefix (host bits cleared)
/// and its next hops, sorted and without duplicates so that two routes
/// with the same hops in another order compare equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRoute {
    pub prefix: IpNet,
    pub nexthops: Vec<Nexthop>,
}

impl KernelRoute {
    /// Builds a route in canonical form.
    pub fn new(prefix: IpNet, nexthops: Vec<Nexthop>) -> KernelRoute {
        KernelRoute {
            prefix: prefix.trunc(),
            nexthops: canonical(nexthops),
        }
    }
}

/// Sorts and dedups next hops.
pub(crate) fn canonical(mut nexthops: Vec<Nexthop>) -> Vec<Nexthop> {
    nexthops.sort_unstable();
    nexthops.dedup();
    nexthops
}
