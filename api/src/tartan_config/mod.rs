//! The ConfigMap `tartan-system/tartan-config`: the install's settings,
//! read at first start. Its keys (docs/install.md has the table):
//!
//! | key | default | what |
//! |---|---|---|
//! | `ipv4-pool-cidr` | `10.244.0.0/16` | the default IPv4 IPPool's network; empty: none |
//! | `ipv6-pool-cidr` | empty (none) | the default IPv6 IPPool's network (dual-stack clusters) |
//! | `encapsulation` | `VXLANCrossSubnet` | of the default IPv4 pool: `None`, `VXLAN`, `VXLANCrossSubnet`, `IPIP`, `IPIPCrossSubnet` |
//! | `nat-outgoing` | `true` | the default pools' `natOutgoing` |
//! | `mtu` | `auto` | the pods' MTU: a number, or `auto` (or empty): the underlay's less the encapsulation's overhead |
//! | `services` | `on` | felix's Service proxy (`off` beside kube-proxy) |
//!
//! [`TartanConfig::parse`] checks every key as the API server would check
//! the IPPools made from it, so a config that parses makes valid pools.
//! Pure: tartan-controllers reads the ConfigMap (and creates the pools,
//! [`TartanConfig::default_pools`]), the CNI installer reads it as files
//! (and renders the conflist with [`TartanConfig::pod_mtu`]).

mod pools;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use ipnet::IpNet;

use crate::mtu::{self, Encapsulation, Family, MtuError};
use crate::resources::common::{Problem, parse_network};
use crate::resources::ippool::EncapMode;

pub use pools::{DEFAULT_IPV4_POOL, DEFAULT_IPV6_POOL};

/// The ConfigMap's name, in Tartan's namespace (`tartan-system`).
pub const CONFIG_MAP: &str = "tartan-config";

pub const IPV4_POOL_CIDR: &str = "ipv4-pool-cidr";
pub const IPV6_POOL_CIDR: &str = "ipv6-pool-cidr";
pub const ENCAPSULATION: &str = "encapsulation";
pub const NAT_OUTGOING: &str = "nat-outgoing";
pub const MTU: &str = "mtu";
pub const SERVICES: &str = "services";
/// Every key the ConfigMap may hold; any other is an error (a misspelt
/// key would otherwise be a setting silently not in force).
pub const KEYS: [&str; 6] = [
    IPV4_POOL_CIDR,
    IPV6_POOL_CIDR,
    ENCAPSULATION,
    NAT_OUTGOING,
    MTU,
    SERVICES,
];

pub const DEFAULT_IPV4_POOL_CIDR: &str = "10.244.0.0/16";

/// The default IPv4 pool's encapsulation, in the names the Calico
/// operator uses; each sets the IPPool's `vxlanMode` or `ipipMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolEncapsulation {
    None,
    Vxlan,
    #[default]
    VxlanCrossSubnet,
    Ipip,
    IpipCrossSubnet,
}

const ENCAPSULATIONS: [(&str, PoolEncapsulation); 5] = [
    ("None", PoolEncapsulation::None),
    ("VXLAN", PoolEncapsulation::Vxlan),
    ("VXLANCrossSubnet", PoolEncapsulation::VxlanCrossSubnet),
    ("IPIP", PoolEncapsulation::Ipip),
    ("IPIPCrossSubnet", PoolEncapsulation::IpipCrossSubnet),
];

impl FromStr for PoolEncapsulation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ENCAPSULATIONS
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, e)| *e)
            .ok_or_else(|| {
                let names: Vec<&str> = ENCAPSULATIONS.iter().map(|(n, _)| *n).collect();
                format!(
                    "{s:?} is not an encapsulation; allowed {}",
                    names.join(", ")
                )
            })
    }
}

impl fmt::Display for PoolEncapsulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ENCAPSULATIONS
            .iter()
            .find(|(_, e)| e == self)
            .map_or("None", |(n, _)| n);
        f.write_str(name)
    }
}

