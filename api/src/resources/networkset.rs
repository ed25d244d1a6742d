//! NetworkSet and GlobalNetworkSet: labelled lists of networks that policy
//! rules pick by selector, as they pick pods.

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, parse_network_or_address};
use super::schema_rules;

/// Networks outside the cluster (or any addresses) that Tartan policy
/// rules match by the set's labels: this namespace's NetworkPolicies,
/// rules whose namespaceSelector selects this namespace, and
/// GlobalNetworkPolicies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "NetworkSet",
    plural = "networksets",
    root = "NetworkSet",
    namespaced,
    derive = "PartialEq",
    shortname = "netset",
    shortname = "netsets",
    doc = "Networks that policy rules select by label, as they select this namespace's pods."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkSetSpec {
    /// The networks (`198.51.100.0/28`) or single addresses
    /// (`203.0.113.7`); may be empty.
    #[serde(default)]
    #[schemars(transform = schema_rules::network_set_nets)]
    pub nets: Vec<String>,
}

/// Networks that GlobalNetworkPolicy rules, and NetworkPolicy rules whose
/// `namespaceSelector` takes in `global()`, match by the set's labels.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "GlobalNetworkSet",
    plural = "globalnetworksets",
    root = "GlobalNetworkSet",
    derive = "PartialEq",
    shortname = "gns",
    doc = "Networks that policy rules of any namespace select by label."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GlobalNetworkSetSpec {
    /// The networks (`198.51.100.0/28`) or single addresses
    /// (`203.0.113.7`); may be empty.
    #[serde(default)]
    #[schemars(transform = schema_rules::network_set_nets)]
    pub nets: Vec<String>,
}

/// The networks of `nets` that parse; a single address is a /32 or /128.
pub fn networks(nets: &[String]) -> Vec<IpNet> {
    nets.iter()
        .filter_map(|s| parse_network_or_address(s).ok())
        .collect()
}

/// Every problem with a set's `nets`; fields are named from `spec`.
pub fn check_nets(nets: &[String]) -> Vec<Problem> {
    let mut p = Problems::default();
    if nets.len() > schema_rules::NETWORK_SET_MAX as usize {
        p.add(
            "spec.nets",
            format!(
                "has {} entries; at most {} are allowed",
                nets.len(),
                schema_rules::NETWORK_SET_MAX
            ),
        );
    }
    for (i, s) in nets.iter().enumerate() {
        p.take(&format!("spec.nets[{i}]"), parse_network_or_address(s));
    }
    p.0
}

impl NetworkSetSpec {
    pub fn networks(&self) -> Vec<IpNet> {
        networks(&self.nets)
    }

    pub fn check(&self) -> Vec<Problem> {
        check_nets(&self.nets)
    }
}

impl GlobalNetworkSetSpec {
    pub fn networks(&self) -> Vec<IpNet> {
        networks(&self.nets)
    }

    pub fn check(&self) -> Vec<Problem> {
        check_nets(&self.nets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nets_are_networks_or_addresses_without_host_bits() {
        let ok = NetworkSetSpec {
            nets: vec![
                "198.51.100.0/28".into(),
                "203.0.113.7".into(),
                "2001:db8::/32".into(),
            ],
        };
        assert!(ok.check().is_empty(), "{:?}", ok.check());
        assert_eq!(ok.networks().len(), 3);
        assert_eq!(ok.networks()[1].to_string(), "203.0.113.7/32");
        let bad = GlobalNetworkSetSpec {
            nets: vec!["10.0.0.1/24".into(), "nope".into(), "10.0.0.0/8".into()],
        };
        let problems = bad.check();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].0, "spec.nets[0]");
        assert!(problems[0].1.contains("host bits"), "{problems:?}");
        assert_eq!(problems[1].0, "spec.nets[1]");
        assert!(GlobalNetworkSetSpec::default().check().is_empty());
    }

    #[test]
    fn too_many_nets_are_refused() {
        let nets: Vec<String> = (0..=schema_rules::NETWORK_SET_MAX)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        let p = check_nets(&nets);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "spec.nets");
    }
}
