//! A Service: its type, cluster and external addresses, selector and
//! ports, with the API server's rules for each.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Service, ServicePort};

use super::fields::{label_map, number_or_name, protocol};
use crate::resources::common::{Problems, dns_label, dns_subdomain};
use crate::validate::names::{cidr, ip, non_special_ip, one_of, port_number, qualified_name};

pub(super) fn check(s: &Service, p: &mut Problems) {
    let Some(spec) = &s.spec else {
        return;
    };
    let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
    if let Err(e) = one_of(
        kind,
        &["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"],
    ) {
        p.add("spec.type", e);
    }
    // Headless by `clusterIP`, or by `clusterIPs[0]` when `clusterIP` is
    // left out (the API server fills the one from the other).
    let headless = match spec.cluster_ip.as_deref() {
        None | Some("") => {
            spec.cluster_ips
                .as_ref()
                .and_then(|v| v.first())
                .map(String::as_str)
                == Some("None")
        }
        Some(ip) => ip == "None",
    };
    let ports = spec.ports.as_deref().unwrap_or_default();
    if ports.is_empty() && kind != "ExternalName" && !headless {
        p.add("spec.ports", "Required value");
    }
    service_ports(kind, ports, p);
    if let Some(ip) = spec.cluster_ip.as_deref()
        && !ip.is_empty()
        && ip != "None"
        && let Err(e) = self::ip(ip)
    {
        p.add(
            "spec.clusterIP",
            format!("{e}; allowed \"\", \"None\" or an address"),
        );
    }
    let selectorless = spec.selector.as_ref().is_none_or(|s| s.is_empty());
    if kind != "ExternalName" {
        cluster_ips(spec, headless, selectorless, p);
    } else {
        // An ExternalName Service is a DNS alias: no cluster address, so
        // none of the fields that choose one (the API server fills
        // `clusterIPs` from `clusterIP` before it checks).
        let has_ip = spec.cluster_ip.as_deref().is_some_and(|ip| !ip.is_empty())
            || spec.cluster_ips.as_ref().is_some_and(|v| !v.is_empty());
        let forbidden = [
            ("spec.clusterIPs", has_ip),
            (
                "spec.ipFamilies",
                spec.ip_families.as_ref().is_some_and(|v| !v.is_empty()),
            ),
            ("spec.ipFamilyPolicy", spec.ip_family_policy.is_some()),
        ];
        for (field, set) in forbidden {
            if set {
                p.add(field, "Forbidden: may not be set for ExternalName services");
            }
        }
    }
    if let (Some(ip), Some(first)) = (
        &spec.cluster_ip,
        spec.cluster_ips.as_ref().and_then(|v| v.first()),
    ) && !ip.is_empty()
        && ip != first
    {
        p.add(
            "spec.clusterIPs[0]",
            format!("{first:?} must be the same as `clusterIP` {ip:?}"),
        );
    }
    // Where traffic from outside the cluster comes in: the API server
    // refuses the addresses that make no sense there
    // (`ValidateNonSpecialIP`).
    for (i, a) in spec.external_ips.iter().flatten().enumerate() {
        match self::ip(a) {
            Ok(addr) => {
                if let Err(e) = non_special_ip(addr) {
                    p.add(format!("spec.externalIPs[{i}]"), e);
                }
            }
            Err(e) => p.add(format!("spec.externalIPs[{i}]"), e),
        }
    }
    source_ranges(s, kind, p);
    if let Some(sel) = &spec.selector {
        label_map("spec.selector", sel, p);
    }
    let enums: [(&str, Option<&String>, &[&str]); 4] = [
        (
            "spec.sessionAffinity",
            spec.session_affinity.as_ref(),
            &["None", "ClientIP"],
        ),
        (
            "spec.internalTrafficPolicy",
            spec.internal_traffic_policy.as_ref(),
            &["Cluster", "Local"],
        ),
        (
            "spec.ipFamilyPolicy",
            spec.ip_family_policy.as_ref(),
            &["SingleStack", "PreferDualStack", "RequireDualStack"],
        ),
        // `PreferClose` is the older name of `PreferSameZone`.
        (
            "spec.trafficDistribution",
            spec.traffic_distribution.as_ref(),
            &["PreferClose", "PreferSameZone", "PreferSameNode"],
        ),
    ];
    for (f, v, allowed) in enums {
        if let Some(v) = v
            && let Err(e) = one_of(v, allowed)
        {
            p.add(f, e);
        }
    }
    // `ExternallyAccessible`: a NodePort or LoadBalancer Service, or a
    // ClusterIP one with external addresses.
    let externally_accessible = matches!(kind, "NodePort" | "LoadBalancer")
        || (kind == "ClusterIP" && spec.external_ips.as_ref().is_some_and(|v| !v.is_empty()));
    if let Some(etp) = &spec.external_traffic_policy {
        if let Err(e) = one_of(etp, &["Cluster", "Local"]) {
            p.add("spec.externalTrafficPolicy", e);
        } else if !externally_accessible {
            p.add(
                "spec.externalTrafficPolicy",
                format!(
                    "{etp:?}: may only be set for externally-accessible services (type NodePort or LoadBalancer, or ClusterIP with externalIPs)"
                ),
            );
        }
    }
    // Fields of one type only. On an update, one left over from the old
    // type has been cleared already (`service_update`); one given is
    // refused here, as the API server does.
    let lb = kind == "LoadBalancer";
    if spec.allocate_load_balancer_node_ports.is_some() && !lb {
        p.add(
            "spec.allocateLoadBalancerNodePorts",
            "Forbidden: may only be used when `type` is 'LoadBalancer'",
        );
    }
    match &spec.load_balancer_class {
        Some(_) if !lb => p.add(
            "spec.loadBalancerClass",
            "Forbidden: may only be used when `type` is 'LoadBalancer'",
        ),
        Some(c) => {
            if let Err(e) = qualified_name(c) {
                p.add("spec.loadBalancerClass", e);
            }
        }
        None => {}
    }
    let local = spec.external_traffic_policy.as_deref() == Some("Local");
    if let Some(n) = spec.health_check_node_port
        && n != 0
        && !(lb && local)
    {
        p.add(
            "spec.healthCheckNodePort",
            format!(
                "{n}: may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"
            ),
        );
    }
    if kind == "ExternalName" {
        match &spec.external_name {
            None => p.add(
                "spec.externalName",
                "Required value when `type` is 'ExternalName'",
            ),
            Some(n) => {
                if let Err(e) = dns_subdomain(n.trim_end_matches('.')) {
                    p.add("spec.externalName", e);
                }
            }
        }
    }
    if let Some(t) = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds)
        && !(1..=86400).contains(&t)
    {
        p.add(
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            format!("{t} is out of range; allowed 1 to 86400"),
        );
    }
}

