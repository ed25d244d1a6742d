//! Tartan's policies: NetworkPolicy (one namespace) and GlobalNetworkPolicy
//! (the whole cluster), and the rules they share.

use std::collections::{BTreeMap, HashSet};

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    Problem, Problems, all_selector, check_rule_namespace_selector, check_selector, dns_subdomain,
    parse_network_or_address,
};
pub use super::policy_values::{Port, Protocol};
use super::schema_rules_policy::UNSUPPORTED;
use super::{schema_rules, schema_rules_policy};
use crate::validate::names::{ANNOTATIONS_MAX, annotation_key};

/// What a rule does with the packets it matches. `Allow` and `Deny` end
/// evaluation; `Pass` skips the rest of this policy and every later Tartan
/// policy (Kubernetes NetworkPolicies still apply; with none selecting the
/// endpoint the packet is allowed); `Log` logs and goes on to the next
/// rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum Action {
    Allow,
    Deny,
    Pass,
    Log,
}

/// A direction of traffic a policy governs, seen from the selected endpoints.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
pub enum PolicyType {
    Ingress,
    Egress,
}

/// Policy for the pods of one namespace. Policies apply in ascending
/// `order` (those without an order last); within a policy, rules apply in
/// the order written.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "NetworkPolicy",
    plural = "networkpolicies",
    root = "NetworkPolicy",
    namespaced,
    derive = "PartialEq",
    shortname = "tnp",
    doc = "Ordered Allow/Deny/Pass/Log policy for the pods of one namespace."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = schema_rules_policy::namespaced_policy_spec_rules()))]
pub struct NetworkPolicySpec {
    /// Where this policy stands among others: lower applies first.
    /// Default: after every policy that has an order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<f64>,
    /// The pods (in this namespace) the policy applies to. Default `all()`.
    #[serde(default = "all_selector")]
    #[schemars(transform = schema_rules::selector)]
    pub selector: String,
    /// Directions the policy governs. Default: Ingress when there are
    /// ingress rules or no egress rules, plus Egress when there are egress
    /// rules. A governed direction with no rules denies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::distinct)]
    pub types: Vec<PolicyType>,
    /// Rules for traffic to the selected pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub ingress: Vec<Rule>,
    /// Rules for traffic from the selected pods.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub egress: Vec<Rule>,
    /// Calico's tier: refused unless `default` (Tartan has one tier).
    /// Declared so that an API server does not drop it unnoticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Narrows the endpoints the policy applies to: those whose service
    /// account's labels match this selector (as Calico's: felix labels
    /// each endpoint with its ServiceAccount's labels under the prefix
    /// `pcsa.`). Empty: no narrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub service_account_selector: Option<String>,
}

/// Policy for endpoints anywhere in the cluster, and for hosts. Policies
/// apply in ascending `order` together with namespaced NetworkPolicies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "GlobalNetworkPolicy",
    plural = "globalnetworkpolicies",
    root = "GlobalNetworkPolicy",
    derive = "PartialEq",
    shortname = "gnp",
    doc = "Ordered Allow/Deny/Pass/Log policy for endpoints across the cluster."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = schema_rules_policy::global_policy_spec_rules()))]
pub struct GlobalNetworkPolicySpec {
    /// Where this policy stands among others: lower applies first.
    /// Default: after every policy that has an order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<f64>,
    /// The endpoints the policy applies to. Default `all()`.
    #[serde(default = "all_selector")]
    #[schemars(transform = schema_rules::selector)]
    pub selector: String,
    /// Limits the policy to endpoints in the namespaces this selects.
    /// Default: all namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub namespace_selector: Option<String>,
    /// Directions the policy governs. Default: Ingress when there are
    /// ingress rules or no egress rules, plus Egress when there are egress
    /// rules. A governed direction with no rules denies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::distinct)]
    pub types: Vec<PolicyType>,
    /// Rules for traffic to the selected endpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub ingress: Vec<Rule>,
    /// Rules for traffic from the selected endpoints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub egress: Vec<Rule>,
    /// Calico's tier: refused unless `default` (Tartan has one tier).
    /// Declared so that an API server does not drop it unnoticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Narrows the endpoints the policy applies to: those whose service
    /// account's labels match this selector (as Calico's: felix labels
    /// each endpoint with its ServiceAccount's labels under the prefix
    /// `pcsa.`). Empty: no narrowing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub service_account_selector: Option<String>,
    /// Calico's flag for host endpoint policy on forwarded traffic:
    /// refused when true. Declared so that an API server does not drop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_on_forward: Option<bool>,
    /// Calico's host endpoint policy before DNAT: refused when true.
    #[serde(default, rename = "preDNAT", skip_serializing_if = "Option::is_none")]
    pub pre_dnat: Option<bool>,
    /// Calico's untracked host endpoint policy: refused when true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub do_not_track: Option<bool>,
}

