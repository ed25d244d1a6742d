//! BGPConfiguration: the cluster's BGP settings and per-node overrides.

use std::collections::HashSet;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::autodetect::{AddressAutodetection, Family};
use super::common::{
    Problem, Problems, SecretSource, check_as_number, check_duration, dns_subdomain, parse_network,
};
use super::community::Community;
use super::schema_rules;

/// The name of the cluster-wide BGPConfiguration.
pub const DEFAULT_NAME: &str = "default";
/// Prefix of the names of per-node BGPConfigurations: `node.<nodename>`.
pub const NODE_PREFIX: &str = "node.";
/// AS number when none is configured (a private AS, RFC 6996).
pub const DEFAULT_AS_NUMBER: u32 = 64512;
/// TCP port BGP listens on when none is configured.
pub const DEFAULT_LISTEN_PORT: u16 = 179;
pub use super::limits::MAX_RESTART_SECONDS;

/// BGP settings. The object named `default` holds the cluster's settings;
/// an object named `node.<nodename>` overrides, for that node only, each
/// field it sets. Objects with other names are not used. A node's AS can
/// also be set by its `tartan.dev/bgp-as-number` annotation, which wins.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "BGPConfiguration",
    plural = "bgpconfigurations",
    root = "BgpConfiguration",
    derive = "PartialEq",
    shortname = "bgpconfig",
    doc = "BGP settings: `default` for the cluster, `node.<nodename>` to override them on one node."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": prefix_communities_rule(),
    "message": "prefixAdvertisements: a community is neither a name from spec.communities nor a community value (AA:NN, A:B:C, no-export, no-advertise, no-export-subconfed, no-peer)"
}, autodetect_family_rule("V4", 4), autodetect_family_rule("V6", 6)]))]
pub struct BgpConfigurationSpec {
    /// The AS number of nodes that do not set their own. Default 64512.
    /// Allowed 1 to 4294967295 except 23456 (AS_TRANS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::as_number)]
    pub as_number: Option<u32>,
    /// Whether every node peers with every other node. Default true.
    /// Turn it off when route reflectors or top-of-rack peers are used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_to_node_mesh_enabled: Option<bool>,
    /// TCP port for BGP sessions. Default 179.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::port)]
    pub listen_port: Option<u16>,
    /// Service cluster IP ranges to announce over BGP.
    #[serde(
        default,
        rename = "serviceClusterIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(transform = schema_rules::bounded_list)]
    pub service_cluster_ips: Vec<ServiceCidr>,
    /// Service external IP ranges to announce over BGP.
    #[serde(
        default,
        rename = "serviceExternalIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(transform = schema_rules::bounded_list)]
    pub service_external_ips: Vec<ServiceCidr>,
    /// Service LoadBalancer IP ranges to announce over BGP.
    #[serde(
        default,
        rename = "serviceLoadBalancerIPs",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(transform = schema_rules::bounded_list)]
    pub service_load_balancer_ips: Vec<ServiceCidr>,
    /// Named community values, for use in prefixAdvertisements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        transform = schema_rules::communities_list,
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub communities: Vec<NamedCommunity>,
    /// Communities attached to the routes of given prefixes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::communities_list)]
    pub prefix_advertisements: Vec<PrefixAdvertisement>,
    /// TCP MD5 password for node-to-node mesh sessions. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_mesh_password: Option<SecretSource>,
    /// How long peers keep this node's routes while it restarts
    /// (graceful restart), e.g. `120s`. Default 120s; 1s to 4095s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::restart_time)]
    pub graceful_restart_time: Option<String>,
    /// BFD for the node-to-node mesh sessions. Default off.
    #[serde(
        default,
        rename = "nodeMeshBFD",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_mesh_bfd: Option<super::bfd::BfdSpec>,
    /// How a node finds its IPv4 BGP address when its Node has no
    /// `tartan.dev/bgp-ipv4-address` annotation. Default: the Node's
    /// InternalIP. Setting it re-detects (and rewrites the annotation) at
    /// every start of the node's bgpd.
    #[serde(
        default,
        rename = "nodeAddressAutodetectionV4",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_address_autodetection_v4: Option<AddressAutodetection>,
    /// The same for IPv6 (`tartan.dev/bgp-ipv6-address`). Default: the
    /// Node's IPv6 InternalIP, if it has one.
    #[serde(
        default,
        rename = "nodeAddressAutodetectionV6",
        skip_serializing_if = "Option::is_none"
    )]
    pub node_address_autodetection_v6: Option<AddressAutodetection>,
    /// The level of the node's BGP daemon's log, as Calico's
    /// `logSeverityScreen`: `Debug`, `Info`, `Warning`, `Error` or
    /// `Fatal` (errors only). Default `Info`. The `TARTAN_LOG` variable,
    /// when set on the daemon, wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_severity_screen: Option<LogSeverity>,
}

/// Calico's log levels.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum LogSeverity {
    Debug,
    Info,
    Warning,
    Error,
    Fatal,
}