/// `clusterIPs`, `ipFamilies` and `ipFamilyPolicy` together, as
/// `ValidateServiceClusterIPsRelatedFields` and the API server's family
/// defaulting check them (not for ExternalName): 'None' only alone, at
/// most two addresses and one of each family, each of the family
/// `ipFamilies` gives at its index, and two addresses or families only
/// with a dual-stack policy. Which addresses (their range) is the
/// allocator's business, not checked here.
fn cluster_ips(
    spec: &k8s_openapi::api::core::v1::ServiceSpec,
    headless: bool,
    selectorless: bool,
    p: &mut Problems,
) {
    let ips = spec.cluster_ips.as_deref().unwrap_or_default();
    let families = spec.ip_families.as_deref().unwrap_or_default();
    let mut seen = HashSet::new();
    for (i, fam) in families.iter().enumerate() {
        if let Err(e) = one_of(fam, &["IPv4", "IPv6"]) {
            p.add(format!("spec.ipFamilies[{i}]"), e);
        }
        if !seen.insert(fam.as_str()) {
            p.add(
                format!("spec.ipFamilies[{i}]"),
                format!("Duplicate value: {fam:?}"),
            );
        }
    }
    let mut addrs = Vec::new();
    let mut bad = false;
    for (i, a) in ips.iter().enumerate() {
        if i == 0 && a == "None" {
            if ips.len() > 1 {
                bad = true;
                p.add(
                    "spec.clusterIPs",
                    format!("{ips:?}: 'None' must be the first and only value"),
                );
            }
            continue;
        }
        match self::ip(a) {
            Ok(addr) => addrs.push(addr),
            Err(_) => {
                bad = true;
                p.add(
                    format!("spec.clusterIPs[{i}]"),
                    format!("{a:?} is not a valid IP address"),
                );
            }
        }
    }
    if ips.len() > 2 {
        p.add(
            "spec.clusterIPs",
            format!("{ips:?}: may only hold up to 2 values"),
        );
    }
    if bad {
        return;
    }
    // As `IsDualStackIPs`: both families among them (a third address is
    // refused above).
    let dual = addrs.iter().any(|a| a.is_ipv4()) && addrs.iter().any(|a| a.is_ipv6());
    if addrs.len() > 1 && !dual {
        p.add(
            "spec.clusterIPs",
            format!("{ips:?}: may specify no more than one IP for each IP family"),
        );
    }
    if !headless {
        for (i, (a, fam)) in addrs.iter().zip(families).enumerate() {
            let want_v6 = match fam.as_str() {
                "IPv4" => false,
                "IPv6" => true,
                _ => continue,
            };
            if a.is_ipv6() != want_v6 {
                p.add(
                    format!("spec.clusterIPs[{i}]"),
                    format!("expected an {fam} value as indicated by `ipFamilies[{i}]`"),
                );
            }
        }
    }
    // Left out, the policy is RequireDualStack for a headless Service
    // without a selector and SingleStack for any other.
    let single = match spec.ip_family_policy.as_deref() {
        Some(policy) => policy == "SingleStack",
        None => !(headless && selectorless),
    };
    if single {
        let policy = spec.ip_family_policy.as_deref().unwrap_or("SingleStack");
        if ips.len() == 2 {
            p.add(
                "spec.ipFamilyPolicy",
                format!(
                    "{policy:?}: must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified"
                ),
            );
        }
        if families.len() == 2 {
            p.add(
                "spec.ipFamilyPolicy",
                format!(
                    "{policy:?}: must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified"
                ),
            );
        }
    }
}

