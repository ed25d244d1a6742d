//! A Service's `ipFamilyPolicy` and `ipFamilies` as the API server fills
//! them in (`initIPFamilyFields`), once its ClusterIPs are known, on a
//! cluster with an IPv4 service range and, when dual-stack, an IPv6 one
//! (IPv4 is the primary family: the lab's first range):
//!
//! - the policy left out is the stored one's on an update, else
//!   `RequireDualStack` for a headless Service without a selector, else
//!   `SingleStack`;
//! - an update to `SingleStack` that leaves two ClusterIPs or families
//!   as stored drops the second (a downgrade, which frees its address);
//!   any other policy may not drop one;
//! - `SingleStack` with two ClusterIPs or families given is refused;
//! - the families left out are those of the ClusterIPs; a ClusterIP of
//!   a family the cluster has no range for is refused;
//! - a family named must be `IPv4` or `IPv6`, whatever the Service;
//! - a headless Service without a selector may name both families (it has
//!   no address of its own): unless it is `SingleStack`, the other is
//!   added, on any cluster;
//! - `RequireDualStack` on a single-stack cluster, or a family it has no
//!   range for, is refused; else the families are the primary one when
//!   none is given, and with any policy but `SingleStack` on a dual-stack
//!   cluster the other is added (an update of a single-stack Service to
//!   `PreferDualStack` or `RequireDualStack` gets a second ClusterIP);
//! - a `PreferDualStack` Service updated with its ClusterIPs and
//!   families as stored (and stored `PreferDualStack`) is left as it is
//!   (never upgraded or downgraded because the cluster's families
//!   changed).
//!
//! ExternalName Services have neither field (the caller skips them).

use k8s_openapi::api::core::v1::ServiceSpec;

const V4: &str = "IPv4";
const V6: &str = "IPv6";

/// The family of an address as `ipFamilies` names it.
fn family_of(ip: &str) -> Option<&'static str> {
    match ip.parse::<std::net::IpAddr>().ok()? {
        std::net::IpAddr::V4(_) => Some(V4),
        std::net::IpAddr::V6(_) => Some(V6),
    }
}

/// `ipFamilies[i]` when it is neither IPv4 nor IPv6, as the API server
/// refuses it (with any policy, headless or not), as `(field, why)`.
pub(super) fn unsupported_family(i: usize, f: &str) -> Option<(String, String)> {
    (f != V4 && f != V6).then(|| {
        (
            format!("spec.ipFamilies[{i}]"),
            format!("Unsupported value: {f:?}: supported values: \"{V4}\", \"{V6}\""),
        )
    })
}

/// `clusterIPs[i]`, `ip`, when it is not of the family `named` (IPv4 or
/// IPv6) at the same index of `ipFamilies`, as `(field, why)`.
pub(super) fn family_mismatch(i: usize, ip: &str, named: &str) -> Option<(String, String)> {
    let f = family_of(ip)?;
    (f != named && (named == V4 || named == V6)).then(|| {
        (
            format!("spec.clusterIPs[{i}]"),
            format!("{ip}: expected an {named} value as indicated by `ipFamilies[{i}]`"),
        )
    })
}

fn ips(sp: &ServiceSpec) -> &[String] {
    sp.cluster_ips.as_deref().unwrap_or_default()
}

fn families(sp: &ServiceSpec) -> &[String] {
    sp.ip_families.as_deref().unwrap_or_default()
}

/// An update of a `PreferDualStack` Service that keeps its type, policy,
/// ClusterIPs and families: nothing to fill in or check. The stored one
/// must say `PreferDualStack`: one stored without a policy is read by the
/// API server as `SingleStack` (`defaultOnRead`) before it compares them.
fn unchanged_prefer_dual_stack(sp: &ServiceSpec, old: Option<&ServiceSpec>) -> bool {
    let Some(old) = old else { return false };
    let prefer = |p: Option<&str>| p == Some("PreferDualStack");
    let type_ = |s: &ServiceSpec| s.type_.clone().unwrap_or_else(|| "ClusterIP".into());
    prefer(sp.ip_family_policy.as_deref())
        && prefer(old.ip_family_policy.as_deref())
        && type_(sp) == type_(old)
        && ips(sp) == ips(old)
        && families(sp) == families(old)
}

