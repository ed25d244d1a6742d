//! The CEL rules (`x-kubernetes-validations`) of the policy kinds'
//! schemas: a rule's protocol, ports and ICMP fields that go together, and
//! a spec's rules only for the directions it governs (see
//! [`super::schema_rules`] for the field-level rules and the limits).

use super::schema_rules::{family_cel, rule};
use serde_json::{Value, json};

/// CEL for "the rule's protocol, as a string" (`self.protocol` is an
/// int-or-string).
const PROTO: &str = "string(self.protocol)";

/// CEL that is true when the rule's protocol (present) is `numbers` or
/// `names` (lower case; names are read in any case).
fn protocol_is(numbers: &str, names: &str) -> String {
    format!(
        "({PROTO}.matches('^[0-9]+$') ? int({PROTO}) in {numbers} : {PROTO}.lowerAscii() in {names})"
    )
}

/// CEL that is true when port `p` (an int-or-string) is a name: a string
/// that is neither a number nor a range.
const PORT_IS_NAMED: &str = "(type(p) == string && !string(p).matches('^[0-9]+(:[0-9]+)?$'))";

/// The rules on a rule's ports and its protocol, as Calico's validator
/// has them: a protocol given must be one with ports (TCP, UDP, SCTP);
/// without one, named ports alone are allowed.
fn ports_rules() -> Vec<Value> {
    let has_ports = protocol_is("[6, 17, 132]", "['tcp', 'udp', 'sctp']");
    let mut out = Vec::new();
    for end in ["source", "destination"] {
        for ports in ["ports", "notPorts"] {
            let given = format!(
                "has(self.{end}) && has(self.{end}.{ports}) && size(self.{end}.{ports}) > 0"
            );
            out.push(rule(
                &format!("!({given}) || !has(self.protocol) || {has_ports}"),
                &format!(
                    "{end}.{ports}: the protocol has no ports to match; ports need protocol TCP, UDP or SCTP in the same rule"
                ),
            ));
            out.push(rule(
                &format!(
                    "!({given}) || has(self.protocol) || self.{end}.{ports}.all(p, {PORT_IS_NAMED})"
                ),
                &format!(
                    "{end}.{ports}: port numbers and ranges need protocol TCP, UDP or SCTP in the same rule (named ports alone may go without one)"
                ),
            ));
        }
    }
    out
}

/// The cross-field rules of a policy rule.
pub fn policy_rule_rules() -> Vec<Value> {
    let is_icmp = protocol_is("[1, 58]", "['icmp', 'icmpv6']");
    let icmp4 = protocol_is("[1]", "['icmp']");
    let mut out = ports_rules();
    for icmp in ["icmp", "notICMP"] {
        out.push(rule(
            &format!("!has(self.{icmp}) || (has(self.protocol) && {is_icmp})"),
            &format!("{icmp} needs protocol ICMP or ICMPv6"),
        ));
    }
    out.push(rule(
        &format!(
            "!(has(self.icmp) || has(self.notICMP)) || !has(self.ipVersion) || !has(self.protocol) || !{is_icmp} || self.ipVersion == ({icmp4} ? 4 : 6)"
        ),
        "ipVersion: protocol ICMP is for IPv4 and ICMPv6 for IPv6",
    ));
    out.push(rule(
        "!has(self.http)",
        &format!("http: {UNSUPPORTED} (a rule without it would match every HTTP request)"),
    ));
    out.push(rule(
        "!has(self.protocol) || !has(self.notProtocol) || string(self.protocol).lowerAscii() != string(self.notProtocol).lowerAscii()",
        "notProtocol is also the rule's protocol; the rule could never match",
    ));
    let fam = family_cel("n");
    let nets_ok = |end: &str, list: &str| {
        format!(
            "(!has(self.{end}) || !has(self.{end}.{list}) || self.{end}.{list}.all(n, !(isIP(n) || isCIDR(n)) || {fam} == self.ipVersion))"
        )
    };
    out.push(rule(
        &format!(
            "!has(self.ipVersion) || ({} && {} && {} && {})",
            nets_ok("source", "nets"),
            nets_ok("source", "notNets"),
            nets_ok("destination", "nets"),
            nets_ok("destination", "notNets"),
        ),
        "a net is not of the rule's ipVersion",
    ));
    out
}