/// `loadBalancerSourceRanges` (or, without it, the annotation it
/// replaced): only on a LoadBalancer, and each a CIDR once trimmed.
fn source_ranges(s: &Service, kind: &str, p: &mut Problems) {
    const ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";
    let ranges = s
        .spec
        .as_ref()
        .and_then(|sp| sp.load_balancer_source_ranges.as_deref())
        .unwrap_or_default();
    let (field, entries): (String, Vec<(String, &str)>) = if !ranges.is_empty() {
        (
            "spec.loadBalancerSourceRanges".into(),
            ranges
                .iter()
                .enumerate()
                .map(|(i, r)| (format!("spec.loadBalancerSourceRanges[{i}]"), r.as_str()))
                .collect(),
        )
    } else if let Some(v) = s
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION))
    {
        let f = format!("metadata.annotations[{ANNOTATION}]");
        let v = v.trim();
        let entries = if v.is_empty() {
            vec![]
        } else {
            v.split(',').map(|r| (f.clone(), r)).collect()
        };
        (f, entries)
    } else {
        return;
    };
    if kind != "LoadBalancer" {
        p.add(&field, "may only be used when `type` is 'LoadBalancer'");
    }
    for (f, r) in entries {
        if let Err(e) = cidr(r.trim()) {
            p.add(f, e);
        }
    }
}

