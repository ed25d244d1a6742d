//! A Pod: its containers (unique names, ports), node selector and
//! addresses.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::fields::{label_map, protocol};
use crate::resources::common::{Problems, dns_label, dns_subdomain};
use crate::validate::names::{ip, one_of, port_name, port_number};

pub(super) fn check(pod: &Pod, p: &mut Problems) {
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