/// The rules of a policy's spec: rules only for the directions it governs.
pub fn policy_spec_rules() -> Vec<Value> {
    ["Ingress", "Egress"]
        .into_iter()
        .map(|t| {
            let list = t.to_ascii_lowercase();
            rule(
                &format!(
                    "!has(self.types) || size(self.types) == 0 || !has(self.{list}) || size(self.{list}) == 0 || '{t}' in self.types"
                ),
                &format!(
                    "{list}: rules are given but spec.types leaves out {t}, so they would never apply"
                ),
            )
        })
        .collect()
}

/// What Tartan says of a Calico field it does not implement.
pub const UNSUPPORTED: &str = "Tartan does not support it; remove the field";

/// The rules of both policy kinds' specs on Calico fields Tartan does
/// not implement: declared so that they are stored rather than dropped,
/// and refused unless their value changes nothing.
pub fn policy_spec_unsupported_rules() -> Vec<Value> {
    vec![rule(
        "!has(self.tier) || self.tier == 'default'",
        &format!("tier: only the tier default exists; {UNSUPPORTED} or set it to default"),
    )]
}

/// The rules of a GlobalNetworkPolicy's spec on Calico's host endpoint
/// fields: `preDNAT: true`, `doNotTrack: true` and `applyOnForward: true`
/// are refused (false is what a policy without them does).
pub fn global_policy_spec_rules() -> Vec<Value> {
    let mut out = policy_spec_rules();
    out.extend(policy_spec_unsupported_rules());
    for field in ["preDNAT", "doNotTrack", "applyOnForward"] {
        out.push(rule(
            &format!("!has(self.{field}) || !self.{field}"),
            &format!(
                "{field}: true is not supported by Tartan; remove the field or set it to false"
            ),
        ));
    }
    out
}

/// The spec rules of a NetworkPolicy.
pub fn namespaced_policy_spec_rules() -> Vec<Value> {
    let mut out = policy_spec_rules();
    out.extend(policy_spec_unsupported_rules());
    out
}

/// The rules of a rule's source or destination on Calico's matches
/// Tartan does not implement.
pub fn entity_rule_rules() -> Vec<Value> {
    vec![rule(
        "!has(self.services)",
        &format!("services: {UNSUPPORTED} (a rule without it would match every endpoint)"),
    )]
}

/// A `serviceAccounts` match matches on something: names or a selector.
pub fn service_account_match_rules() -> Vec<Value> {
    vec![rule(
        "(has(self.names) && size(self.names) > 0) || (has(self.selector) && self.selector != '')",
        "neither names nor selector is given; give one, or remove serviceAccounts",
    )]
}

/// A policy's protocol: a name or a number 1 to 255.
pub fn protocol_rules() -> Value {
    json!([rule(
        "type(self) == int ? (self >= 1 && self <= 255) : (string(self).lowerAscii() in ['tcp', 'udp', 'icmp', 'icmpv6', 'sctp', 'udplite'] || (string(self).matches('^[0-9]+$') && int(string(self)) >= 1 && int(string(self)) <= 255))",
        "is not a protocol; allowed TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1 to 255",
    )])
}

/// A policy's port: a number, a range `lo:hi` or a port name.
pub fn port_rules() -> Value {
    json!([rule(
        "type(self) == int ? (self >= 1 && self <= 65535) \
         : string(self).matches('^[0-9]+$') ? (int(string(self)) >= 1 && int(string(self)) <= 65535) \
         : string(self).matches('^[0-9]+:[0-9]+$') ? (int(string(self).split(':')[0]) >= 1 && int(string(self).split(':')[1]) <= 65535 && int(string(self).split(':')[0]) <= int(string(self).split(':')[1])) \
         : (size(string(self)) <= 15 && string(self).matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && string(self).matches('[a-z]') && !string(self).contains('--'))",
        "is not a port; allowed a number 1 to 65535, a range such as \"8000:8080\" (lower first), or a port name (at most 15 lowercase letters, digits and '-')",
    )])
}