fn service_ports(kind: &str, ports: &[ServicePort], p: &mut Problems) {
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    let mut node_ports = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let f = format!("spec.ports[{i}]");
        match &port.name {
            Some(n) if !n.is_empty() => {
                if let Err(e) = dns_label(n) {
                    p.add(format!("{f}.name"), e);
                }
                if !names.insert(n.clone()) {
                    p.add(format!("{f}.name"), format!("Duplicate value: {n:?}"));
                }
            }
            _ if ports.len() > 1 => p.add(
                format!("{f}.name"),
                "Required value: a Service with more than one port names each",
            ),
            _ => {}
        }
        if let Err(e) = port_number(port.port.into()) {
            p.add(format!("{f}.port"), e);
        }
        protocol(format!("{f}.protocol"), port.protocol.as_ref(), p);
        let proto = port.protocol.clone().unwrap_or_else(|| "TCP".into());
        if !seen.insert((port.port, proto.clone())) {
            p.add(
                f.clone(),
                format!("Duplicate value: port {} {proto}", port.port),
            );
        }
        if let Some(t) = &port.target_port {
            number_or_name(format!("{f}.targetPort"), t, p);
        }
        if let Some(n) = port.node_port
            && n != 0
        {
            if kind == "ClusterIP" || kind == "ExternalName" {
                p.add(
                    format!("{f}.nodePort"),
                    format!("may not be used when `type` is '{kind}'"),
                );
            } else if let Err(e) = port_number(n.into()) {
                p.add(format!("{f}.nodePort"), e);
            }
            // One node port serves one Service port of a protocol.
            if !node_ports.insert((n, proto.clone())) {
                p.add(
                    format!("{f}.nodePort"),
                    format!("Duplicate value: {n} {proto}"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::kind::Kind;

    /// The problems with a Service of `spec`, as (field, why).
    fn problems(spec: Value) -> Vec<(String, String)> {
        super::super::problems(
            Kind::Service,
            &json!({"apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": "web", "namespace": "default"}, "spec": spec}),
        )
    }

    fn fields(spec: Value) -> Vec<String> {
        problems(spec).into_iter().map(|(f, _)| f).collect()
    }

    fn ok(spec: Value) {
        let p = problems(spec.clone());
        assert!(p.is_empty(), "{spec}: {p:?}");
    }

    const PORTS: &str = r#"[{"port": 80}]"#;

    fn ports() -> Value {
        serde_json::from_str(PORTS).unwrap()
    }

    #[test]
    fn external_ips_may_not_be_special_addresses() {
        for bad in [
            "0.0.0.0",
            "::",
            "127.0.0.1",
            "::1",
            "169.254.169.254",
            "fe80::1",
            "224.0.0.5",
            "ff02::1",
        ] {
            let p = problems(json!({"externalIPs": ["192.0.2.1", bad], "ports": ports()}));
            assert_eq!(p.len(), 1, "{bad}: {p:?}");
            assert_eq!(p[0].0, "spec.externalIPs[1]", "{bad}");
        }
        ok(json!({"externalIPs": ["192.0.2.1", "2001:db8::1", "239.1.1.1"], "ports": ports()}));
        assert_eq!(
            fields(json!({"externalIPs": ["not-an-ip"], "ports": ports()})),
            ["spec.externalIPs[0]"]
        );
    }

    #[test]
    fn cluster_ips_are_addresses_but_their_range_is_not_checked() {
        // The API server refuses what is not an address; which addresses
        // (in range, special) is the allocator's business.
        ok(json!({"clusterIP": "127.0.0.1", "clusterIPs": ["127.0.0.1"], "ports": ports()}));
        ok(json!({"clusterIP": "0.0.0.0", "ports": ports()}));
        assert_eq!(
            fields(json!({"clusterIP": "10.96.0.300", "ports": ports()})),
            ["spec.clusterIP"]
        );
        assert_eq!(
            fields(json!({"clusterIPs": ["10.96.0.1/32"], "ports": ports()})),
            ["spec.clusterIPs[0]"]
        );
    }

    #[test]
    fn load_balancer_source_ranges_are_cidrs_on_load_balancers_only() {
        let lb = |ranges: Value| {
            json!({"type": "LoadBalancer", "ports": ports(),
                                         "loadBalancerSourceRanges": ranges})
        };
        ok(lb(json!([" 10.1.2.3/16 ", "2001:db8::/32", "0.0.0.0/0"])));
        for bad in [
            json!(["oops"]),
            json!(["10.0.0.0/33"]),
            json!(["10.0.0.1"]),
            json!([""]),
        ] {
            assert_eq!(
                fields(lb(json!(["10.0.0.0/8", bad[0]]))),
                ["spec.loadBalancerSourceRanges[1]"],
                "{bad}"
            );
        }
        for kind in ["ClusterIP", "NodePort"] {
            let p = problems(json!({"type": kind, "ports": ports(),
                                    "loadBalancerSourceRanges": ["10.0.0.0/8"]}));
            assert_eq!(p.len(), 1, "{kind}: {p:?}");
            assert_eq!(p[0].0, "spec.loadBalancerSourceRanges");
            assert!(p[0].1.contains("LoadBalancer"), "{p:?}");
        }
        ok(json!({"type": "NodePort", "ports": ports(), "loadBalancerSourceRanges": []}));
        // The annotation the field replaced is held to the same rules.
        let ann = |kind: &str, v: &str| {
            super::super::problems(
                Kind::Service,
                &json!({"apiVersion": "v1", "kind": "Service",
                        "metadata": {"name": "web", "namespace": "default", "annotations":
                            {"service.beta.kubernetes.io/load-balancer-source-ranges": v}},
                        "spec": {"type": kind, "ports": ports()}}),
            )
        };
        assert!(ann("LoadBalancer", "10.0.0.0/8,192.0.2.0/24").is_empty());
        assert_eq!(ann("LoadBalancer", "10.0.0.0/8,oops").len(), 1);
        assert_eq!(ann("NodePort", "10.0.0.0/8").len(), 1);
    }

    #[test]
    fn cluster_ips_hold_at_most_one_address_of_each_family() {
        let dual = |ips: Value, policy: Option<&str>| {
            let mut s = json!({"clusterIP": ips[0], "clusterIPs": ips, "ports": ports()});
            if let Some(p) = policy {
                s["ipFamilyPolicy"] = json!(p);
            }
            s
        };
        for policy in ["PreferDualStack", "RequireDualStack"] {
            ok(dual(json!(["10.96.0.1", "fd00:96::1"]), Some(policy)));
            ok(dual(json!(["fd00:96::1", "10.96.0.1"]), Some(policy)));
            assert_eq!(
                fields(dual(json!(["10.96.0.1", "10.96.0.2"]), Some(policy))),
                ["spec.clusterIPs"],
                "{policy}"
            );
            assert_eq!(
                fields(dual(json!(["fd00::1", "fd00::2"]), Some(policy))),
                ["spec.clusterIPs"],
                "{policy}"
            );
            assert_eq!(
                fields(dual(
                    json!(["10.96.0.1", "fd00:96::1", "10.96.0.2"]),
                    Some(policy)
                )),
                ["spec.clusterIPs"],
                "{policy}"
            );
        }
        // Two addresses need a dual-stack policy; left out, the API server
        // takes SingleStack.
        for policy in [Some("SingleStack"), None] {
            assert_eq!(
                fields(dual(json!(["10.96.0.1", "fd00:96::1"]), policy)),
                ["spec.ipFamilyPolicy"],
                "{policy:?}"
            );
        }
        // 'None' is the first and only value.
        assert_eq!(
            fields(
                json!({"clusterIP": "None", "clusterIPs": ["None", "fd00::1"],
                          "ipFamilyPolicy": "RequireDualStack"})
            ),
            ["spec.clusterIPs"]
        );
        assert_eq!(
            fields(
                json!({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "None"],
                          "ipFamilyPolicy": "RequireDualStack", "ports": ports()})
            ),
            ["spec.clusterIPs[1]"]
        );
        // Each address is of the family `ipFamilies` gives at its index;
        // a family is given once.
        ok(
            json!({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00::1"],
                  "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "PreferDualStack",
                  "ports": ports()}),
        );
        assert_eq!(
            fields(
                json!({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
                          "ipFamilies": ["IPv6"], "ports": ports()})
            ),
            ["spec.clusterIPs[0]"]
        );
        assert_eq!(
            fields(
                json!({"ipFamilies": ["IPv4", "IPv4"], "ipFamilyPolicy": "PreferDualStack",
                          "ports": ports()})
            ),
            ["spec.ipFamilies[1]"]
        );
        assert_eq!(
            fields(
                json!({"ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "SingleStack",
                          "ports": ports()})
            ),
            ["spec.ipFamilyPolicy"]
        );
        // Headless without a selector defaults to RequireDualStack.
        ok(json!({"clusterIP": "None", "ipFamilies": ["IPv4", "IPv6"]}));
        // An ExternalName Service has no cluster addresses to check.
        ok(json!({"type": "ExternalName", "externalName": "example.com"}));
    }

    #[test]
    fn an_external_name_service_chooses_no_cluster_address() {
        let ext = |extra: Value| {
            let mut v = json!({"type": "ExternalName", "externalName": "db.example.com."});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        ok(ext(json!({"ports": ports()})));
        for (extra, field) in [
            (json!({"clusterIP": "10.96.0.9"}), "spec.clusterIPs"),
            (json!({"clusterIP": "None"}), "spec.clusterIPs"),
            (json!({"clusterIPs": ["10.96.0.9"]}), "spec.clusterIPs"),
            (json!({"ipFamilies": ["IPv4"]}), "spec.ipFamilies"),
            (
                json!({"ipFamilyPolicy": "SingleStack"}),
                "spec.ipFamilyPolicy",
            ),
        ] {
            let p = problems(ext(extra.clone()));
            assert_eq!(
                p.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
                [field],
                "{extra}: {p:?}"
            );
            assert!(p[0].1.contains("may not be set for ExternalName"), "{p:?}");
        }
        // An empty clusterIP is no address.
        ok(ext(json!({"clusterIP": ""})));
    }

    #[test]
    fn two_ports_may_not_share_a_node_port_and_protocol() {
        let np = |ports: Value| json!({"type": "NodePort", "ports": ports});
        let p = problems(np(json!([
            {"name": "a", "port": 80, "nodePort": 30080},
            {"name": "b", "port": 81, "nodePort": 30080, "protocol": "TCP"},
        ])));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "spec.ports[1].nodePort");
        assert!(p[0].1.contains("Duplicate"), "{p:?}");
        ok(np(json!([
            {"name": "a", "port": 53, "nodePort": 30053, "protocol": "TCP"},
            {"name": "b", "port": 53, "nodePort": 30053, "protocol": "UDP"},
            {"name": "c", "port": 80, "nodePort": 0},
            {"name": "d", "port": 81, "nodePort": 0},
        ])));
    }

    #[test]
    fn external_traffic_policy_only_for_externally_accessible_services() {
        for spec in [
            json!({"type": "NodePort", "externalTrafficPolicy": "Local", "ports": ports()}),
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Cluster", "ports": ports()}),
            json!({"externalTrafficPolicy": "Local", "externalIPs": ["192.0.2.7"],
                   "ports": ports()}),
            json!({"type": "ClusterIP", "externalTrafficPolicy": "Cluster",
                   "externalIPs": ["192.0.2.7"], "ports": ports()}),
        ] {
            ok(spec);
        }
        for spec in [
            json!({"externalTrafficPolicy": "Local", "ports": ports()}),
            json!({"externalTrafficPolicy": "Cluster", "ports": ports()}),
            json!({"type": "ExternalName", "externalName": "example.com",
                   "externalTrafficPolicy": "Cluster"}),
        ] {
            assert_eq!(
                fields(spec.clone()),
                ["spec.externalTrafficPolicy"],
                "{spec}"
            );
        }
        assert_eq!(
            fields(
                json!({"type": "NodePort", "externalTrafficPolicy": "Locale",
                          "ports": ports()})
            ),
            ["spec.externalTrafficPolicy"]
        );
    }

    #[test]
    fn traffic_distribution_is_one_of_its_values() {
        for v in ["PreferClose", "PreferSameZone", "PreferSameNode"] {
            ok(json!({"trafficDistribution": v, "ports": ports()}));
        }
        for v in ["preferClose", "", "PreferSameRegion"] {
            assert_eq!(
                fields(json!({"trafficDistribution": v, "ports": ports()})),
                ["spec.trafficDistribution"],
                "{v:?}"
            );
        }
    }
}