impl PoolEncapsulation {
    /// The IPPool's (`ipipMode`, `vxlanMode`).
    pub fn modes(self) -> (EncapMode, EncapMode) {
        use EncapMode::{Always, CrossSubnet, Never};
        match self {
            PoolEncapsulation::None => (Never, Never),
            PoolEncapsulation::Vxlan => (Never, Always),
            PoolEncapsulation::VxlanCrossSubnet => (Never, CrossSubnet),
            PoolEncapsulation::Ipip => (Always, Never),
            PoolEncapsulation::IpipCrossSubnet => (CrossSubnet, Never),
        }
    }

    /// The tunnel packets may cross (with `CrossSubnet`, some do).
    pub fn tunnel(self) -> Encapsulation {
        match self {
            PoolEncapsulation::None => Encapsulation::None,
            PoolEncapsulation::Vxlan | PoolEncapsulation::VxlanCrossSubnet => Encapsulation::Vxlan,
            PoolEncapsulation::Ipip | PoolEncapsulation::IpipCrossSubnet => Encapsulation::Ipip,
        }
    }
}

/// The pods' MTU as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mtu {
    /// From the underlay: its MTU less the encapsulation's overhead.
    Auto,
    Fixed(u32),
}

/// The interface that carries the node's traffic: its MTU and the family
/// of the route found to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Underlay {
    pub mtu: u32,
    pub family: Family,
}

/// The settings of a ConfigMap that checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TartanConfig {
    pub ipv4_pool: Option<IpNet>,
    pub ipv6_pool: Option<IpNet>,
    pub encapsulation: PoolEncapsulation,
    pub nat_outgoing: bool,
    pub mtu: Mtu,
    pub services: bool,
}

impl Default for TartanConfig {
    /// What an empty (or absent) ConfigMap means.
    fn default() -> Self {
        TartanConfig::parse(&BTreeMap::new()).expect("the defaults are valid")
    }
}

/// Every problem with the ConfigMap, by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConfigMap tartan-system/{CONFIG_MAP}:")?;
        for (i, (key, why)) in self.problems.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            write!(f, "{sep}{key}: {why}")?;
        }
        Ok(())
    }
}

fn network(key: &str, v: &str, want: Family) -> Result<Option<IpNet>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    let net = parse_network(v)?;
    match (net, want) {
        (IpNet::V4(_), Family::Ipv4) | (IpNet::V6(_), Family::Ipv6) => Ok(Some(net)),
        _ => Err(format!(
            "{v:?} is not an {} network ({key} holds that family only)",
            if want == Family::Ipv4 { "IPv4" } else { "IPv6" }
        )),
    }
}

/// The value of `r`, or its error recorded against `key`.
fn take<T>(problems: &mut Vec<Problem>, key: &str, r: Result<T, String>) -> Option<T> {
    r.map_err(|e| problems.push((key.to_string(), e))).ok()
}

fn boolean(v: &str) -> Result<bool, String> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{v:?} is not true or false")),
    }
}

fn mtu_value(v: &str) -> Result<Mtu, String> {
    if v.is_empty() || v == "auto" {
        return Ok(Mtu::Auto);
    }
    match v.parse::<u32>() {
        Ok(m) if (mtu::MIN_MTU..=mtu::MAX_MTU).contains(&m) => Ok(Mtu::Fixed(m)),
        _ => Err(format!(
            "{v:?} is not auto or a number from {} to {}",
            mtu::MIN_MTU,
            mtu::MAX_MTU
        )),
    }
}

fn services(v: &str) -> Result<bool, String> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{v:?} is not on or off")),
    }
}

