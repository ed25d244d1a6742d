//! A Node: its pod CIDRs and addresses.

use k8s_openapi::api::core::v1::Node;

use crate::resources::common::Problems;
use crate::validate::names::{cidr, ip, one_of};

pub(super) fn check(n: &Node, p: &mut Problems) {
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
