//! The configuration model shared by every peer implementation. Each
//! implementation renders what it supports and documents what it ignores.
use std::net::{IpAddr, Ipv4Addr};

/// One BGP speaker.
#[derive(Debug, Clone)]
pub struct BgpConfig {
    pub router_id: Ipv4Addr,
    pub local_as: u32,
    /// Address to listen on (all addresses when None).
    pub listen: Option<IpAddr>,
    pub neighbors: Vec<Neighbor>,
    /// Routes this speaker originates.
    pub routes: Vec<Route>,
    /// Install learned routes into the namespace's kernel table (BIRD, FRR;
    /// GoBGP never does, ExaBGP has no RIB).
    pub kernel: bool,
    /// Route reflector cluster id (used when some neighbor is an RR client).
    pub cluster_id: Option<Ipv4Addr>,
    /// Raw text appended to the generated configuration, in the daemon's
    /// own syntax, for anything the model does not cover.
    pub extra: String,
}

impl BgpConfig {
    pub fn new(router_id: Ipv4Addr, local_as: u32) -> BgpConfig {
        BgpConfig {
            router_id,
            local_as,
            listen: None,
            neighbors: Vec::new(),
            routes: Vec::new(),
            kernel: true,
            cluster_id: None,
            extra: String::new(),
        }
    }

    pub fn listen(mut self, addr: IpAddr) -> Self {
        self.listen = Some(addr);
        self
    }

    pub fn neighbor(mut self, n: Neighbor) -> Self {
        self.neighbors.push(n);
        self
    }

    pub fn route(mut self, r: Route) -> Self {
        self.routes.push(r);
        self
    }

    pub fn kernel(mut self, on: bool) -> Self {
        self.kernel = on;
        self
    }

    pub fn cluster_id(mut self, id: Ipv4Addr) -> Self {
        self.cluster_id = Some(id);
        self
    }

    pub fn extra(mut self, text: &str) -> Self {
        self.extra.push_str(text);
        self.extra.push('\n');
        self
    }
}

/// One BGP session. By default the session carries the address family of
/// its neighbor address only.
#[derive(Debug, Clone)]
pub struct Neighbor {
    pub address: IpAddr,
    pub remote_as: u32,
    /// Source address of the session (and next hop BIRD/ExaBGP announce).
    pub local_address: Option<IpAddr>,
    pub passive: bool,
    /// TCP MD5 signature password (RFC 2385).
    pub password: Option<String>,
    /// eBGP multihop TTL.
    pub multihop: Option<u8>,
    pub rr_client: bool,
    /// Graceful restart with this restart time in seconds; None turns it off.
    pub graceful_restart: Option<u16>,
    pub next_hop_self: bool,
    pub ipv4: bool,
    pub ipv6: bool,
    /// BFD (RFC 5880/5881) on this session.
    pub bfd: Option<Bfd>,
}

/// BFD timers of a session, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bfd {
    pub min_rx_ms: u32,
    pub min_tx_ms: u32,
    pub multiplier: u8,
}

impl Neighbor {
    pub fn new(address: IpAddr, remote_as: u32) -> Neighbor {
        Neighbor {
            address,
            remote_as,
            local_address: None,
            passive: false,
            password: None,
            multihop: None,
            rr_client: false,
            graceful_restart: None,
            next_hop_self: false,
            ipv4: address.is_ipv4(),
            ipv6: address.is_ipv6(),
            bfd: None,
        }
    }

    pub fn local_address(mut self, a: IpAddr) -> Self {
        self.local_address = Some(a);
        self
    }

    pub fn passive(mut self) -> Self {
        self.passive = true;
        self
    }

    pub fn password(mut self, p: &str) -> Self {
        self.password = Some(p.to_string());
        self
    }

    pub fn multihop(mut self, ttl: u8) -> Self {
        self.multihop = Some(ttl);
        self
    }

    /// BFD with these timers (milliseconds) and detect multiplier.
    pub fn bfd(mut self, min_rx_ms: u32, min_tx_ms: u32, multiplier: u8) -> Self {
        self.bfd = Some(Bfd {
            min_rx_ms,
            min_tx_ms,
            multiplier,
        });
        self
    }

    pub fn rr_client(mut self) -> Self {
        self.rr_client = true;
        self
    }

    pub fn graceful_restart(mut self, restart_time: u16) -> Self {
        self.graceful_restart = Some(restart_time);
        self
    }

    pub fn next_hop_self(mut self) -> Self {
        self.next_hop_self = true;
        self
    }

    /// Sets which families the session carries.
    pub fn families(mut self, ipv4: bool, ipv6: bool) -> Self {
        self.ipv4 = ipv4;
        self.ipv6 = ipv6;
        self
    }
}

/// A route to originate.
#[derive(Debug, Clone)]
pub struct Route {
    /// "192.0.2.0/24" or "2001:db8::/48".
    pub prefix: String,
    /// Standard communities as (asn, value).
    pub communities: Vec<(u16, u16)>,
    /// Large communities (RFC 8092).
    pub large_communities: Vec<(u32, u32, u32)>,
}

impl Route {
    pub fn new(prefix: &str) -> Route {
        Route {
            prefix: prefix.to_string(),
            communities: Vec::new(),
            large_communities: Vec::new(),
        }
    }

    pub fn community(mut self, asn: u16, value: u16) -> Self {
        self.communities.push((asn, value));
        self
    }

    pub fn large_community(mut self, a: u32, b: u32, c: u32) -> Self {
        self.large_communities.push((a, b, c));
        self
    }

    pub fn is_ipv6(&self) -> bool {
        self.prefix.contains(':')
    }
}
