//! The Kubernetes kinds Tartan stores (on an etcd fleet Tartan is their API
//! server): each is decoded strictly into its k8s-openapi type, then checked
//! with the API server's rules for the fields Tartan and its users rely on.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, Secret, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::names::{cidr, ip, label_value, one_of, port_name, port_number, qualified_name};
use super::strict::decode;
use crate::kind::Kind;
use crate::resources::common::{Problems, dns_label, dns_subdomain};

const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];

/// Every problem with a Kubernetes object in its stored shape (metadata
/// names are checked by the caller).
pub fn problems(kind: Kind, v: &Value) -> Vec<(String, String)> {
    let mut p = Problems::default();
    match kind {
        Kind::Namespace => {
            typed::<Namespace>(v, &mut p);
        }
        Kind::Node => {
            if let Some(n) = typed::<Node>(v, &mut p) {
                node(&n, &mut p);
            }
        }
        Kind::Pod => {
            if let Some(pod) = typed::<Pod>(v, &mut p) {
                self::pod(&pod, &mut p);
            }
        }
        Kind::Service => {
            if let Some(s) = typed::<Service>(v, &mut p) {
                service(&s, &mut p);
            }
        }
        Kind::EndpointSlice => {
            if let Some(s) = typed::<EndpointSlice>(v, &mut p) {
                endpoint_slice(&s, &mut p);
            }
        }
        Kind::Secret => {
            if let Some(s) = typed::<Secret>(v, &mut p) {
                secret(&s, &mut p);
            }
        }
        Kind::KubeNetworkPolicy => {
            if let Some(np) = typed::<NetworkPolicy>(v, &mut p) {
                network_policy(&np, &mut p);
            }
        }
        _ => {}
    }
    p.0
}

/// Decodes `v` as `T`, refusing unknown fields; a decoding problem is the
/// only one reported, as nothing after it can be trusted.
fn typed<T: DeserializeOwned + Serialize>(v: &Value, p: &mut Problems) -> Option<T> {
    match decode::<T>(v, "") {
        Ok(t) => Some(t),
        Err(problem) => {
            p.0.push(problem);
            None
        }
    }
}

/// Labels as a map of qualified names to label values (`labels`,
/// `matchLabels`, a Service's `selector`).
pub(crate) fn label_map(field: &str, m: &BTreeMap<String, String>, p: &mut Problems) {
    for (k, v) in m {
        if let Err(e) = qualified_name(k) {
            p.add(field, e);
        }
        if let Err(e) = label_value(v) {
            p.add(format!("{field}[{k}]"), e);
        }
    }
}