/// One rule: every condition given must match for `action` to apply.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = schema_rules_policy::policy_rule_rules()))]
pub struct Rule {
    pub action: Action,
    /// IP protocol: TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite (case-sensitive)
    /// or a number 1 to 255. TCP, UDP or SCTP for port numbers and ranges
    /// (named ports alone may go without it); ICMP or ICMPv6 for icmp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
    /// Match packets of any protocol but this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_protocol: Option<Protocol>,
    /// 4 or 6: match only this IP version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::ip_version)]
    pub ip_version: Option<u8>,
    /// ICMP type and code to match (protocol ICMP or ICMPv6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp: Option<IcmpMatch>,
    /// ICMP type and code not to match.
    #[serde(default, rename = "notICMP", skip_serializing_if = "Option::is_none")]
    pub not_icmp: Option<IcmpMatch>,
    /// Conditions on the packet's source.
    #[serde(default, skip_serializing_if = "EntityRule::is_empty")]
    pub source: EntityRule,
    /// Conditions on the packet's destination.
    #[serde(default, skip_serializing_if = "EntityRule::is_empty")]
    pub destination: EntityRule,
    /// Calico's match on HTTP methods and paths: refused (Tartan has no
    /// application layer). Declared so that an API server does not drop
    /// it unnoticed (a rule without it matches every request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::opaque_object)]
    pub http: Option<serde_json::Value>,
    /// Calico's rule metadata: annotations kept with the rule. They change
    /// nothing in what the rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<RuleMetadata>,
}

/// Notes on a rule (Calico's `RuleMetadata`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleMetadata {
    /// Keys as an object's annotation keys; at most 256 KiB in all.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl RuleMetadata {
    /// As an object's annotations: each key a qualified name (of any
    /// case), and no more than their size limit in all.
    fn check(&self, f: &str, p: &mut Problems) {
        let mut size = 0;
        for (k, v) in &self.annotations {
            size += k.len() + v.len();
            p.take(&format!("{f}.annotations"), annotation_key(k));
        }
        if size > ANNOTATIONS_MAX {
            p.add(
                format!("{f}.annotations"),
                format!("Too long: {size} bytes in total; annotations may hold at most {ANNOTATIONS_MAX} bytes"),
            );
        }
    }
}

/// An ICMP type, and optionally a code within it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.code) || has(self.type)", "message": "code needs type; give the ICMP type too"}
]))]
pub struct IcmpMatch {
    /// ICMP type, 0 to 254.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 254))]
    pub icmp_type: Option<u8>,
    /// ICMP code, 0 to 255; needs type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u8>,
}

/// Conditions on one end of a packet. Every field given must match.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = schema_rules_policy::entity_rule_rules()))]
pub struct EntityRule {
    /// The address is in one of these networks (CIDRs or addresses).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::network_or_address_list)]
    pub nets: Vec<String>,
    /// The address is in none of these networks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::network_or_address_list)]
    pub not_nets: Vec<String>,
    /// The endpoint matches this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub selector: Option<String>,
    /// The endpoint does not match this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub not_selector: Option<String>,
    /// The endpoint's namespace matches this selector. Default in a
    /// NetworkPolicy: the policy's own namespace (when selector is given).
    /// `global()` here takes in what is in no namespace: GlobalNetworkSets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub namespace_selector: Option<String>,
    /// The port is one of these: numbers, `lo:hi` ranges or named ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::ports_list)]
    pub ports: Vec<Port>,
    /// The port is none of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::ports_list)]
    pub not_ports: Vec<Port>,
    /// The endpoint is a pod running as one of these service accounts
    /// (in the rule's namespace scope, as `selector`). Network sets never
    /// match it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<ServiceAccountMatch>,
    /// Calico's match on Services: refused, as serviceAccounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::opaque_object)]
    pub services: Option<serde_json::Value>,
}

/// Calico's `ServiceAccountMatch`: service accounts by name and by
/// label; both given, both must match.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = schema_rules_policy::service_account_match_rules()))]
pub struct ServiceAccountMatch {
    /// The service account's name is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::dns_name_list)]
    pub names: Vec<String>,
    /// The service account's labels match this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::selector)]
    pub selector: Option<String>,
}

impl ServiceAccountMatch {
    /// The selector, unless absent or empty (Calico's "not given").
    pub fn given_selector(&self) -> Option<&str> {
        self.selector.as_deref().filter(|s| !s.is_empty())
    }

