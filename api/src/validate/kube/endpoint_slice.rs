//! An EndpointSlice: its address type, ports and endpoints.

use std::collections::HashSet;
use std::net::IpAddr;

use k8s_openapi::api::discovery::v1::{EndpointHints, EndpointSlice};

use super::fields::protocol;
use crate::resources::common::{Problems, dns_label, dns_subdomain};
use crate::validate::names::{label_value, non_special_ip, one_of, port_number};

pub(super) fn check(s: &EndpointSlice, p: &mut Problems) {
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
            let ok = match (family, a.parse::<IpAddr>()) {
                ("IPv4", Ok(ip @ IpAddr::V4(_))) | ("IPv6", Ok(ip @ IpAddr::V6(_))) => {
                    // `ValidateEndpointIP`: no unspecified, loopback or
                    // link-local address.
                    if let Err(e) = non_special_ip(ip) {
                        p.add(&af, e);
                    }
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
        if let Some(h) = &ep.hints {
            hints(&format!("endpoints[{i}].hints"), h, p);
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

/// A name check: `Err` says what is wrong.
type Check = fn(&str) -> Result<(), String>;

/// At most this many zones, and as many nodes, in one endpoint's hints.
const MAX_HINTS: usize = 8;

/// An endpoint's topology hints: at most 8 zones, each a label value,
/// and 8 nodes, each a node name, none twice.
fn hints(f: &str, h: &EndpointHints, p: &mut Problems) {
    let zones: Vec<&str> = h
        .for_zones
        .iter()
        .flatten()
        .map(|z| z.name.as_str())
        .collect();
    let nodes: Vec<&str> = h
        .for_nodes
        .iter()
        .flatten()
        .map(|n| n.name.as_str())
        .collect();
    let lists: [(&str, Vec<&str>, Check); 2] = [
        ("forZones", zones, label_value),
        ("forNodes", nodes, dns_subdomain),
    ];
    for (list, names, check) in lists {
        if names.len() > MAX_HINTS {
            p.add(
                format!("{f}.{list}"),
                format!(
                    "Too many: {}: must have at most {MAX_HINTS} items",
                    names.len()
                ),
            );
            // As the API server: nothing more of the hints is checked.
            return;
        }
        let mut seen = HashSet::new();
        for (i, n) in names.into_iter().enumerate() {
            let nf = format!("{f}.{list}[{i}].name");
            if !seen.insert(n) {
                p.add(&nf, format!("Duplicate value: {n:?}"));
            }
            if let Err(e) = check(n) {
                p.add(nf, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::kind::Kind;

    fn fields(family: &str, addresses: Value) -> Vec<String> {
        super::super::problems(
            Kind::EndpointSlice,
            &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "web-1", "namespace": "default"},
                    "addressType": family,
                    "endpoints": [{"addresses": addresses}],
                    "ports": [{"port": 8080, "protocol": "TCP"}]}),
        )
        .into_iter()
        .map(|(f, _)| f)
        .collect()
    }

    #[test]
    fn endpoint_addresses_may_not_be_special() {
        for (family, bad) in [
            ("IPv4", "0.0.0.0"),
            ("IPv4", "127.0.0.1"),
            ("IPv4", "169.254.169.254"),
            ("IPv4", "224.0.0.251"),
            ("IPv6", "::"),
            ("IPv6", "::1"),
            ("IPv6", "fe80::1"),
            ("IPv6", "ff02::fb"),
            ("IPv6", "::ffff:127.0.0.1"),
        ] {
            let good = if family == "IPv4" {
                "10.244.0.5"
            } else {
                "fd00::5"
            };
            assert_eq!(
                fields(family, json!([good, bad])),
                ["endpoints[0].addresses[1]"],
                "{family} {bad}"
            );
        }
        assert!(fields("IPv4", json!(["10.244.0.5", "192.0.2.1"])).is_empty());
        assert!(fields("IPv6", json!(["fd00:244::5"])).is_empty());
        // The family is still checked.
        assert_eq!(
            fields("IPv4", json!(["fd00::5"])),
            ["endpoints[0].addresses[0]"]
        );
        // An FQDN slice holds names, not addresses.
        assert!(fields("FQDN", json!(["web.example.com"])).is_empty());
    }

    fn hint_fields(hints: Value) -> Vec<String> {
        super::super::problems(
            Kind::EndpointSlice,
            &json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                    "metadata": {"name": "web-1", "namespace": "default"},
                    "addressType": "IPv4",
                    "endpoints": [{"addresses": ["10.244.0.5"], "hints": hints}]}),
        )
        .into_iter()
        .map(|(f, _)| f)
        .collect()
    }

    #[test]
    fn hints_name_at_most_eight_zones_and_nodes_each_once() {
        let names = |n: usize| {
            (0..n)
                .map(|i| json!({"name": format!("z{i}")}))
                .collect::<Vec<_>>()
        };
        assert!(hint_fields(json!({"forZones": names(8), "forNodes": names(8)})).is_empty());
        assert!(hint_fields(json!({})).is_empty());
        assert_eq!(
            hint_fields(json!({"forZones": names(9), "forNodes": names(9)})),
            ["endpoints[0].hints.forZones"]
        );
        assert_eq!(
            hint_fields(json!({"forZones": names(1), "forNodes": names(9)})),
            ["endpoints[0].hints.forNodes"]
        );
        assert_eq!(
            hint_fields(json!({"forZones": [{"name": "a"}, {"name": "a"}],
                               "forNodes": [{"name": "n1"}, {"name": "Bad_Node"}]})),
            [
                "endpoints[0].hints.forZones[1].name",
                "endpoints[0].hints.forNodes[1].name"
            ]
        );
        // A zone is a label value: no spaces, at most 63 characters.
        assert_eq!(
            hint_fields(json!({"forZones": [{"name": "eu west"}, {"name": "x".repeat(64)}]})),
            [
                "endpoints[0].hints.forZones[0].name",
                "endpoints[0].hints.forZones[1].name"
            ]
        );
    }
}