impl TartanConfig {
    /// The settings of a ConfigMap's `data`, or every problem with it.
    /// Values are trimmed; an absent key takes its default.
    pub fn parse(data: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut problems: Vec<Problem> = Vec::new();
        for k in data.keys().filter(|k| !KEYS.contains(&k.as_str())) {
            problems.push((
                k.clone(),
                format!(
                    "not a key of {CONFIG_MAP}; the keys are {}",
                    KEYS.join(", ")
                ),
            ));
        }
        let get = |k: &str| data.get(k).map(|v| v.trim());
        let p = &mut problems;
        let ipv4 = take(
            p,
            IPV4_POOL_CIDR,
            network(
                IPV4_POOL_CIDR,
                get(IPV4_POOL_CIDR).unwrap_or(DEFAULT_IPV4_POOL_CIDR),
                Family::Ipv4,
            ),
        );
        let ipv6 = take(
            p,
            IPV6_POOL_CIDR,
            network(
                IPV6_POOL_CIDR,
                get(IPV6_POOL_CIDR).unwrap_or(""),
                Family::Ipv6,
            ),
        );
        let encapsulation = take(
            p,
            ENCAPSULATION,
            get(ENCAPSULATION).map_or(Ok(PoolEncapsulation::default()), str::parse),
        );
        let nat_outgoing = take(p, NAT_OUTGOING, get(NAT_OUTGOING).map_or(Ok(true), boolean));
        let mtu = take(p, MTU, get(MTU).map_or(Ok(Mtu::Auto), mtu_value));
        let services = take(p, SERVICES, get(SERVICES).map_or(Ok(true), services));
        let (
            Some(ipv4_pool),
            Some(ipv6_pool),
            Some(encapsulation),
            Some(nat_outgoing),
            Some(mtu),
            Some(services),
        ) = (ipv4, ipv6, encapsulation, nat_outgoing, mtu, services)
        else {
            return Err(ConfigError { problems });
        };
        let c = TartanConfig {
            ipv4_pool,
            ipv6_pool,
            encapsulation,
            nat_outgoing,
            mtu,
            services,
        };
        problems.extend(c.pool_problems());
        if let (Mtu::Fixed(m), Some(_)) = (c.mtu, c.ipv6_pool)
            && m < mtu::MIN_IPV6_MTU
        {
            problems.push((
                MTU.to_string(),
                format!(
                    "{m} is below {}, the least a link carrying IPv6 may have, and {IPV6_POOL_CIDR} is set",
                    mtu::MIN_IPV6_MTU
                ),
            ));
        }
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(ConfigError { problems })
        }
    }

    /// The pods' MTU for the CNI configuration: the `mtu` key when a
    /// number; for `auto`, the underlay's MTU less the overhead of the
    /// default IPv4 pool's encapsulation. `None` (the kernel's default)
    /// only for `auto` without encapsulation when no underlay was found;
    /// with encapsulation and no underlay it is an error, as the kernel's
    /// 1500 would not fit in a 1500-byte underlay.
    pub fn pod_mtu(&self, underlay: Option<Underlay>) -> Result<Option<u32>, String> {
        let m = match (self.mtu, underlay) {
            (Mtu::Fixed(m), _) => return Ok(Some(m)),
            (Mtu::Auto, None) if self.tunnel() == Encapsulation::None => return Ok(None),
            (Mtu::Auto, None) => {
                return Err(format!(
                    "mtu is auto and the default pool encapsulates ({}), but no interface carrying the node's default route was found; set mtu in {CONFIG_MAP}",
                    self.encapsulation
                ));
            }
            (Mtu::Auto, Some(u)) => mtu::encapsulated_mtu(u.mtu, self.tunnel(), u.family)
                .map_err(|e: MtuError| format!("mtu auto: {e}"))?,
        };
        if self.ipv6_pool.is_some() && m < mtu::MIN_IPV6_MTU {
            return Err(format!(
                "mtu auto gives {m}, below {}, the least a link carrying IPv6 may have; set mtu in {CONFIG_MAP}",
                mtu::MIN_IPV6_MTU
            ));
        }
        Ok(Some(m))
    }

    /// The encapsulation pods' packets may travel in: the IPv4 pool's (the
    /// IPv6 pool is routed natively).
    fn tunnel(&self) -> Encapsulation {
        match self.ipv4_pool {
            Some(_) => self.encapsulation.tunnel(),
            None => Encapsulation::None,
        }
    }
}
