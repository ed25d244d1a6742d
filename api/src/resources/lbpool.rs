//! LoadBalancerIPPool: addresses that tartan-controllers gives to Services
//! of type LoadBalancer (`status.loadBalancer.ingress`), which bgpd then
//! announces (BGPConfiguration `serviceLoadBalancerIPs`).

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, all_selector, check_selector, parse_network_or_address};
use super::schema_rules;

/// A pool of LoadBalancer addresses, as MetalLB's IPAddressPool: the
/// networks to give from, whether Services get an address without asking
/// for this pool, and which Services may have one.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "LoadBalancerIPPool",
    plural = "loadbalancerippools",
    root = "LoadBalancerIpPool",
    derive = "PartialEq",
    shortname = "lbpool",
    doc = "Addresses that tartan-controllers gives to LoadBalancer Services."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancerIpPoolSpec {
    /// The networks (`198.51.100.0/28`) or single addresses
    /// (`198.51.100.7`) to give from; at least one. A network's every
    /// address is given, its first and last too.
    #[serde(rename = "cidrs")]
    #[schemars(length(min = 1), transform = schema_rules::network_or_address_list)]
    pub cidrs: Vec<String>,
    /// Whether a Service that names no pool (annotation
    /// `tartan.dev/loadbalancer-ip-pool`) and no address
    /// (`spec.loadBalancerIP`) may be given an address from this pool.
    /// Default true.
    #[serde(default = "yes")]
    pub auto_assign: bool,
    /// The Services (by their labels) that may have an address from this
    /// pool. Default `all()`.
    #[serde(default = "all_selector")]
    #[schemars(transform = schema_rules::selector)]
    pub service_selector: String,
}

fn yes() -> bool {
    true
}

impl LoadBalancerIpPoolSpec {
    /// A pool of `cidrs` with every other field at its default.
    pub fn new(cidrs: &[&str]) -> Self {
        LoadBalancerIpPoolSpec {
            cidrs: cidrs.iter().map(|s| s.to_string()).collect(),
            auto_assign: true,
            service_selector: all_selector(),
        }
    }

    /// The pool's networks; a single address is a /32 or /128.
    pub fn networks(&self) -> Vec<IpNet> {
        self.cidrs
            .iter()
            .filter_map(|s| parse_network_or_address(s).ok())
            .collect()
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.cidrs.is_empty() {
            p.add("spec.cidrs", "is empty; list at least one CIDR or address");
        }
        for (i, s) in self.cidrs.iter().enumerate() {
            p.take(&format!("spec.cidrs[{i}]"), parse_network_or_address(s));
        }
        check_selector("spec.serviceSelector", &self.service_selector, &mut p);
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_in() {
        let s: LoadBalancerIpPoolSpec =
            serde_json::from_str(r#"{"cidrs": ["198.51.100.0/28"]}"#).unwrap();
        assert_eq!(s, LoadBalancerIpPoolSpec::new(&["198.51.100.0/28"]));
        assert!(s.auto_assign);
        assert_eq!(s.service_selector, "all()");
        assert!(s.check().is_empty());
        assert_eq!(
            s.networks(),
            vec!["198.51.100.0/28".parse::<IpNet>().unwrap()]
        );
    }

    #[test]
    fn problems_name_their_field() {
        let mut s = LoadBalancerIpPoolSpec::new(&["198.51.100.0/28", "198.51.100.300"]);
        s.service_selector = "app ==".into();
        let p = s.check();
        let fields: Vec<&str> = p.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["spec.cidrs[1]", "spec.serviceSelector"], "{p:?}");
        assert_eq!(LoadBalancerIpPoolSpec::new(&[]).check()[0].0, "spec.cidrs");
    }
}
