//! BGPFilter: import and export rules for BGP sessions.

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, parse_network};
use super::community::Community;
use super::schema_rules;

/// What a matching rule does with the route.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum FilterAction {
    Accept,
    Reject,
}

/// How a rule's `cidr` is compared with a route's prefix: `Equal` /
/// `NotEqual` the very prefix, `In` / `NotIn` within it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum MatchOperator {
    Equal,
    NotEqual,
    In,
    NotIn,
}

/// Where a route came from. `RemotePeers`: learned from a BGP peer (not
/// this node's own blocks).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum RouteSource {
    RemotePeers,
}

/// Import and export rules, per address family, for the BGP sessions of
/// the BGPPeers that name this filter. Rules are tried in order; the first
/// that matches decides. Routes no rule matches are accepted.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "BGPFilter",
    plural = "bgpfilters",
    root = "BgpFilter",
    derive = "PartialEq",
    doc = "Import and export rules for BGP sessions."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = filter_spec_rules()))]
pub struct BgpFilterSpec {
    /// Rules for IPv4 routes sent to peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub export_v4: Vec<BgpFilterRule>,
    /// Rules for IPv4 routes learned from peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub import_v4: Vec<BgpFilterRule>,
    /// Rules for IPv6 routes sent to peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub export_v6: Vec<BgpFilterRule>,
    /// Rules for IPv6 routes learned from peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::bounded_list)]
    pub import_v6: Vec<BgpFilterRule>,
}

/// One filter rule: all the given conditions must match.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.cidr) || has(self.matchOperator)", "message": "matchOperator is required when cidr is set"},
    {"rule": "!has(self.matchOperator) || has(self.cidr)", "message": "matchOperator is set without cidr; give the cidr it compares with"},
    {"rule": "!has(self.prefixLength) || has(self.cidr)", "message": "prefixLength: cidr is required when prefixLength is set"},
    {
        "rule": "!has(self.cidr) || !isCIDR(self.cidr) || !has(self.prefixLength) || !has(self.prefixLength.max) || self.prefixLength.max >= cidr(self.cidr).prefixLength()",
        "message": "prefixLength.max is shorter than the cidr's prefix; no route within it matches"
    },
    {"rule": "!has(self.communities) || self.action == 'Accept'", "message": "communities: only an Accept rule can change communities"},
    {"rule": "!has(self.asPathPrepend) || size(self.asPathPrepend) == 0 || self.action == 'Accept'", "message": "asPathPrepend: only an Accept rule can prepend to the AS path"},
    {"rule": "!has(self.interface)", "message": "interface: Tartan does not match routes by interface; remove the field (a rule without it would match every route)"}
]))]
pub struct BgpFilterRule {
    /// The prefix routes are compared with; of the list's address family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::network)]
    pub cidr: Option<String>,
    /// Match only routes whose prefix length is in this range; needs
    /// cidr (as in Calico, it narrows the cidr's pattern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_length: Option<PrefixLength>,
    /// How cidr is compared; required with cidr.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_operator: Option<MatchOperator>,
    /// Where the route came from. Default: anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<RouteSource>,
    /// Calico's match on the interface a route leads to: refused. It is
    /// declared so that an API server does not drop it unnoticed (a
    /// rule without it matches every route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// Accept or Reject the route.
    pub action: FilterAction,
    /// Communities to add to or remove from accepted routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communities: Option<CommunityChanges>,
    /// AS numbers to prepend to the AS path of accepted exported routes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::as_number_list)]
    pub as_path_prepend: Vec<u32>,
}

/// A range of prefix lengths, bounds included.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.min) || !has(self.max) || self.min <= self.max", "message": "min is greater than max"}
]))]
pub struct PrefixLength {
    /// Default: the rule's cidr prefix length. A shorter min is taken as
    /// that length (as Calico does), since no route within the cidr is
    /// shorter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 128))]
    pub min: Option<u8>,
    /// Default: 32 for IPv4, 128 for IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 128))]
    pub max: Option<u8>,
}

impl PrefixLength {
    /// `cidr_len` is the rule's cidr prefix length: a min below it is
    /// raised to it (as Calico does), a max below it matches nothing.
    fn check(&self, f: &str, family: &str, max_len: u8, cidr_len: u8, p: &mut Problems) {
        for (name, v) in [("min", self.min), ("max", self.max)] {
            if let Some(v) = v
                && v > max_len
            {
                p.add(
                    format!("{f}.prefixLength.{name}"),
                    format!("{v} is out of range for {family}; allowed 0 to {max_len}"),
                );
            }
        }
        if let Some(hi) = self.max
            && hi < cidr_len
        {
            p.add(
                format!("{f}.prefixLength.max"),
                format!(
                    "{hi} is shorter than the cidr's prefix /{cidr_len}; no route within it matches"
                ),
            );
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max)
            && lo > hi
        {
            p.add(
                format!("{f}.prefixLength"),
                format!("min {lo} is greater than max {hi}"),
            );
        }
    }
}

impl BgpFilterRule {
    /// The prefix lengths the rule matches, bounds included: `prefixLength`
    /// with its min raised to the cidr's prefix length and its max
    /// defaulting to the family's (Calico's reading); `None` without
    /// prefixLength or a readable cidr.
    pub fn prefix_lengths(&self) -> Option<(u8, u8)> {
        let pl = self.prefix_length.as_ref()?;
        let net = parse_network(self.cidr.as_deref()?).ok()?;
        let lo = pl.min.unwrap_or(0).max(net.prefix_len());
        Some((lo, pl.max.unwrap_or(net.max_prefix_len())))
    }
}

