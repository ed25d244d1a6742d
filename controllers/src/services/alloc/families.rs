//! A Service's `ipFamilyPolicy` and `ipFamilies` as the API server fills
//! them in on a single-stack IPv4 cluster (Tartan's service range is one
//! IPv4 network), once its ClusterIP is known:
//!
//! - the policy left out is the stored one's on an update, else
//!   `RequireDualStack` for a headless Service without a selector, else
//!   `SingleStack`;
//! - the families left out are those of the ClusterIPs, else IPv4;
//! - a headless Service without a selector may name both families (it has
//!   no address of its own): unless it is `SingleStack`, IPv6 is added;
//! - any other Service asking for dual-stack or for IPv6 is refused: the
//!   cluster has no IPv6 service range. `PreferDualStack` stays one family.
//!
//! ExternalName Services have neither field (the caller skips them).

use k8s_openapi::api::core::v1::ServiceSpec;

const V4: &str = "IPv4";
const V6: &str = "IPv6";

/// Fills in `sp`'s family fields, `old` being its stored spec on an
/// update; a problem for each family the cluster cannot serve, as
/// `(field, why)`.
pub(super) fn fill(sp: &mut ServiceSpec, old: Option<&ServiceSpec>) -> Vec<(String, String)> {
    let headless = sp.cluster_ip.as_deref() == Some("None");
    let selectorless = sp.selector.as_ref().is_none_or(|s| s.is_empty());
    if sp.ip_family_policy.is_none() {
        sp.ip_family_policy = Some(match old.and_then(|o| o.ip_family_policy.clone()) {
            Some(p) => p,
            None if headless && selectorless => "RequireDualStack".into(),
            None => "SingleStack".into(),
        });
    }
    let policy = sp.ip_family_policy.clone().unwrap_or_default();
    let mut problems = Vec::new();
    let families = sp.ip_families.get_or_insert_with(Vec::new);
    // Families follow the addresses given (validation has checked that
    // the ones named agree with them).
    for (i, ip) in sp.cluster_ips.iter().flatten().enumerate() {
        if ip == "None" {
            break;
        }
        if i >= families.len() {
            match ip.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => families.push(V4.into()),
                _ => problems.push((
                    format!("spec.clusterIPs[{i}]"),
                    format!("{ip}: {V6} is not configured on this cluster"),
                )),
            }
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    if headless && selectorless {
        if families.is_empty() {
            families.push(V4.into());
        }
        if families.len() < 2 && policy != "SingleStack" {
            let other = if families[0] == V4 { V6 } else { V4 };
            families.push(other.into());
        }
        return problems;
    }
    if policy == "RequireDualStack" {
        problems.push((
            "spec.ipFamilyPolicy".into(),
            "RequireDualStack: this cluster is not configured for dual-stack services".into(),
        ));
    }
    for (i, f) in families.iter().enumerate() {
        if f != V4 {
            problems.push((
                format!("spec.ipFamilies[{i}]"),
                format!("{f}: not configured on this cluster"),
            ));
        }
    }
    if families.is_empty() {
        families.push(V4.into());
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn spec(v: Value) -> ServiceSpec {
        serde_json::from_value(v).unwrap()
    }

    fn filled(v: Value, old: Option<Value>) -> (ServiceSpec, Vec<(String, String)>) {
        let mut sp = spec(v);
        let old = old.map(spec);
        let p = fill(&mut sp, old.as_ref());
        (sp, p)
    }

    fn fields(sp: &ServiceSpec) -> (Option<&str>, Vec<&str>) {
        (
            sp.ip_family_policy.as_deref(),
            sp.ip_families
                .iter()
                .flatten()
                .map(String::as_str)
                .collect(),
        )
    }

    #[test]
    fn a_service_is_single_stack_ipv4_unless_it_says_otherwise() {
        let (sp, p) = filled(
            json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"]}),
            None,
        );
        assert!(p.is_empty());
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
        // Headless with a selector: single-stack too.
        let (sp, _) = filled(
            json!({"clusterIP": "None", "clusterIPs": ["None"], "selector": {"a": "b"}}),
            None,
        );
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
        // PreferDualStack on a single-stack cluster keeps one family.
        let (sp, p) = filled(
            json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"], "ipFamilyPolicy": "PreferDualStack"}),
            None,
        );
        assert!(p.is_empty());
        assert_eq!(fields(&sp), (Some("PreferDualStack"), vec!["IPv4"]));
    }

    #[test]
    fn a_headless_service_without_a_selector_names_both_families() {
        let (sp, p) = filled(json!({"clusterIP": "None", "clusterIPs": ["None"]}), None);
        assert!(p.is_empty());
        assert_eq!(
            fields(&sp),
            (Some("RequireDualStack"), vec!["IPv4", "IPv6"])
        );
        let (sp, _) = filled(
            json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilyPolicy": "SingleStack"}),
            None,
        );
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
    }

    #[test]
    fn an_update_keeps_the_stored_policy() {
        let old = json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"]});
        let (sp, _) = filled(
            json!({"clusterIP": "None", "clusterIPs": ["None"]}),
            Some(old),
        );
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
    }

    #[test]
    fn dual_stack_and_ipv6_are_refused_on_a_single_stack_cluster() {
        let (_, p) = filled(
            json!({"clusterIP": "10.96.0.2", "clusterIPs": ["10.96.0.2"], "ipFamilyPolicy": "RequireDualStack"}),
            None,
        );
        assert_eq!(
            p,
            vec![(
                "spec.ipFamilyPolicy".to_string(),
                "RequireDualStack: this cluster is not configured for dual-stack services"
                    .to_string()
            )]
        );
        let (_, p) = filled(json!({"ipFamilies": ["IPv6"]}), None);
        assert_eq!(
            p,
            vec![(
                "spec.ipFamilies[0]".to_string(),
                "IPv6: not configured on this cluster".to_string()
            )]
        );
        let (_, p) = filled(json!({"clusterIPs": ["fd00::10"]}), None);
        assert_eq!(p[0].0, "spec.clusterIPs[0]");
    }
}
