//! A Service: its type, cluster and external addresses, selector and
//! ports, with the API server's rules for each.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Service, ServicePort};

use super::fields::{label_map, number_or_name, protocol};
use crate::resources::common::{Problems, dns_label, dns_subdomain};
use crate::validate::names::{ip, one_of, port_number};

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
    for (i, a) in spec.cluster_ips.iter().flatten().enumerate() {
        if a != "None" && self::ip(a).is_err() {
            p.add(
                format!("spec.clusterIPs[{i}]"),
                format!("{a:?} is not a valid IP address"),
            );
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
    for (i, a) in spec.external_ips.iter().flatten().enumerate() {
        if let Err(e) = self::ip(a) {
            p.add(format!("spec.externalIPs[{i}]"), e);
        }
    }
    if let Some(sel) = &spec.selector {
        label_map("spec.selector", sel, p);
    }
    let enums: [(&str, Option<&String>, &[&str]); 3] = [
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
    ];
    for (f, v, allowed) in enums {
        if let Some(v) = v
            && let Err(e) = one_of(v, allowed)
        {
            p.add(f, e);
        }
    }
    if let Some(etp) = &spec.external_traffic_policy {
        if let Err(e) = one_of(etp, &["Cluster", "Local"]) {
            p.add("spec.externalTrafficPolicy", e);
        } else if !matches!(kind, "NodePort" | "LoadBalancer") && etp == "Local" {
            p.add(
                "spec.externalTrafficPolicy",
                "may only be set when `type` is 'NodePort' or 'LoadBalancer'",
            );
        }
    }
    for (i, fam) in spec.ip_families.iter().flatten().enumerate() {
        if let Err(e) = one_of(fam, &["IPv4", "IPv6"]) {
            p.add(format!("spec.ipFamilies[{i}]"), e);
        }
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

fn service_ports(kind: &str, ports: &[ServicePort], p: &mut Problems) {
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
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
        }
    }
}
