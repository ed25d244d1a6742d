//! HostEndpoint: one node's interface (or all of them) that
//! GlobalNetworkPolicies protect, as Calico's host endpoints do. felix
//! of `spec.node` enforces it; every felix lets rule selectors pick it
//! (standing for its `expectedIPs`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::common::{Problem, Problems, dns_subdomain};
use super::schema_rules::{self, rule};
use super::workload::EndpointPort;

/// The `interfaceName` that stands for every host interface.
pub const ALL_INTERFACES: &str = "*";

/// Why a non-empty `profiles` is refused (CEL and Rust say the same).
pub const PROFILES_REFUSED: &str = "profiles: Tartan has no Profile kind; leave the list empty and select the endpoint by its labels in a GlobalNetworkPolicy";

/// A host's interface that GlobalNetworkPolicies select by its labels.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, Default)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "HostEndpoint",
    plural = "hostendpoints",
    root = "HostEndpoint",
    derive = "PartialEq",
    shortname = "hep",
    shortname = "heps",
    doc = "A node's interface (or all of them) protected by GlobalNetworkPolicies selecting its labels."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = host_endpoint_spec_rules()))]
pub struct HostEndpointSpec {
    /// The node whose interface this is.
    #[schemars(transform = schema_rules::dns_name)]
    pub node: String,
    /// The interface (`eth0`), or `*` for every interface of the host
    /// but loopback and Tartan's own (pods' and tunnels'). Without it,
    /// the interface that holds one of `expectedIPs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = interface_name)]
    pub interface_name: Option<String>,
    /// The addresses of the interface: what rule selectors picking this
    /// endpoint stand for, and, without `interfaceName`, how the
    /// interface is found.
    #[serde(default, rename = "expectedIPs", skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = expected_ips)]
    pub expected_ips: Vec<String>,
    /// Named ports, for policy rules that name ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = ports)]
    pub ports: Vec<EndpointPort>,
    /// Calico's profiles: Tartan has none; only an empty list is
    /// accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub profiles: Vec<String>,
}

/// `interfaceName`: `*`, or 1 to 15 printable ASCII characters (so bytes,
/// as the kernel counts) but '/', ':' and '*', as
/// [`interface_name_ok`] checks (the CRD's lengths count characters).
pub const INTERFACE_NAME_PATTERN: &str = r"^(\*|[!-)+-.0-9;-~]{1,15})$";

/// A port's `name`: no white space (as Rust's `char::is_whitespace`) nor
/// control characters, as [`port_name_ok`] checks.
pub const PORT_NAME_PATTERN: &str =
    r"^[^\x00-\x20\x7f-\xa0\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]+$";

/// At most this many characters in a port's name.
pub const PORT_NAME_MAX: usize = 128;

fn interface_name(s: &mut schemars::Schema) {
    schema_rules::interface_name(s);
    s.ensure_object()
        .insert("pattern".into(), Value::from(INTERFACE_NAME_PATTERN));
}

/// `ports`: bounded, each name bounded (which also bounds the CEL cost of
/// the uniqueness rule) and as [`port_name_ok`] reads it.
fn ports(s: &mut schemars::Schema) {
    schema_rules::bounded_list(s);
    let name = s
        .ensure_object()
        .get_mut("items")
        .and_then(|i| i.get_mut("properties"))
        .and_then(|p| p.get_mut("name"))
        .and_then(Value::as_object_mut);
    if let Some(name) = name {
        name.insert("minLength".into(), Value::from(1));
        name.insert("maxLength".into(), Value::from(PORT_NAME_MAX));
        name.insert("pattern".into(), Value::from(PORT_NAME_PATTERN));
    }
}

fn expected_ips(s: &mut schemars::Schema) {
    s.ensure_object()
        .insert("maxItems".into(), serde_json::json!(schema_rules::NETS_MAX));
    if let Some(items) = s.ensure_object().get_mut("items") {
        let mut item = schemars::Schema::try_from(items.take()).unwrap_or_default();
        schema_rules::address(&mut item);
        *items = item.to_value();
    }
}

/// The spec's rules across fields.
fn host_endpoint_spec_rules() -> Vec<Value> {
    vec![
        rule(
            "has(self.interfaceName) || (has(self.expectedIPs) && size(self.expectedIPs) > 0)",
            "either interfaceName or expectedIPs must be given",
        ),
        rule(
            "!has(self.profiles) || size(self.profiles) == 0",
            PROFILES_REFUSED,
        ),
        rule(
            "!has(self.ports) || self.ports.all(p, self.ports.exists_one(q, q.name == p.name))",
            "ports: each port name may be used once",
        ),
        rule(
            "!has(self.interfaceName) || self.interfaceName == '*' || (self.interfaceName != '.' && self.interfaceName != '..' && !self.interfaceName.matches('[\\\\s:*]'))",
            "interfaceName: not a Linux interface name (no spaces, ':' or '*', not '.' or '..'); '*' alone means every interface",
        ),
    ]
}

