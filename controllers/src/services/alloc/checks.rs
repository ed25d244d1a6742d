//! The checks of a Service being written that need no other Service (its
//! type, ports, names, given addresses), and what it keeps of its stored
//! self when written again (ClusterIP, NodePorts, health-check NodePort,
//! LoadBalancer status).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::families::{family_mismatch, unsupported_family};
use super::fields::{
    cluster_ip_list, given_cluster_ip, given_cluster_ip_spec, health_port, ingress_ips, key,
    type_of, wants_health_port, wants_node_ports,
};

/// Checks of the Service's own fields that the lab relies on; IPv6
/// ClusterIPs only on a `dual`-stack cluster.
pub(super) fn own_problems(s: &Service, dual: bool, out: &mut Vec<String>) {
    let k = key(s);
    let mut bad = |field: String, why: String| out.push(format!("Service {k}: {field}: {why}"));
    let Some(sp) = &s.spec else {
        bad("spec".into(), "missing".into());
        return;
    };
    let t = type_of(s);
    if !matches!(
        t,
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName"
    ) {
        bad(
            "spec.type".into(),
            format!("{t:?}: use ClusterIP, NodePort, LoadBalancer or ExternalName"),
        );
    }
    let ports = sp.ports.as_deref().unwrap_or_default();
    let mut names = BTreeSet::new();
    for (i, p) in ports.iter().enumerate() {
        let f = |x: &str| format!("spec.ports[{i}].{x}");
        if !(1..=65535).contains(&p.port) {
            bad(f("port"), format!("{} is not in 1-65535", p.port));
        }
        let proto = p.protocol.as_deref().unwrap_or("TCP");
        if !matches!(proto, "TCP" | "UDP" | "SCTP") {
            bad(f("protocol"), format!("{proto:?}: use TCP, UDP or SCTP"));
        }
        let name = p.name.clone().unwrap_or_default();
        if ports.len() > 1 && name.is_empty() {
            bad(
                f("name"),
                "required when the Service has more than one port".into(),
            );
        }
        if !names.insert(name.clone()) && !name.is_empty() {
            bad(f("name"), format!("{name:?} is used by another port"));
        }
        match &p.target_port {
            Some(IntOrString::Int(n)) if !(1..=65535).contains(n) => {
                bad(f("targetPort"), format!("{n} is not in 1-65535"))
            }
            Some(IntOrString::String(n)) if n.is_empty() || n.len() > 15 => bad(
                f("targetPort"),
                format!("{n:?}: a port name has 1 to 15 characters"),
            ),
            _ => {}
        }
        if let Some(np) = p.node_port
            && np != 0
            && !wants_node_ports(s)
        {
            bad(
                f("nodePort"),
                format!("{np}: only for NodePort and LoadBalancer Services"),
            );
        }
    }
    if let Some(np) = health_port(s)
        && !wants_health_port(s)
    {
        bad(
            "spec.healthCheckNodePort".into(),
            format!("{np}: only for LoadBalancer Services with externalTrafficPolicy: Local"),
        );
    }
    for (field, why) in cluster_ip_fields(sp, t == "ExternalName") {
        bad(field, why);
    }
    // A single-stack cluster has no IPv6 service range.
    if !dual
        && let Some(ip) = given_cluster_ip(s)
        && ip.parse::<Ipv6Addr>().is_ok()
    {
        bad(
            "spec.clusterIP".into(),
            format!("{ip:?} is not an IPv4 address"),
        );
    }
    if t == "ExternalName" && sp.external_name.as_deref().unwrap_or("").is_empty() {
        bad(
            "spec.externalName".into(),
            "required for type ExternalName".into(),
        );
    }
}

/// The values `ipFamilyPolicy` may take.
const POLICIES: [&str; 3] = ["PreferDualStack", "RequireDualStack", "SingleStack"];

