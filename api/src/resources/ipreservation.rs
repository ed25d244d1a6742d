//! IPReservation: addresses inside pools that are never given to pods.

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, parse_network_or_address};
use super::schema_rules;

/// Addresses IPAM must not hand out, e.g. ones used by routers or VIPs
/// inside a pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "IPReservation",
    plural = "ipreservations",
    root = "IpReservation",
    derive = "PartialEq",
    doc = "Addresses that IPAM never gives to pods."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IpReservationSpec {
    /// The reserved networks (`10.244.0.0/28`) or single addresses
    /// (`10.244.0.1`); at least one.
    #[serde(rename = "reservedCIDRs")]
    #[schemars(length(min = 1), transform = schema_rules::network_or_address_list)]
    pub reserved_cidrs: Vec<String>,
}

impl IpReservationSpec {
    /// The reserved networks; a single address is a /32 or /128.
    pub fn networks(&self) -> Vec<IpNet> {
        self.reserved_cidrs
            .iter()
            .filter_map(|s| parse_network_or_address(s).ok())
            .collect()
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.reserved_cidrs.is_empty() {
            p.add(
                "spec.reservedCIDRs",
                "is empty; list at least one CIDR or address",
            );
        }
        for (i, s) in self.reserved_cidrs.iter().enumerate() {
            p.take(
                &format!("spec.reservedCIDRs[{i}]"),
                parse_network_or_address(s),
            );
        }
        p.0
    }
}