fn selector(field: &str, s: &LabelSelector, p: &mut Problems) {
    if let Some(m) = &s.match_labels {
        label_map(&format!("{field}.matchLabels"), m, p);
    }
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        if let Err(e) = qualified_name(&r.key) {
            p.add(format!("{f}.key"), e);
        }
        let values = r.values.as_deref().unwrap_or_default();
        match r.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => p.add(
                format!("{f}.values"),
                format!("must be specified when `operator` is '{}'", r.operator),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => p.add(
                format!("{f}.values"),
                format!("may not be specified when `operator` is '{}'", r.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => p.add(
                format!("{f}.operator"),
                one_of(other, &["In", "NotIn", "Exists", "DoesNotExist"]).unwrap_err(),
            ),
        }
        for (j, v) in values.iter().enumerate() {
            if let Err(e) = label_value(v) {
                p.add(format!("{f}.values[{j}]"), e);
            }
        }
    }
}

fn protocol(field: String, proto: Option<&String>, p: &mut Problems) {
    if let Some(proto) = proto
        && let Err(e) = one_of(proto, PROTOCOLS)
    {
        p.add(field, e);
    }
}

fn number_or_name(field: String, port: &IntOrString, p: &mut Problems) {
    let r = match port {
        IntOrString::Int(n) => port_number((*n).into()),
        IntOrString::String(s) => port_name(s),
    };
    if let Err(e) = r {
        p.add(field, e);
    }
}

fn network_policy(np: &NetworkPolicy, p: &mut Problems) {
    let Some(spec) = &np.spec else {
        return;
    };
    if let Some(s) = &spec.pod_selector {
        selector("spec.podSelector", s, p);
    }
    for (i, t) in spec.policy_types.iter().flatten().enumerate() {
        if let Err(e) = one_of(t, &["Ingress", "Egress"]) {
            p.add(format!("spec.policyTypes[{i}]"), e);
        }
    }
    for (i, rule) in spec.ingress.iter().flatten().enumerate() {
        let f = format!("spec.ingress[{i}]");
        np_ports(&f, rule.ports.as_deref(), p);
        for (j, peer) in rule.from.iter().flatten().enumerate() {
            np_peer(&format!("{f}.from[{j}]"), peer, p);
        }
    }
    for (i, rule) in spec.egress.iter().flatten().enumerate() {
        let f = format!("spec.egress[{i}]");
        np_ports(&f, rule.ports.as_deref(), p);
        for (j, peer) in rule.to.iter().flatten().enumerate() {
            np_peer(&format!("{f}.to[{j}]"), peer, p);
        }
    }
}

fn np_ports(rule: &str, ports: Option<&[NetworkPolicyPort]>, p: &mut Problems) {
    for (i, port) in ports.unwrap_or_default().iter().enumerate() {
        let f = format!("{rule}.ports[{i}]");
        protocol(format!("{f}.protocol"), port.protocol.as_ref(), p);
        if let Some(n) = &port.port {
            number_or_name(format!("{f}.port"), n, p);
        }
        if let Some(end) = port.end_port {
            match &port.port {
                Some(IntOrString::Int(start)) => {
                    if end < *start {
                        p.add(
                            format!("{f}.endPort"),
                            format!("{end} must be greater than or equal to `port` ({start})"),
                        );
                    } else if let Err(e) = port_number(end.into()) {
                        p.add(format!("{f}.endPort"), e);
                    }
                }
                Some(IntOrString::String(_)) => p.add(
                    format!("{f}.endPort"),
                    "may not be specified when `port` is a name",
                ),
                None => p.add(
                    format!("{f}.endPort"),
                    "may not be specified when `port` is not specified",
                ),
            }
        }
    }
}

fn np_peer(f: &str, peer: &NetworkPolicyPeer, p: &mut Problems) {
    let selectors = peer.pod_selector.is_some() || peer.namespace_selector.is_some();
    match (&peer.ip_block, selectors) {
        (None, false) => p.add(
            f,
            "must specify a peer: podSelector, namespaceSelector or ipBlock",
        ),
        (Some(_), true) => p.add(
            f,
            "may not specify more than 1 peer type: ipBlock excludes podSelector and namespaceSelector",
        ),
        _ => {}
    }
    if let Some(s) = &peer.pod_selector {
        selector(&format!("{f}.podSelector"), s, p);
    }
    if let Some(s) = &peer.namespace_selector {
        selector(&format!("{f}.namespaceSelector"), s, p);
    }
    if let Some(block) = &peer.ip_block {
        let f = format!("{f}.ipBlock");
        let outer = p.take(&format!("{f}.cidr"), cidr(&block.cidr));
        for (i, e) in block.except.iter().flatten().enumerate() {
            let ef = format!("{f}.except[{i}]");
            let Some(inner) = p.take(&ef, cidr(e)) else {
                continue;
            };
            if let Some(outer) = outer
                && !(outer.contains(&inner.network()) && inner.prefix_len() > outer.prefix_len())
            {
                p.add(
                    ef,
                    format!("{e:?} must be a strict subset of `cidr` {:?}", block.cidr),
                );
            }
        }
    }
}

fn service(s: &Service, p: &mut Problems) {
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
    let headless = spec.cluster_ip.as_deref() == Some("None");
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

fn endpoint_slice(s: &EndpointSlice, p: &mut Problems) {
    let family = s.address_type.as_str();
    if let Err(e) = one_of(family, &["IPv4", "IPv6", "FQDN"]) {
        p.add("addressType", e);
    }
    if s.endpoints.len() > 1000 {
        p.add(
            "endpoints",
            format!("{} endpoints; at most 1000", s.endpoints.len()),
        );
    }
    for (i, ep) in s.endpoints.iter().enumerate() {
        let f = format!("endpoints[{i}].addresses");
        if ep.addresses.is_empty() || ep.addresses.len() > 100 {
            p.add(&f, "must hold 1 to 100 addresses");
        }
        for (j, a) in ep.addresses.iter().enumerate() {
            let af = format!("{f}[{j}]");
            let ok = match (family, a.parse::<std::net::IpAddr>()) {
                ("IPv4", Ok(std::net::IpAddr::V4(_))) | ("IPv6", Ok(std::net::IpAddr::V6(_))) => {
                    true
                }
                ("FQDN", _) => dns_subdomain(a).is_ok(),
                _ => false,
            };
            if !ok {
                p.add(af, format!("{a:?} is not a valid {family} address"));
            }
        }
        if let Some(n) = &ep.node_name
            && let Err(e) = dns_subdomain(n)
        {
            p.add(format!("endpoints[{i}].nodeName"), e);
        }
        if let Some(h) = &ep.hostname
            && let Err(e) = dns_label(h)
        {
            p.add(format!("endpoints[{i}].hostname"), e);
        }
    }
    let mut names = HashSet::new();
    for (i, port) in s.ports.iter().flatten().enumerate() {
        let f = format!("ports[{i}]");
        let n = port.name.clone().unwrap_or_default();
        if !n.is_empty()
            && let Err(e) = dns_label(&n)
        {
            p.add(format!("{f}.name"), e);
        }
        if !names.insert(n.clone()) {
            p.add(format!("{f}.name"), format!("Duplicate value: {n:?}"));
        }
        if let Some(n) = port.port
            && let Err(e) = port_number(n.into())
        {
            p.add(format!("{f}.port"), e);
        }
        protocol(format!("{f}.protocol"), port.protocol.as_ref(), p);
    }
}

fn pod(pod: &Pod, p: &mut Problems) {
    if let Some(spec) = &pod.spec {
        if spec.containers.is_empty() {
            p.add(
                "spec.containers",
                "Required value: a Pod has at least one container",
            );
        }
        let mut names = HashSet::new();
        let all = [
            ("containers", &spec.containers[..]),
            (
                "initContainers",
                spec.init_containers.as_deref().unwrap_or_default(),
            ),
        ];
        for (group, list) in all {
            for (i, c) in list.iter().enumerate() {
                container(&format!("spec.{group}[{i}]"), c, &mut names, p);
            }
        }
        if let Some(n) = &spec.node_name
            && let Err(e) = dns_subdomain(n)
        {
            p.add("spec.nodeName", e);
        }
        if let Some(r) = &spec.restart_policy
            && let Err(e) = one_of(r, &["Always", "OnFailure", "Never"])
        {
            p.add("spec.restartPolicy", e);
        }
        if let Some(sel) = &spec.node_selector {
            label_map("spec.nodeSelector", sel, p);
        }
    }
    if let Some(status) = &pod.status {
        if let Some(a) = &status.pod_ip
            && let Err(e) = ip(a)
        {
            p.add("status.podIP", e);
        }
        for (i, a) in status.pod_ips.iter().flatten().enumerate() {
            if let Err(e) = ip(&a.ip) {
                p.add(format!("status.podIPs[{i}].ip"), e);
            }
        }
        if let Some(a) = &status.host_ip
            && let Err(e) = ip(a)
        {
            p.add("status.hostIP", e);
        }
    }
}

fn container(f: &str, c: &Container, names: &mut HashSet<String>, p: &mut Problems) {
    if let Err(e) = dns_label(&c.name) {
        p.add(format!("{f}.name"), e);
    } else if !names.insert(c.name.clone()) {
        p.add(
            format!("{f}.name"),
            format!("Duplicate value: {:?}", c.name),
        );
    }
    let mut port_names = HashSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let pf = format!("{f}.ports[{i}]");
        if let Err(e) = port_number(port.container_port.into()) {
            p.add(format!("{pf}.containerPort"), e);
        }
        if let Some(h) = port.host_port
            && h != 0
            && let Err(e) = port_number(h.into())
        {
            p.add(format!("{pf}.hostPort"), e);
        }
        protocol(format!("{pf}.protocol"), port.protocol.as_ref(), p);
        if let Some(n) = &port.name {
            if let Err(e) = port_name(n) {
                p.add(format!("{pf}.name"), e);
            } else if !port_names.insert(n.clone()) {
                p.add(format!("{pf}.name"), format!("Duplicate value: {n:?}"));
            }
        }
    }
}

fn node(n: &Node, p: &mut Problems) {
    if let Some(spec) = &n.spec {
        if let Some(c) = &spec.pod_cidr
            && let Err(e) = cidr(c)
        {
            p.add("spec.podCIDR", e);
        }
        for (i, c) in spec.pod_cidrs.iter().flatten().enumerate() {
            if let Err(e) = cidr(c) {
                p.add(format!("spec.podCIDRs[{i}]"), e);
            }
        }
    }
    for (i, a) in n
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let types = [
            "Hostname",
            "InternalIP",
            "ExternalIP",
            "InternalDNS",
            "ExternalDNS",
        ];
        if let Err(e) = one_of(&a.type_, &types) {
            p.add(format!("status.addresses[{i}].type"), e);
        } else if a.type_.ends_with("IP")
            && let Err(e) = ip(&a.address)
        {
            p.add(format!("status.addresses[{i}].address"), e);
        }
    }
}

/// Secret data keys: letters, digits, '-', '_' and '.', at most 253.
fn secret(s: &Secret, p: &mut Problems) {
    let key_ok = |k: &str| {
        !k.is_empty()
            && k.len() <= 253
            && k != "."
            && k != ".."
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    };
    let mut size = 0;
    for (k, v) in s.data.iter().flatten() {
        size += v.0.len();
        if !key_ok(k) {
            p.add(
                format!("data[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253)",
            );
        }
    }
    for (k, v) in s.string_data.iter().flatten() {
        size += v.len();
        if !key_ok(k) {
            p.add(
                format!("stringData[{k}]"),
                "a key is letters, digits, '-', '_' and '.' (at most 253)",
            );
        }
    }
    if size > 1024 * 1024 {
        p.add(
            "data",
            format!("{size} bytes; a Secret holds at most 1048576"),
        );
    }
}