impl LogSeverity {
    /// The log filter of this level (the log has no level above errors).
    pub fn filter(self) -> &'static str {
        match self {
            LogSeverity::Debug => "debug",
            LogSeverity::Info => "info",
            LogSeverity::Warning => "warn",
            LogSeverity::Error | LogSeverity::Fatal => "error",
        }
    }
}

/// A range of service addresses.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceCidr {
    /// e.g. `10.96.0.0/12`.
    #[schemars(transform = schema_rules::network)]
    pub cidr: String,
}

/// A community value with a name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NamedCommunity {
    /// The name prefixAdvertisements refer to.
    #[schemars(transform = schema_rules::community_name)]
    pub name: String,
    /// `AA:NN` (standard), `A:B:C` (large), or no-export, no-advertise,
    /// no-export-subconfed, no-peer.
    #[schemars(transform = schema_rules::community_value)]
    pub value: String,
}

/// Communities for the routes within one prefix.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrefixAdvertisement {
    /// The prefix, e.g. `10.244.0.0/16`.
    #[schemars(transform = schema_rules::network)]
    pub cidr: String,
    /// Names from `communities` or literal community values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::community_ref_list)]
    pub communities: Vec<String>,
}

/// The CEL rule that a prefix advertisement's communities are names from
/// `communities` or community values.
fn prefix_communities_rule() -> String {
    format!(
        "!has(self.prefixAdvertisements) || self.prefixAdvertisements.all(a, !has(a.communities) || a.communities.all(c, (has(self.communities) && self.communities.exists(n, n.name == c)) || {}))",
        schema_rules::community_cel("c")
    )
}

/// The CEL rule that an autodetection method's `canReach` and `cidrs` are
/// of the family it detects.
fn autodetect_family_rule(v: &str, family: u8) -> serde_json::Value {
    let m = format!("self.nodeAddressAutodetection{v}");
    serde_json::json!({
        "rule": format!(
            "!has({m}) || ((!has({m}.canReach) || !isIP({m}.canReach) || ip({m}.canReach).family() == {family}) && (!has({m}.cidrs) || {m}.cidrs.all(c, !isCIDR(c) || cidr(c).ip().family() == {family})))"
        ),
        "message": format!("nodeAddressAutodetection{v}: canReach and cidrs must be IPv{family}"),
    })
}

/// Which object a BGPConfiguration name stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigScope {
    /// `default`: the cluster's settings.
    Cluster,
    /// `node.<nodename>`: one node's overrides.
    Node(String),
    /// Any other name: not used.
    Unused,
}

impl ConfigScope {
    pub fn of(name: &str) -> ConfigScope {
        if name == DEFAULT_NAME {
            ConfigScope::Cluster
        } else if let Some(node) = name.strip_prefix(NODE_PREFIX) {
            ConfigScope::Node(node.to_string())
        } else {
            ConfigScope::Unused
        }
    }
}

impl BgpConfigurationSpec {
    pub fn effective_as_number(&self) -> u32 {
        self.as_number.unwrap_or(DEFAULT_AS_NUMBER)
    }

    pub fn effective_listen_port(&self) -> u16 {
        self.listen_port.unwrap_or(DEFAULT_LISTEN_PORT)
    }

    pub fn effective_node_to_node_mesh(&self) -> bool {
        self.node_to_node_mesh_enabled.unwrap_or(true)
    }

    /// The graceful restart time in seconds (default 120).
    pub fn graceful_restart_seconds(&self) -> Option<u64> {
        match &self.graceful_restart_time {
            None => Some(120),
            Some(s) => super::common::parse_duration(s).ok().map(|d| d.as_secs()),
        }
    }