    /// Whether it matches on anything: names or a selector.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.given_selector().is_none()
    }

    fn check(&self, f: &str, p: &mut Problems) {
        if self.is_empty() {
            p.add(
                f,
                "neither names nor selector is given; give one, or remove serviceAccounts",
            );
        }
        for (i, n) in self.names.iter().enumerate() {
            p.take(&format!("{f}.names[{i}]"), dns_subdomain(n));
        }
        if let Some(s) = self.given_selector() {
            check_selector(&format!("{f}.selector"), s, p);
        }
    }
}

impl EntityRule {
    pub fn is_empty(&self) -> bool {
        *self == EntityRule::default()
    }
}

/// The directions a policy governs: `types` if given, else from its rules.
pub fn effective_types(types: &[PolicyType], ingress: &[Rule], egress: &[Rule]) -> Vec<PolicyType> {
    if !types.is_empty() {
        let mut t = types.to_vec();
        t.sort();
        t.dedup();
        return t;
    }
    let mut t = Vec::new();
    if !ingress.is_empty() || egress.is_empty() {
        t.push(PolicyType::Ingress);
    }
    if !egress.is_empty() {
        t.push(PolicyType::Egress);
    }
    t
}

impl NetworkPolicySpec {
    pub fn effective_types(&self) -> Vec<PolicyType> {
        effective_types(&self.types, &self.ingress, &self.egress)
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_policy(
            &self.selector,
            &self.types,
            &self.ingress,
            &self.egress,
            &mut p,
        );
        check_unsupported(&self.tier, &mut p);
        check_sa_selector(&self.service_account_selector, &mut p);
        p.0
    }
}

impl GlobalNetworkPolicySpec {
    pub fn effective_types(&self) -> Vec<PolicyType> {
        effective_types(&self.types, &self.ingress, &self.egress)
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        check_policy(
            &self.selector,
            &self.types,
            &self.ingress,
            &self.egress,
            &mut p,
        );
        if let Some(s) = &self.namespace_selector {
            check_selector("spec.namespaceSelector", s, &mut p);
        }
        check_unsupported(&self.tier, &mut p);
        check_sa_selector(&self.service_account_selector, &mut p);
        for (field, value) in [
            ("spec.preDNAT", self.pre_dnat),
            ("spec.doNotTrack", self.do_not_track),
            ("spec.applyOnForward", self.apply_on_forward),
        ] {
            if value == Some(true) {
                p.add(
                    field,
                    "true is not supported by Tartan; remove the field or set it to false",
                );
            }
        }
        p.0
    }
}

/// Calico's spec fields Tartan does not implement, refused unless their
/// value changes nothing.
fn check_unsupported(tier: &Option<String>, p: &mut Problems) {
    if let Some(t) = tier
        && t != "default"
    {
        p.add(
            "spec.tier",
            format!("{t:?}: only the tier default exists; Tartan does not support tiers, remove the field or set it to default"),
        );
    }
}

/// A policy's `serviceAccountSelector`: a selector, unless empty (none).
fn check_sa_selector(sa_selector: &Option<String>, p: &mut Problems) {
    if let Some(s) = sa_selector.as_deref().filter(|s| !s.is_empty()) {
        check_selector("spec.serviceAccountSelector", s, p);
    }
}

fn check_policy(
    selector: &str,
    types: &[PolicyType],
    ingress: &[Rule],
    egress: &[Rule],
    p: &mut Problems,
) {
    check_selector("spec.selector", selector, p);
    let mut seen = HashSet::new();
    for (i, t) in types.iter().enumerate() {
        if !seen.insert(t) {
            p.add(format!("spec.types[{i}]"), format!("{t:?} is listed twice"));
        }
    }
    if !types.is_empty() {
        for (field, rules, t) in [
            ("spec.ingress", ingress, PolicyType::Ingress),
            ("spec.egress", egress, PolicyType::Egress),
        ] {
            if !rules.is_empty() && !types.contains(&t) {
                p.add(
                    field,
                    format!("rules are given but spec.types leaves out {t:?}, so they would never apply; add {t:?} to types"),
                );
            }
        }
    }
    for (field, rules) in [("spec.ingress", ingress), ("spec.egress", egress)] {
        for (i, r) in rules.iter().enumerate() {
            r.check(&format!("{field}[{i}]"), p);
        }
    }
}

impl Rule {
    /// A rule with only an action.
    pub fn new(action: Action) -> Self {
        Rule {
            action,
            protocol: None,
            not_protocol: None,
            ip_version: None,
            icmp: None,
            not_icmp: None,
            source: EntityRule::default(),
            destination: EntityRule::default(),
            http: None,
            metadata: None,
        }
    }