/// Community values (`AA:NN`, `A:B:C` or a well-known name) to add and
/// remove.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommunityChanges {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::community_list)]
    pub add: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::community_list)]
    pub remove: Vec<String>,
}

/// The rules on each list of a filter: its family, and no AS path
/// prepending on import.
fn filter_spec_rules() -> Vec<serde_json::Value> {
    [
        ("exportV4", 4, true),
        ("importV4", 4, false),
        ("exportV6", 6, true),
        ("importV6", 6, false),
    ]
    .into_iter()
    .flat_map(|(list, v, export)| schema_rules::filter_list_rules(list, v, export))
    .collect()
}

impl BgpFilterSpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        for (list, rules, v6, export) in [
            ("exportV4", &self.export_v4, false, true),
            ("importV4", &self.import_v4, false, false),
            ("exportV6", &self.export_v6, true, true),
            ("importV6", &self.import_v6, true, false),
        ] {
            for (i, r) in rules.iter().enumerate() {
                r.check(&format!("spec.{list}[{i}]"), v6, export, &mut p);
            }
        }
        p.0
    }
}

impl BgpFilterRule {
    fn check(&self, f: &str, v6: bool, export: bool, p: &mut Problems) {
        let (family, max_len) = if v6 { ("IPv6", 128) } else { ("IPv4", 32) };
        let mut min_len = 0;
        if let Some(c) = &self.cidr {
            let field = format!("{f}.cidr");
            if let Some(net) = p.take(&field, parse_network(c)) {
                if matches!(net, IpNet::V6(_)) != v6 {
                    p.add(
                        field,
                        format!("{c:?} is not {family}; this list holds {family} rules only"),
                    );
                } else {
                    min_len = net.prefix_len();
                }
            }
            if self.match_operator.is_none() {
                p.add(
                    format!("{f}.matchOperator"),
                    "missing; a rule with cidr needs Equal, NotEqual, In or NotIn",
                );
            }
        } else if self.match_operator.is_some() {
            p.add(
                format!("{f}.matchOperator"),
                "is set without cidr; give the cidr it compares with",
            );
        }
        if self.interface.is_some() {
            p.add(
                format!("{f}.interface"),
                "Tartan does not match routes by interface; remove the field (a rule without it would match every route)",
            );
        }
        if let Some(pl) = &self.prefix_length {
            if self.cidr.is_none() {
                p.add(
                    format!("{f}.prefixLength"),
                    "cidr is required when prefixLength is set (prefixLength narrows the cidr's match)",
                );
            }
            pl.check(f, family, max_len, min_len, p);
        }
        if let Some(c) = &self.communities {
            if self.action != FilterAction::Accept {
                p.add(
                    format!("{f}.communities"),
                    "only an Accept rule can change communities",
                );
            }
            for (name, vals) in [("add", &c.add), ("remove", &c.remove)] {
                for (j, v) in vals.iter().enumerate() {
                    p.take(
                        &format!("{f}.communities.{name}[{j}]"),
                        v.parse::<Community>(),
                    );
                }
            }
        }
        if !self.as_path_prepend.is_empty() {
            let field = format!("{f}.asPathPrepend");
            if !export {
                p.add(&field, "only export rules can prepend to the AS path");
            } else if self.action != FilterAction::Accept {
                p.add(&field, "only an Accept rule can prepend to the AS path");
            }
            for (j, asn) in self.as_path_prepend.iter().enumerate() {
                p.take(
                    &format!("{field}[{j}]"),
                    super::common::check_as_number(*asn),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(yaml: &str) -> BgpFilterRule {
        serde_saphyr::from_str(yaml).unwrap()
    }

    /// As Calico's BIRD template: min is raised to the cidr's length, max
    /// defaults to the family's.
    #[test]
    fn a_short_min_is_taken_as_the_cidrs_length() {
        let r = rule(
            "{cidr: 10.244.0.0/16, matchOperator: In, prefixLength: {min: 8}, action: Accept}",
        );
        assert_eq!(r.prefix_lengths(), Some((16, 32)));
        let spec = BgpFilterSpec {
            export_v4: vec![r],
            ..Default::default()
        };
        assert!(spec.check().is_empty(), "{:?}", spec.check());
        let r = rule(
            "{cidr: 'fd00::/48', matchOperator: NotIn, prefixLength: {min: 56, max: 64}, action: Reject}",
        );
        assert_eq!(r.prefix_lengths(), Some((56, 64)));
        let r =
            rule("{cidr: 'fd00::/48', matchOperator: In, prefixLength: {max: 64}, action: Reject}");
        assert_eq!(r.prefix_lengths(), Some((48, 64)));
        assert_eq!(
            rule("{cidr: 10.0.0.0/8, matchOperator: In, action: Accept}").prefix_lengths(),
            None
        );
    }

    #[test]
    fn prefix_length_needs_a_cidr() {
        let spec = BgpFilterSpec {
            import_v6: vec![rule("{prefixLength: {min: 120}, action: Reject}")],
            ..Default::default()
        };
        let p = spec.check();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "spec.importV6[0].prefixLength");
        assert!(p[0].1.contains("cidr is required"), "{p:?}");
    }
}