/// `clusterIP`, `clusterIPs`, `ipFamilies` and `ipFamilyPolicy` as the API
/// server's `ValidateServiceClusterIPsRelatedFields` checks them, as
/// `(field, why)` in its words: `clusterIPs[0]` is `clusterIP` when both
/// are given (either left out is filled from the other); every address
/// (`clusterIPs`, else `clusterIP`) a valid IP, "None" only as the one
/// value (headless); at most two, one of each family, each of the family
/// `ipFamilies` names at its index; the families and the policy from
/// their fixed sets. An ExternalName Service's addresses only (its type
/// forbids the other fields).
fn cluster_ip_fields(sp: &ServiceSpec, external_name: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let single = sp.cluster_ip.as_deref().filter(|ip| !ip.is_empty());
    let given = sp.cluster_ips.as_deref().filter(|l| !l.is_empty());
    let list: Vec<&str> = match given {
        Some(l) => l.iter().map(String::as_str).collect(),
        None => single.into_iter().collect(),
    };
    // The list as the API server shows it (Go's `%#v`).
    let quoted = |v: &[&str]| {
        let v: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
        v.join(", ")
    };
    let shown = format!("[]string{{{}}}", quoted(&list));
    let invalid = |why: &str| {
        (
            "spec.clusterIPs".to_string(),
            format!("Invalid value: {shown}: {why}"),
        )
    };
    if let (Some(ip), Some(first)) = (single, given.and_then(<[String]>::first))
        && ip != first
    {
        out.push(invalid("first value must match `clusterIP`"));
    }
    let families = sp.ip_families.as_deref().unwrap_or_default();
    if !external_name {
        let unsupported = families.iter().enumerate();
        out.extend(unsupported.filter_map(|(i, f)| unsupported_family(i, f)));
        if let Some(p) = sp.ip_family_policy.as_deref()
            && !POLICIES.contains(&p)
        {
            out.push((
                "spec.ipFamilyPolicy".into(),
                format!(
                    "Unsupported value: {p:?}: supported values: {}",
                    quoted(&POLICIES)
                ),
            ));
        }
    }
    let mut addrs: Vec<IpAddr> = Vec::new();
    let mut bad_ip = false;
    for (i, ip) in list.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if list.len() > 1 {
                bad_ip = true;
                out.push(invalid("'None' must be the first and only value"));
            }
            continue;
        }
        match ip.parse() {
            Ok(a) => addrs.push(a),
            Err(_) => {
                bad_ip = true;
                out.push((
                    format!("spec.clusterIPs[{i}]"),
                    format!(
                        "Invalid value: {ip:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                    ),
                ));
            }
        }
    }
    if list.len() > 2 {
        out.push(invalid("may only hold up to 2 values"));
    }
    // As the API server: families are not compared with addresses that
    // are no addresses.
    if bad_ip {
        return out;
    }
    let both = addrs.iter().any(IpAddr::is_ipv4) && addrs.iter().any(IpAddr::is_ipv6);
    if addrs.len() > 1 && !both {
        out.push(invalid(
            "may specify no more than one IP for each IP family",
        ));
    }
    if !external_name {
        for (i, (ip, named)) in list.iter().zip(families).enumerate() {
            out.extend(family_mismatch(i, ip, named));
        }
    }
    out
}

/// Carries what `stored` (the same Service, as stored) holds into
/// `s`, where `s` does not give it, as the API server patches an update
/// (its ClusterIPs, when it gives none or only the same `clusterIP`) and
/// as `kubectl apply` merges one (its families); a changed ClusterIP is
/// a problem.
pub(super) fn carry_over(s: &mut Service, stored: &Service, out: &mut Vec<String>) {
    let k = key(s);
    let old_ip = given_cluster_ip(stored);
    let old_ips = stored
        .spec
        .as_ref()
        .and_then(|o| o.cluster_ips.clone())
        .filter(|l| !l.is_empty())
        .or_else(|| old_ip.clone().map(|ip| vec![ip]));
    let node_ports = wants_node_ports(s);
    let is_lb = type_of(s) == "LoadBalancer";
    let health = wants_health_port(s) && health_port(s).is_none();
    let old_health = health_port(stored);
    let external_name = type_of(s) == "ExternalName";
    let Some(sp) = s.spec.as_mut() else { return };
    let no_list = sp.cluster_ips.as_ref().is_none_or(Vec::is_empty);
    match (given_cluster_ip_spec(sp), old_ip) {
        (None, Some(old)) if !external_name => {
            sp.cluster_ip = Some(old);
            sp.cluster_ips = old_ips;
        }
        (Some(new), Some(old)) if new != old => out.push(format!(
            "Service {k}: spec.clusterIP: may not change ({old} -> {new}); delete the Service and create it again"
        )),
        (Some(_), Some(_)) if no_list && !external_name => sp.cluster_ips = old_ips,
        (Some(_), Some(_)) if !external_name => {
            // The second ClusterIP is as immutable as the first, while
            // the Service has two.
            let new = cluster_ip_list(sp);
            let old = old_ips.unwrap_or_default();
            if new.len() == 2 && old.len() == 2 && new[1] != old[1] {
                out.push(format!(
                    "Service {k}: spec.clusterIPs[1]: may not change once set ({} -> {})",
                    old[1], new[1]
                ));
            }
        }
        _ => {}
    }
    // As `kubectl apply` keeps the stored families the file never named
    // (so that an unchanged PreferDualStack Service is not upgraded, and
    // a downgrade to SingleStack sees both as stored).
    let old_families = stored.spec.as_ref().and_then(|o| o.ip_families.clone());
    if !external_name && sp.ip_families.as_ref().is_none_or(Vec::is_empty) {
        sp.ip_families = old_families.filter(|f| !f.is_empty());
    }
    if node_ports {
        let old_ports = stored
            .spec
            .as_ref()
            .and_then(|o| o.ports.clone())
            .unwrap_or_default();
        for p in sp.ports.iter_mut().flatten() {
            if p.node_port.unwrap_or(0) != 0 {
                continue;
            }
            let same = |o: &&ServicePort| {
                o.port == p.port
                    && o.protocol.as_deref().unwrap_or("TCP")
                        == p.protocol.as_deref().unwrap_or("TCP")
            };
            if let Some(np) = old_ports.iter().find(same).and_then(|o| o.node_port) {
                p.node_port = Some(np);
            }
        }
    }
    if health && let Some(np) = old_health {
        sp.health_check_node_port = Some(np);
    }
    if is_lb && ingress_ips(s).is_empty() && !ingress_ips(stored).is_empty() {
        let wanted = s.spec.as_ref().and_then(|sp| sp.load_balancer_ip.clone());
        // A changed loadBalancerIP asks for a new address.
        if wanted.is_none_or(|w| ingress_ips(stored).contains(&w)) {
            s.status = stored.status.clone();
        }
    }
}
