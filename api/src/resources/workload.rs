//! WorkloadEndpoint: one pod's network interface as the CNI plugin wired
//! it. felix programs routes and policy from these; bgpd announces borrowed
//! addresses from them. Written by the CNI plugin only.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, dns_subdomain, parse_network};
use super::schema_rules;

/// A pod's interface: where it is, what it is called on the host and in
/// the pod, and its addresses. The object's labels are the pod's labels.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "WorkloadEndpoint",
    plural = "workloadendpoints",
    root = "WorkloadEndpoint",
    namespaced,
    derive = "PartialEq",
    shortname = "wep",
    doc = "A pod's network interface as the CNI plugin wired it. Written by the plugin only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEndpointSpec {
    /// The node the pod runs on.
    #[schemars(transform = schema_rules::dns_name)]
    pub node: String,
    /// The pod's name (in the object's namespace).
    #[schemars(transform = schema_rules::dns_name)]
    pub pod: String,
    /// The container runtime's ID of the pod sandbox.
    #[serde(rename = "containerID")]
    #[schemars(transform = schema_rules::printable_id)]
    pub container_id: String,
    /// The interface's name inside the pod (CNI_IFNAME), e.g. `eth0`.
    #[schemars(transform = schema_rules::printable_id)]
    pub endpoint: String,
    /// The host end of the veth pair, e.g. `tar5f2c9a1b7d0`.
    #[schemars(transform = schema_rules::interface_name)]
    pub interface_name: String,
    /// The pod end's MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// The pod's addresses as host networks (`10.244.1.5/32`,
    /// `fd00:10:244::5/128`).
    #[serde(rename = "ipNetworks")]
    #[schemars(length(min = 1), transform = schema_rules::host_network_list)]
    pub ip_networks: Vec<String>,
    /// The pod's named ports, for policies that name them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub ports: Vec<EndpointPort>,
}

/// A named container port.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointPort {
    pub name: String,
    /// TCP, UDP or SCTP.
    #[schemars(extend("enum" = ["TCP", "UDP", "SCTP"]))]
    pub protocol: String,
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
}

/// The object name of a pod's interface: `<pod>.<ifname>`, the interface
/// name lower-cased and anything but letters, digits and '-' made '-'.
pub fn workload_name(pod: &str, ifname: &str) -> String {
    let ifname: String = ifname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("{pod}.{}", ifname.trim_matches('-'))
}

impl WorkloadEndpointSpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        p.take("spec.node", dns_subdomain(&self.node));
        p.take("spec.pod", dns_subdomain(&self.pod));
        for (field, v) in [
            ("spec.containerID", &self.container_id),
            ("spec.endpoint", &self.endpoint),
            ("spec.interfaceName", &self.interface_name),
        ] {
            if v.is_empty() || v.chars().any(|c| c.is_control() || c == '/') {
                p.add(field, "must be non-empty printable text without '/'");
            }
        }
        if self.interface_name.len() > 15 {
            p.add(
                "spec.interfaceName",
                format!(
                    "{:?} is longer than 15 characters, the kernel's limit",
                    self.interface_name
                ),
            );
        }
        if self.ip_networks.is_empty() {
            p.add(
                "spec.ipNetworks",
                "is empty; a wired interface has at least one address",
            );
        }
        for (i, n) in self.ip_networks.iter().enumerate() {
            let field = format!("spec.ipNetworks[{i}]");
            if let Some(net) = p.take(&field, parse_network(n))
                && net.prefix_len() != net.max_prefix_len()
            {
                p.add(field, format!("{n} is not a host network; use /32 or /128"));
            }
        }
        for (i, port) in self.ports.iter().enumerate() {
            port.check(i, &mut p);
        }
        p.0
    }
}

impl EndpointPort {
    /// The problems of `spec.ports[i]`'s protocol and number.
    pub(super) fn check(&self, i: usize, p: &mut Problems) {
        if !matches!(self.protocol.as_str(), "TCP" | "UDP" | "SCTP") {
            p.add(
                format!("spec.ports[{i}].protocol"),
                format!(
                    "{:?} is not a protocol; allowed TCP, UDP, SCTP",
                    self.protocol
                ),
            );
        }
        if self.port == 0 {
            p.add(
                format!("spec.ports[{i}].port"),
                "0 is not a port; allowed 1 to 65535",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_object_names() {
        assert_eq!(workload_name("web-0", "eth0"), "web-0.eth0");
        assert_eq!(workload_name("web-0", "Net_1"), "web-0.net-1");
        assert!(dns_subdomain(&workload_name("web-0", "Net_1")).is_ok());
    }

    #[test]
    fn host_networks_only() {
        let mut s = WorkloadEndpointSpec {
            node: "node-a".into(),
            pod: "web-0".into(),
            container_id: "c0ffee".into(),
            endpoint: "eth0".into(),
            interface_name: "tar0123456789a".into(),
            mac: None,
            ip_networks: vec!["10.244.0.5/32".into()],
            ports: vec![],
        };
        assert!(s.check().is_empty(), "{:?}", s.check());
        s.ip_networks = vec!["10.244.0.0/24".into()];
        assert!(s.check()[0].1.contains("not a host network"));
    }
}
