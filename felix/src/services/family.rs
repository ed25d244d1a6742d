//! The address family a service table serves: IPv4 (`ip tartan-svc`) or
//! IPv6 (`ip6 tartan-svc`). A dual-stack Service is served as two
//! single-stack halves, one per family, as kube-proxy runs one proxier
//! per family; the computation and the renderer are the same code for
//! both, parameterised by [`Family`] (the address type) and [`Fam`]
//! (what differs in the nftables they write).

use std::fmt::{Debug, Display};
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use nftables::schema::SetType;
use nftables::stmt::{NATFamily, RejectType};
use nftables::types::NfFamily;

/// What the nftables of one family's table differ in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fam {
    V4,
    V6,
}

impl Fam {
    pub const fn nf(self) -> NfFamily {
        match self {
            Fam::V4 => NfFamily::IP,
            Fam::V6 => NfFamily::IP6,
        }
    }

    /// The table family as nft spells it (`ip`, `ip6`).
    pub const fn nft_name(self) -> &'static str {
        match self {
            Fam::V4 => "ip",
            Fam::V6 => "ip6",
        }
    }

    /// The payload protocol of the addresses (`ip saddr`, `ip6 saddr`).
    pub const fn payload(self) -> &'static str {
        self.nft_name()
    }

    /// NFPROTO_IPV4 / NFPROTO_IPV6, the netlink family of the table.
    pub const fn nfproto(self) -> u8 {
        match self {
            Fam::V4 => 2,
            Fam::V6 => 10,
        }
    }

    /// AF_INET / AF_INET6 (ctnetlink).
    pub const fn af(self) -> u8 {
        self.nfproto()
    }

    pub const fn addr_type(self) -> SetType {
        match self {
            Fam::V4 => SetType::Ipv4Addr,
            Fam::V6 => SetType::Ipv6Addr,
        }
    }

    pub const fn nat(self) -> NATFamily {
        match self {
            Fam::V4 => NATFamily::IP,
            Fam::V6 => NATFamily::IP6,
        }
    }

    /// The ICMP type a refused non-TCP connection is answered with.
    pub const fn icmp(self) -> RejectType {
        match self {
            Fam::V4 => RejectType::ICMP,
            Fam::V6 => RejectType::ICMPv6,
        }
    }

    /// The loopback network, whose destinations are no NodePort's.
    pub const fn loopback(self) -> (&'static str, u32) {
        match self {
            Fam::V4 => ("127.0.0.0", 8),
            Fam::V6 => ("::1", 128),
        }
    }

    /// `IPv4` / `IPv6`, as an EndpointSlice's `addressType` says it.
    pub const fn address_type(self) -> &'static str {
        match self {
            Fam::V4 => "IPv4",
            Fam::V6 => "IPv6",
        }
    }
}

/// An address of one family ([`Ipv4Addr`] or [`Ipv6Addr`]), the key type
/// of that family's half of the proxy.
pub trait Family: Copy + Ord + Eq + Hash + Debug + Display + Send + Sync + 'static {
    /// A network of this family.
    type Net: Copy + Ord + Eq + Hash + Debug + Into<IpNet> + Send + Sync + 'static;
    const FAM: Fam;

    /// The address, when it is of this family.
    fn of(a: IpAddr) -> Option<Self>;
    /// The network (its host bits cleared), when it is of this family.
    fn net_of(n: IpNet) -> Option<Self::Net>;
    /// An address's bytes: `[u8; 4]` or `[u8; 16]`.
    type Octets: AsRef<[u8]> + Copy;
    /// The address in network byte order.
    fn bytes(&self) -> Self::Octets;
    /// The address from network byte order (the first 4 or 16 bytes).
    fn from_bytes(b: &[u8]) -> Option<Self>;
}

impl Family for Ipv4Addr {
    type Net = Ipv4Net;
    type Octets = [u8; 4];
    const FAM: Fam = Fam::V4;

    fn of(a: IpAddr) -> Option<Self> {
        match a {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }

    fn net_of(n: IpNet) -> Option<Ipv4Net> {
        match n {
            IpNet::V4(n) => Some(n.trunc()),
            IpNet::V6(_) => None,
        }
    }

    fn bytes(&self) -> Self::Octets {
        self.octets()
    }

    fn from_bytes(b: &[u8]) -> Option<Self> {
        let a: [u8; 4] = b.get(..4)?.try_into().ok()?;
        Some(Ipv4Addr::from(a))
    }
}

impl Family for Ipv6Addr {
    type Net = Ipv6Net;
    type Octets = [u8; 16];
    const FAM: Fam = Fam::V6;

    fn of(a: IpAddr) -> Option<Self> {
        match a {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(_) => None,
        }
    }

    fn net_of(n: IpNet) -> Option<Ipv6Net> {
        match n {
            IpNet::V6(n) => Some(n.trunc()),
            IpNet::V4(_) => None,
        }
    }

    fn bytes(&self) -> Self::Octets {
        self.octets()
    }

    fn from_bytes(b: &[u8]) -> Option<Self> {
        let a: [u8; 16] = b.get(..16)?.try_into().ok()?;
        Some(Ipv6Addr::from(a))
    }
}

/// The address of `s` when it is one of family `A`.
pub fn parse<A: Family>(s: &str) -> Option<A> {
    A::of(s.trim().parse().ok()?)
}