/// Whether `s` is an interface name Tartan accepts: one the kernel
/// accepts (`dev_valid_name`: 1 to 15 bytes, not `.` or `..`, no `/`,
/// `:` or white space) made of printable ASCII but `*`, so that its
/// bytes are its characters (which the CRD's `maxLength` counts); `*`
/// is not one.
pub fn interface_name_ok(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("{s:?} is not 1 to 15 characters long"));
    }
    if s.chars()
        .any(|c| !c.is_ascii_graphic() || c == '/' || c == ':' || c == '*')
    {
        return Err(format!(
            "{s:?} is not an interface name: printable ASCII only, no '/', ':', '*' or spaces"
        ));
    }
    if s.len() > 15 {
        return Err(format!("{s:?} is not 1 to 15 characters long"));
    }
    if s == "." || s == ".." {
        return Err(format!("{s:?} is not an interface name"));
    }
    Ok(())
}

impl HostEndpointSpec {
    /// The addresses of `expectedIPs` that parse.
    pub fn addresses(&self) -> Vec<IpAddr> {
        self.expected_ips
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect()
    }

    /// Whether it stands for every interface of its host.
    pub fn all_interfaces(&self) -> bool {
        self.interface_name.as_deref() == Some(ALL_INTERFACES)
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        p.take("spec.node", dns_subdomain(&self.node));
        match self.interface_name.as_deref() {
            None | Some(ALL_INTERFACES) => {}
            Some(name) => {
                p.take("spec.interfaceName", interface_name_ok(name));
            }
        }
        if self.interface_name.is_none() && self.expected_ips.is_empty() {
            p.add("spec", "either interfaceName or expectedIPs must be given");
        }
        if self.expected_ips.len() > schema_rules::NETS_MAX as usize {
            p.add(
                "spec.expectedIPs",
                format!("has more than {} entries", schema_rules::NETS_MAX),
            );
        }
        for (i, a) in self.expected_ips.iter().enumerate() {
            if a.parse::<IpAddr>().is_err() {
                p.add(
                    format!("spec.expectedIPs[{i}]"),
                    format!("{a:?} is not an IPv4 or IPv6 address"),
                );
            }
        }
        let mut names = BTreeSet::new();
        for (i, port) in self.ports.iter().enumerate() {
            if !port_name_ok(&port.name) {
                p.add(
                    format!("spec.ports[{i}].name"),
                    format!("{:?} is not a port name", port.name),
                );
            }
            if !names.insert(port.name.as_str()) {
                p.add(
                    format!("spec.ports[{i}].name"),
                    format!("{:?} is used by an earlier port", port.name),
                );
            }
            port.check(i, &mut p);
        }
        if !self.profiles.is_empty() {
            p.add("spec.profiles", PROFILES_REFUSED);
        }
        p.0
    }
}

/// A port name: non-empty, at most [`PORT_NAME_MAX`] characters (as the
/// CRD counts), no white space nor control characters (as a rule's port
/// name is written).
pub fn port_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars().count() <= PORT_NAME_MAX
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> HostEndpointSpec {
        HostEndpointSpec {
            node: "node-a".into(),
            interface_name: Some("eth0".into()),
            expected_ips: vec!["192.0.2.10".into()],
            ports: vec![EndpointPort {
                name: "ssh".into(),
                protocol: "TCP".into(),
                port: 22,
            }],
            profiles: vec![],
        }
    }

    #[test]
    fn good_specs_pass() {
        assert!(spec().check().is_empty(), "{:?}", spec().check());
        let all = HostEndpointSpec {
            interface_name: Some("*".into()),
            expected_ips: vec![],
            ..spec()
        };
        assert!(all.check().is_empty());
        assert!(all.all_interfaces());
        let by_ip = HostEndpointSpec {
            interface_name: None,
            expected_ips: vec!["2001:db8::1".into()],
            ..spec()
        };
        assert!(by_ip.check().is_empty());
    }

    #[test]
    fn bad_specs_name_their_fields() {
        let fields =
            |s: HostEndpointSpec| -> Vec<String> { s.check().into_iter().map(|p| p.0).collect() };
        let none = HostEndpointSpec {
            interface_name: None,
            expected_ips: vec![],
            ..spec()
        };
        assert_eq!(fields(none), ["spec"]);
        for bad in ["eth 0", "a:b", "way-too-long-name0", "..", "e*"] {
            let s = HostEndpointSpec {
                interface_name: Some(bad.into()),
                ..spec()
            };
            assert_eq!(fields(s), ["spec.interfaceName"], "{bad}");
        }
        let ips = HostEndpointSpec {
            expected_ips: vec!["192.0.2.1".into(), "10.0.0.0/8".into()],
            ..spec()
        };
        assert_eq!(fields(ips), ["spec.expectedIPs[1]"]);
        let mut dup = spec();
        dup.ports.push(EndpointPort {
            name: "ssh".into(),
            protocol: "UDP".into(),
            port: 0,
        });
        assert_eq!(fields(dup), ["spec.ports[1].name", "spec.ports[1].port"]);
        let prof = HostEndpointSpec {
            profiles: vec!["kns.default".into()],
            ..spec()
        };
        let p = prof.check();
        assert_eq!(p[0].0, "spec.profiles");
        assert!(p[0].1.contains("no Profile kind"), "{p:?}");
        let node = HostEndpointSpec {
            node: "Node_A".into(),
            ..spec()
        };
        assert_eq!(fields(node), ["spec.node"]);
    }
}