    fn check(&self, f: &str, p: &mut Problems) {
        if let (Some(a), Some(b)) = (self.protocol, self.not_protocol)
            && a.number() == b.number()
        {
            p.add(
                format!("{f}.notProtocol"),
                format!("{b} is also the rule's protocol; the rule could never match"),
            );
        }
        if let Some(v) = self.ip_version
            && v != 4
            && v != 6
        {
            p.add(
                format!("{f}.ipVersion"),
                format!("{v} is not an IP version; allowed 4 or 6"),
            );
        }
        for (name, m) in [("icmp", &self.icmp), ("notICMP", &self.not_icmp)] {
            let Some(m) = m else { continue };
            let field = format!("{f}.{name}");
            match self.protocol {
                Some(proto) if proto.is_icmp() => {
                    let wants = if proto.number() == 1 { 4 } else { 6 };
                    if self.ip_version.is_some_and(|v| v != wants) {
                        p.add(
                            format!("{f}.ipVersion"),
                            format!("protocol {proto} is for IPv{wants}; ipVersion must be {wants} or left out"),
                        );
                    }
                }
                _ => p.add(&field, format!("{name} needs protocol ICMP or ICMPv6")),
            }
            if m.icmp_type == Some(255) {
                p.add(
                    format!("{field}.type"),
                    "255 is out of range; allowed 0 to 254",
                );
            }
            if m.code.is_some() && m.icmp_type.is_none() {
                p.add(
                    format!("{field}.code"),
                    "code needs type; give the ICMP type too",
                );
            }
        }
        if self.http.is_some() {
            p.add(
                format!("{f}.http"),
                format!("{UNSUPPORTED} (a rule without it would match every HTTP request)"),
            );
        }
        for (name, e) in [("source", &self.source), ("destination", &self.destination)] {
            e.check(&format!("{f}.{name}"), self, p);
        }
        if let Some(m) = &self.metadata {
            m.check(&format!("{f}.metadata"), p);
        }
    }
}

impl EntityRule {
    fn check(&self, f: &str, rule: &Rule, p: &mut Problems) {
        if self.services.is_some() {
            p.add(
                format!("{f}.services"),
                format!("{UNSUPPORTED} (a rule without it would match every endpoint)"),
            );
        }
        if let Some(sa) = &self.service_accounts {
            sa.check(&format!("{f}.serviceAccounts"), p);
        }
        for (name, nets) in [("nets", &self.nets), ("notNets", &self.not_nets)] {
            for (i, n) in nets.iter().enumerate() {
                let field = format!("{f}.{name}[{i}]");
                let Some(net) = p.take(&field, parse_network_or_address(n)) else {
                    continue;
                };
                let v = if matches!(net, IpNet::V4(_)) { 4 } else { 6 };
                if let Some(want) = rule.ip_version
                    && want != v
                {
                    p.add(
                        field,
                        format!("{n:?} is IPv{v} but the rule's ipVersion is {want}"),
                    );
                }
            }
        }
        for (name, s) in [
            ("selector", &self.selector),
            ("notSelector", &self.not_selector),
        ] {
            if let Some(s) = s {
                check_selector(&format!("{f}.{name}"), s, p);
            }
        }
        if let Some(s) = &self.namespace_selector {
            check_rule_namespace_selector(&format!("{f}.namespaceSelector"), s, p);
        }
        for (name, ports) in [("ports", &self.ports), ("notPorts", &self.not_ports)] {
            if ports.is_empty() {
                continue;
            }
            if let Some(why) = ports_without_protocol(rule.protocol, ports) {
                p.add(format!("{f}.{name}"), why);
            }
            for (i, port) in ports.iter().enumerate() {
                p.take(&format!("{f}.{name}[{i}]"), port.check());
            }
        }
    }
}

/// Why a list of ports cannot go with the rule's protocol, as Calico's
/// validator has it: a protocol given must be one with ports; without
/// one, named ports alone are allowed (each matches under the protocol
/// the endpoint declares for it), numbers and ranges are not.
fn ports_without_protocol(protocol: Option<Protocol>, ports: &[Port]) -> Option<String> {
    match protocol {
        Some(proto) if !proto.has_ports() => Some(format!(
            "protocol {proto} has no ports to match; ports need protocol TCP, UDP or SCTP in the same rule"
        )),
        None if !ports.iter().all(|p| matches!(p, Port::Named(_))) => Some(
            "port numbers and ranges need protocol TCP, UDP or SCTP in the same rule (named ports alone may go without one)"
                .into(),
        ),
        _ => None,
    }
}
