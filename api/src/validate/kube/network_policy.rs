//! A Kubernetes NetworkPolicy: its pod selector, and each rule's ports
//! and peers (selectors and ipBlocks, each `except` inside its `cidr`).

use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyPeer, NetworkPolicyPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::fields::{number_or_name, protocol, selector};
use crate::resources::common::Problems;
use crate::validate::names::{cidr, one_of, port_number};

pub(super) fn check(np: &NetworkPolicy, p: &mut Problems) {
    let Some(spec) = &np.spec else {
        return;
    };
    if let Some(s) = &spec.pod_selector {
        selector("spec.podSelector", s, p);
    }
    // The API server counts them, not their distinct values: a type
    // given twice is let through, a third entry is not.
    let types = spec.policy_types.as_deref().unwrap_or_default();
    if types.len() > 2 {
        p.add(
            "spec.policyTypes",
            format!("{} given; may not specify more than two", types.len()),
        );
    }
    for (i, t) in types.iter().enumerate() {
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
