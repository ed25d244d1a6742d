//! Matching one request against one grant, as the API server's RBAC
//! authorizer matches a rule; and a grant split into its single
//! (verb, group, resource) parts, so that each can be checked for use.

use super::{Grant, Rule};
use crate::request::Attributes;

const ALL: &str = "*";

impl Grant {
    /// Whether this grant alone allows `attrs`.
    pub fn allows(&self, attrs: &Attributes) -> bool {
        let r = &self.rule;
        if !has(&r.verbs, &attrs.verb) {
            return false;
        }
        let Some(res) = &attrs.resource else {
            // Non-resource URLs are granted only cluster-wide.
            return self.scope.is_none() && url_matches(&r.non_resource_urls, &attrs.path);
        };
        if let Some(ns) = &self.scope
            && res.namespace.as_deref() != Some(ns.as_str())
        {
            return false;
        }
        has(&r.api_groups, &res.group)
            && resource_matches(&r.resources, &res.combined(), res.subresource.as_deref())
            && (r.resource_names.is_empty()
                || res
                    .name
                    .as_ref()
                    .is_some_and(|n| r.resource_names.contains(n)))
    }

    /// This grant as one grant per verb, API group and resource (or URL),
    /// each keeping the grant's names, scope and role.
    pub fn atoms(&self) -> Vec<Grant> {
        let r = &self.rule;
        let one =
            |verb: &str, group: Option<&str>, resource: Option<&str>, url: Option<&str>| Grant {
                rule: Rule {
                    verbs: vec![verb.to_string()],
                    api_groups: group.map(|g| vec![g.to_string()]).unwrap_or_default(),
                    resources: resource.map(|x| vec![x.to_string()]).unwrap_or_default(),
                    resource_names: r.resource_names.clone(),
                    non_resource_urls: url.map(|u| vec![u.to_string()]).unwrap_or_default(),
                },
                scope: self.scope.clone(),
                role: self.role.clone(),
            };
        let mut out = Vec::new();
        for verb in &r.verbs {
            for url in &r.non_resource_urls {
                out.push(one(verb.as_str(), None, None, Some(url.as_str())));
            }
            for group in &r.api_groups {
                for resource in &r.resources {
                    out.push(one(
                        verb.as_str(),
                        Some(group.as_str()),
                        Some(resource.as_str()),
                        None,
                    ));
                }
            }
        }
        out
    }
}

fn has(list: &[String], want: &str) -> bool {
    list.iter().any(|x| x == ALL || x == want)
}

/// `combined` is `resource` or `resource/subresource`; a rule names it
/// exactly, or `*`, or `*/subresource`.
fn resource_matches(rule: &[String], combined: &str, subresource: Option<&str>) -> bool {
    rule.iter().any(|x| {
        x == ALL || x == combined || subresource.is_some_and(|s| x.strip_prefix("*/") == Some(s))
    })
}

/// A rule's URL is exact, `*`, or a prefix ending in `*`.
fn url_matches(rule: &[String], path: &str) -> bool {
    rule.iter().any(|u| {
        u == ALL
            || u == path
            || u.strip_suffix('*')
                .is_some_and(|prefix| path.starts_with(prefix))
    })
}

/// Each atom of `grants` (see [`Grant::atoms`]) with how many of
/// `requests` it alone allows, in the order of the grants.
pub fn coverage<'a>(
    grants: &[Grant],
    requests: impl IntoIterator<Item = &'a Attributes> + Clone,
) -> Vec<(Grant, usize)> {
    grants
        .iter()
        .flat_map(Grant::atoms)
        .map(|atom| {
            let used = requests
                .clone()
                .into_iter()
                .filter(|a| atom.allows(a))
                .count();
            (atom, used)
        })
        .collect()
}
