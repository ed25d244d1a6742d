//! The default IPPools a [`TartanConfig`] makes, `default-ipv4` and
//! `default-ipv6`, and their check: each is validated as the API server
//! validates an IPPool, its problems reported against the ConfigMap key
//! that caused them.

use super::{ENCAPSULATION, IPV4_POOL_CIDR, IPV6_POOL_CIDR, TartanConfig};
use crate::resources::common::Problem;
use crate::resources::ippool::EncapMode;
use crate::resources::{IpPool, IpPoolSpec};
use crate::store::typed::to_dynamic;
use crate::validate::validate;

pub const DEFAULT_IPV4_POOL: &str = "default-ipv4";
pub const DEFAULT_IPV6_POOL: &str = "default-ipv6";

impl TartanConfig {
    /// The pools to create when none exists: the IPv4 pool (encapsulated
    /// as `encapsulation` says) and the IPv6 pool (routed natively: felix
    /// does not encapsulate IPv6), each where its CIDR is set, with
    /// `natOutgoing` from `nat-outgoing` and every other field at its
    /// default.
    pub fn default_pools(&self) -> Vec<IpPool> {
        let mut pools = Vec::new();
        if let Some(net) = self.ipv4_pool {
            let mut spec = IpPoolSpec::new(&net.to_string());
            (spec.ipip_mode, spec.vxlan_mode) = self.encapsulation.modes();
            spec.nat_outgoing = self.nat_outgoing;
            pools.push(IpPool::new(DEFAULT_IPV4_POOL, spec));
        }
        if let Some(net) = self.ipv6_pool {
            let mut spec = IpPoolSpec::new(&net.to_string());
            (spec.ipip_mode, spec.vxlan_mode) = (EncapMode::Never, EncapMode::Never);
            spec.nat_outgoing = self.nat_outgoing;
            pools.push(IpPool::new(DEFAULT_IPV6_POOL, spec));
        }
        pools
    }

    /// What the API server would refuse in the default pools, by the key
    /// to change.
    pub(super) fn pool_problems(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        for pool in self.default_pools() {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let key = if name == DEFAULT_IPV4_POOL {
                IPV4_POOL_CIDR
            } else {
                IPV6_POOL_CIDR
            };
            let invalid = match to_dynamic(&pool) {
                Ok(o) => validate(&o).err().map(|i| i.problems),
                Err(e) => Some(vec![(String::new(), e.to_string())]),
            };
            for (field, why) in invalid.into_iter().flatten() {
                let key = if field.ends_with("Mode") {
                    ENCAPSULATION
                } else {
                    key
                };
                problems.push((
                    key.to_string(),
                    format!("the IPPool {name} would be invalid: {field}: {why}"),
                ));
            }
        }
        problems
    }
}
