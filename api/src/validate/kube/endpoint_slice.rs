//! An EndpointSlice: its address type, ports and endpoints.

use std::collections::HashSet;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::fields::protocol;
use crate::resources::common::{Problems, dns_label, dns_subdomain};
use crate::validate::names::{one_of, port_number};

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