    /// This configuration with `node`'s overrides laid over it: every field
    /// the override sets wins.
    pub fn overlay(&self, node: &BgpConfigurationSpec) -> BgpConfigurationSpec {
        fn pick<T: Clone>(over: &[T], base: &[T]) -> Vec<T> {
            if over.is_empty() { base } else { over }.to_vec()
        }
        BgpConfigurationSpec {
            as_number: node.as_number.or(self.as_number),
            node_to_node_mesh_enabled: node
                .node_to_node_mesh_enabled
                .or(self.node_to_node_mesh_enabled),
            listen_port: node.listen_port.or(self.listen_port),
            service_cluster_ips: pick(&node.service_cluster_ips, &self.service_cluster_ips),
            service_external_ips: pick(&node.service_external_ips, &self.service_external_ips),
            service_load_balancer_ips: pick(
                &node.service_load_balancer_ips,
                &self.service_load_balancer_ips,
            ),
            communities: pick(&node.communities, &self.communities),
            prefix_advertisements: pick(&node.prefix_advertisements, &self.prefix_advertisements),
            node_mesh_password: node
                .node_mesh_password
                .clone()
                .or_else(|| self.node_mesh_password.clone()),
            graceful_restart_time: node
                .graceful_restart_time
                .clone()
                .or_else(|| self.graceful_restart_time.clone()),
            node_mesh_bfd: node
                .node_mesh_bfd
                .clone()
                .or_else(|| self.node_mesh_bfd.clone()),
            node_address_autodetection_v4: node
                .node_address_autodetection_v4
                .clone()
                .or_else(|| self.node_address_autodetection_v4.clone()),
            node_address_autodetection_v6: node
                .node_address_autodetection_v6
                .clone()
                .or_else(|| self.node_address_autodetection_v6.clone()),
            log_severity_screen: node.log_severity_screen.or(self.log_severity_screen),
        }
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        if let Some(asn) = self.as_number {
            p.take("spec.asNumber", check_as_number(asn));
        }
        if self.listen_port == Some(0) {
            p.add("spec.listenPort", "0 is not a port; allowed 1 to 65535");
        }
        for (field, list) in [
            ("serviceClusterIPs", &self.service_cluster_ips),
            ("serviceExternalIPs", &self.service_external_ips),
            ("serviceLoadBalancerIPs", &self.service_load_balancer_ips),
        ] {
            for (i, c) in list.iter().enumerate() {
                p.take(&format!("spec.{field}[{i}].cidr"), parse_network(&c.cidr));
            }
        }
        let mut names = HashSet::new();
        for (i, c) in self.communities.iter().enumerate() {
            let f = format!("spec.communities[{i}]");
            if c.name.is_empty() || c.name.chars().any(char::is_control) {
                p.add(format!("{f}.name"), "a community needs a printable name");
            } else if !names.insert(c.name.as_str()) {
                p.add(
                    format!("{f}.name"),
                    format!("{:?} is defined twice; names must be unique", c.name),
                );
            }
            p.take(&format!("{f}.value"), c.value.parse::<Community>());
        }
        for (i, a) in self.prefix_advertisements.iter().enumerate() {
            let f = format!("spec.prefixAdvertisements[{i}]");
            p.take(&format!("{f}.cidr"), parse_network(&a.cidr));
            for (j, c) in a.communities.iter().enumerate() {
                if !names.contains(c.as_str()) && c.parse::<Community>().is_err() {
                    p.add(
                        format!("{f}.communities[{j}]"),
                        format!(
                            "{c:?} is neither a name from spec.communities nor a community value (AA:NN, A:B:C, no-export, no-advertise, no-export-subconfed, no-peer)"
                        ),
                    );
                }
            }
        }
        if let Some(pw) = &self.node_mesh_password {
            pw.check("spec.nodeMeshPassword", &mut p);
        }
        if let Some(t) = &self.graceful_restart_time {
            check_duration(
                "spec.gracefulRestartTime",
                t,
                1,
                MAX_RESTART_SECONDS,
                &mut p,
            );
        }
        if let Some(b) = &self.node_mesh_bfd {
            b.check("spec.nodeMeshBFD", &mut p);
        }
        if let Some(a) = &self.node_address_autodetection_v4 {
            a.check("spec.nodeAddressAutodetectionV4", Family::V4, &mut p);
        }
        if let Some(a) = &self.node_address_autodetection_v6 {
            a.check("spec.nodeAddressAutodetectionV6", Family::V6, &mut p);
        }
        p.0
    }

    /// Problems with the object's name: `default`, or `node.` and a node name.
    pub fn check_name(name: &str) -> Vec<Problem> {
        match ConfigScope::of(name) {
            ConfigScope::Node(node) => match dns_subdomain(&node) {
                Ok(()) => vec![],
                Err(e) => vec![(
                    "metadata.name".into(),
                    format!(
                        "a per-node BGPConfiguration is named node.<nodename>; the node name {e}"
                    ),
                )],
            },
            ConfigScope::Cluster | ConfigScope::Unused => vec![],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overlay() {
        let cluster: BgpConfigurationSpec = serde_json::from_str(r#"{"asNumber": 65000}"#).unwrap();
        assert_eq!(cluster.effective_listen_port(), 179);
        assert!(cluster.effective_node_to_node_mesh());
        assert_eq!(cluster.graceful_restart_seconds(), Some(120));
        assert_eq!(
            BgpConfigurationSpec::default().effective_as_number(),
            DEFAULT_AS_NUMBER
        );
        let node: BgpConfigurationSpec =
            serde_json::from_str(r#"{"listenPort": 1179, "gracefulRestartTime": "2m"}"#).unwrap();
        let eff = cluster.overlay(&node);
        assert_eq!(eff.effective_as_number(), 65000);
        assert_eq!(eff.effective_listen_port(), 1179);
        assert_eq!(eff.graceful_restart_seconds(), Some(120));
    }

    #[test]
    fn names_say_their_scope() {
        assert_eq!(ConfigScope::of("default"), ConfigScope::Cluster);
        assert_eq!(
            ConfigScope::of("node.worker-1"),
            ConfigScope::Node("worker-1".into())
        );
        assert_eq!(ConfigScope::of("other"), ConfigScope::Unused);
        assert!(BgpConfigurationSpec::check_name("node.").len() == 1);
    }
}