/// Fills in `sp`'s family fields, `old` being its stored spec on an
/// update, on a cluster with an IPv6 service range when `dual`; a
/// problem for each rule broken, as `(field, why)`.
pub(super) fn fill(
    sp: &mut ServiceSpec,
    old: Option<&ServiceSpec>,
    dual: bool,
) -> Vec<(String, String)> {
    if unchanged_prefer_dual_stack(sp, old) {
        return vec![];
    }
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
    let single = policy == "SingleStack";
    let configured = |f: &str| f == V4 || (dual && f == V6);
    let mut problems = Vec::new();
    let mut bad_policy = |why: &str| {
        problems.push((
            "spec.ipFamilyPolicy".to_string(),
            format!("{policy}: {why}"),
        ));
    };
    if let Some(old) = old {
        if single {
            // Leaving both as stored while asking for one family is a
            // downgrade: the primary stays (it is immutable).
            if ips(sp) == ips(old)
                && let Some(v) = sp.cluster_ips.as_mut()
            {
                v.truncate(1);
            }
            if families(sp) == families(old)
                && let Some(v) = sp.ip_families.as_mut()
            {
                v.truncate(1);
            }
        } else {
            if !ips(sp).is_empty() && ips(sp).len() < ips(old).len() {
                bad_policy("must be 'SingleStack' to release the secondary cluster IP");
            }
            if !families(sp).is_empty() && families(sp).len() < families(old).len() {
                bad_policy("must be 'SingleStack' to release the secondary IP family");
            }
        }
    }
    if single {
        if ips(sp).len() == 2 {
            bad_policy(
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
            );
        }
        if families(sp).len() == 2 {
            bad_policy(
                "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            );
        }
    }
    // The primary family, and the second while it is stored, may not
    // change (a Service with an address of its own).
    let addressed = |s: &ServiceSpec| {
        s.cluster_ip.as_deref() != Some("None") && s.type_.as_deref() != Some("ExternalName")
    };
    if let Some(old) = old.filter(|o| addressed(o) && addressed(sp)) {
        for (i, (new, was)) in families(sp).iter().zip(families(old)).enumerate() {
            if new != was {
                problems.push((
                    format!("spec.ipFamilies[{i}]"),
                    format!("{new}: may not change once set"),
                ));
            }
        }
    }
    // Families follow the addresses given, which must agree with the
    // families named (as the file gives them or the stored ones carried
    // over).
    let given: Vec<String> = ips(sp).to_vec();
    let fams = sp.ip_families.get_or_insert_with(Vec::new);
    for (i, ip) in given.iter().enumerate() {
        if ip == "None" {
            break;
        }
        if let Some(named) = fams.get(i) {
            problems.extend(family_mismatch(i, ip, named));
            continue;
        }
        match family_of(ip) {
            Some(f) if configured(f) => fams.push(f.into()),
            f => problems.push((
                format!("spec.clusterIPs[{i}]"),
                format!(
                    "{ip}: {} is not configured on this cluster",
                    f.unwrap_or("unknown")
                ),
            )),
        }
    }
    for (i, f) in fams.iter().enumerate() {
        problems.extend(unsupported_family(i, f));
        if fams[..i].contains(f) {
            problems.push((
                format!("spec.ipFamilies[{i}]"),
                format!("{f}: duplicate value"),
            ));
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    let other = |f: &str| if f == V4 { V6 } else { V4 };
    if headless && selectorless {
        if fams.is_empty() {
            fams.push(V4.into());
        }
        if fams.len() < 2 && !single {
            let o = other(&fams[0]);
            fams.push(o.into());
        }
        return problems;
    }
    if policy == "RequireDualStack" && !dual {
        problems.push((
            "spec.ipFamilyPolicy".into(),
            "RequireDualStack: this cluster is not configured for dual-stack services".into(),
        ));
    }
    for (i, f) in fams.iter().enumerate() {
        if !configured(f) {
            problems.push((
                format!("spec.ipFamilies[{i}]"),
                format!("{f}: not configured on this cluster"),
            ));
        }
    }
    if !problems.is_empty() {
        return problems;
    }
    if fams.is_empty() {
        fams.push(V4.into());
    }
    if !single && fams.len() == 1 && dual {
        let o = other(&fams[0]);
        fams.push(o.into());
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
        let p = fill(&mut sp, old.as_ref(), false);
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
    fn a_family_other_than_ipv4_or_ipv6_is_refused_in_every_case() {
        let unsupported = |f: &str| {
            vec![(
                "spec.ipFamilies[0]".to_string(),
                format!("Unsupported value: \"{f}\": supported values: \"IPv4\", \"IPv6\""),
            )]
        };
        // Headless without a selector (no address of its own), given or
        // carried over from the stored Service.
        let (_, p) = filled(
            json!({"clusterIP": "None", "clusterIPs": ["None"], "ipFamilies": ["IPv5"]}),
            None,
        );
        assert_eq!(p, unsupported("IPv5"));
        // With an address, on either cluster.
        let (_, p) = filled(json!({"ipFamilies": ["ipv4"]}), None);
        assert_eq!(p, unsupported("ipv4"));
        let (_, p) = dual(json!({"ipFamilies": ["IPv5"]}), None);
        assert_eq!(p, unsupported("IPv5"));
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

    fn dual(v: Value, old: Option<Value>) -> (ServiceSpec, Vec<(String, String)>) {
        let mut sp = spec(v);
        let old = old.map(spec);
        let p = fill(&mut sp, old.as_ref(), true);
        (sp, p)
    }

    #[test]
    fn on_a_dual_stack_cluster_the_policy_decides_the_families() {
        // Left out: single-stack, of the primary family.
        let (sp, p) = dual(json!({}), None);
        assert!(p.is_empty());
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
        // Dual-stack policies get both, primary first, or in the order
        // the families or addresses give.
        for policy in ["PreferDualStack", "RequireDualStack"] {
            let (sp, p) = dual(json!({"ipFamilyPolicy": policy}), None);
            assert!(p.is_empty(), "{p:?}");
            assert_eq!(fields(&sp), (Some(policy), vec!["IPv4", "IPv6"]));
            let (sp, _) = dual(
                json!({"ipFamilyPolicy": policy, "ipFamilies": ["IPv6"]}),
                None,
            );
            assert_eq!(fields(&sp), (Some(policy), vec!["IPv6", "IPv4"]));
            let (sp, _) = dual(
                json!({"ipFamilyPolicy": policy, "clusterIP": "fd00:10:96::5", "clusterIPs": ["fd00:10:96::5"]}),
                None,
            );
            assert_eq!(fields(&sp), (Some(policy), vec!["IPv6", "IPv4"]));
        }
        // IPv6 alone.
        let (sp, p) = dual(json!({"ipFamilies": ["IPv6"]}), None);
        assert!(p.is_empty());
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv6"]));
        // A headless Service without a selector: both, as before.
        let (sp, _) = dual(json!({"clusterIP": "None", "clusterIPs": ["None"]}), None);
        assert_eq!(
            fields(&sp),
            (Some("RequireDualStack"), vec!["IPv4", "IPv6"])
        );
    }

    #[test]
    fn single_stack_with_two_addresses_or_families_is_refused() {
        let (_, p) = dual(
            json!({"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4", "IPv6"],
                   "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5", "fd00:10:96::5"]}),
            None,
        );
        let why: Vec<&str> = p
            .iter()
            .map(|(f, w)| {
                assert_eq!(f, "spec.ipFamilyPolicy");
                w.as_str()
            })
            .collect();
        assert_eq!(
            why,
            vec![
                "SingleStack: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
                "SingleStack: must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
            ]
        );
    }

    #[test]
    fn upgrade_and_downgrade_on_update() {
        let single = json!({"ipFamilyPolicy": "SingleStack", "ipFamilies": ["IPv4"],
                            "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"]});
        // Upgraded: the second family is added (its address is then
        // allocated).
        let mut up = single.clone();
        up["ipFamilyPolicy"] = json!("RequireDualStack");
        let (sp, p) = dual(up, Some(single.clone()));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(
            fields(&sp),
            (Some("RequireDualStack"), vec!["IPv4", "IPv6"])
        );
        assert_eq!(sp.cluster_ips, Some(vec!["10.96.0.5".to_string()]));
        // Downgraded with both left as stored: the second goes.
        let both = json!({"ipFamilyPolicy": "RequireDualStack", "ipFamilies": ["IPv4", "IPv6"],
                          "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5", "fd00:10:96::5"]});
        let mut down = both.clone();
        down["ipFamilyPolicy"] = json!("SingleStack");
        let (sp, p) = dual(down, Some(both.clone()));
        assert!(p.is_empty(), "{p:?}");
        assert_eq!(fields(&sp), (Some("SingleStack"), vec!["IPv4"]));
        assert_eq!(sp.cluster_ips, Some(vec!["10.96.0.5".to_string()]));
        // Dropping the second without SingleStack is refused.
        let mut dropped = both.clone();
        dropped["clusterIPs"] = json!(["10.96.0.5"]);
        dropped["ipFamilies"] = json!(["IPv4"]);
        let (_, p) = dual(dropped, Some(both.clone()));
        assert_eq!(
            p,
            vec![
                (
                    "spec.ipFamilyPolicy".to_string(),
                    "RequireDualStack: must be 'SingleStack' to release the secondary cluster IP"
                        .to_string()
                ),
                (
                    "spec.ipFamilyPolicy".to_string(),
                    "RequireDualStack: must be 'SingleStack' to release the secondary IP family"
                        .to_string()
                ),
            ]
        );
        // A PreferDualStack Service updated as stored stays single-stack
        // (the cluster became dual-stack after it was made).
        let prefer = json!({"ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv4"],
                            "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"]});
        let (sp, p) = dual(prefer.clone(), Some(prefer));
        assert!(p.is_empty());
        assert_eq!(fields(&sp), (Some("PreferDualStack"), vec!["IPv4"]));
    }
}
