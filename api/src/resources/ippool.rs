//! IPPool: a range of pod addresses, carved into per-node blocks.

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, all_selector, check_selector, parse_network};
use super::schema_rules;

/// The link-local ranges, which no pool may overlap (as in Calico): an
/// address there is never routed off its link.
const LINK_LOCAL_V4: &str = "169.254.0.0/16";
const LINK_LOCAL_V6: &str = "fe80::/10";

/// How traffic between pods on different nodes is carried.
///
/// `Never`: routed as is (pure L3). `Always`: always encapsulated.
/// `CrossSubnet`: encapsulated only towards nodes in another subnet.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum EncapMode {
    #[default]
    Never,
    Always,
    CrossSubnet,
}

/// A range of pod addresses. Nodes claim blocks of `blockSize` from it and
/// give pods addresses from their blocks.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "IPPool",
    plural = "ippools",
    root = "IpPool",
    derive = "PartialEq",
    shortname = "pool",
    doc = "A range of pod addresses, handed to nodes in blocks."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!(has(self.ipipMode) && self.ipipMode != 'Never' && has(self.vxlanMode) && self.vxlanMode != 'Never')",
        "message": "both ipipMode and vxlanMode are set; choose one encapsulation"
    },
    {
        "rule": "!has(self.blockSize) || !isCIDR(self.cidr) || (cidr(self.cidr).ip().family() == 4 ? (self.blockSize >= 20 && self.blockSize <= 32) : (self.blockSize >= 116 && self.blockSize <= 128))",
        "message": "blockSize is out of range for the pool's family; allowed 20 to 32 for IPv4, 116 to 128 for IPv6"
    },
    {
        "rule": "(has(self.disabled) && self.disabled) || !isCIDR(self.cidr) || (has(self.blockSize) ? self.blockSize : (cidr(self.cidr).ip().family() == 4 ? 26 : 122)) >= cidr(self.cidr).prefixLength()",
        "message": "blockSize is shorter than the pool's prefix; blocks must fit in the pool (or disable the pool)"
    },
    {
        "rule": "!isCIDR(self.cidr) || (cidr(self.cidr).ip().family() == 4 ? !(cidr('169.254.0.0/16').containsIP(cidr(self.cidr).masked().ip()) || cidr(self.cidr).containsIP('169.254.0.0')) : !(cidr('fe80::/10').containsIP(cidr(self.cidr).masked().ip()) || cidr(self.cidr).containsIP('fe80::')))",
        "message": "cidr: the pool overlaps the link-local range (169.254.0.0/16, fe80::/10), which pods cannot be given"
    },
    {
        "rule": "self.cidr == oldSelf.cidr",
        "message": "cidr: IPPool CIDR cannot be modified; create a new pool (and disable this one) instead"
    },
    {
        "rule": "!isCIDR(self.cidr) || !isCIDR(oldSelf.cidr) || (has(self.blockSize) ? self.blockSize : (cidr(self.cidr).ip().family() == 4 ? 26 : 122)) == (has(oldSelf.blockSize) ? oldSelf.blockSize : (cidr(oldSelf.cidr).ip().family() == 4 ? 26 : 122))",
        "message": "blockSize: IPPool BlockSize cannot be modified; create a new pool (and disable this one) instead"
    },
    {
        "rule": "!has(self.ipipMode) || self.ipipMode == 'Never' || !isCIDR(self.cidr) || cidr(self.cidr).ip().family() == 4",
        "message": "ipipMode: IPIP carries IPv4 only; an IPv6 pool allows Never (use vxlanMode)"
    }
]))]
pub struct IpPoolSpec {
    /// The pool's network, e.g. `10.244.0.0/16` or `fd00:10:244::/56`;
    /// host bits must be zero.
    #[schemars(transform = schema_rules::network)]
    pub cidr: String,
    /// Prefix length of the blocks nodes claim: IPv4 20 to 32 (default 26),
    /// IPv6 116 to 128 (default 122). At least the pool's own prefix length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 20, max = 128))]
    pub block_size: Option<u8>,
    /// IPIP encapsulation (IPv4 pools only). Default `Never`.
    #[serde(default)]
    pub ipip_mode: EncapMode,
    /// VXLAN encapsulation. Default `Never`. At most one of ipipMode and
    /// vxlanMode may be other than `Never`.
    #[serde(default)]
    pub vxlan_mode: EncapMode,
    /// Masquerade traffic from pods to destinations outside all pools.
    /// Default false.
    #[serde(default)]
    pub nat_outgoing: bool,
    /// No new addresses are given from a disabled pool. Default false.
    #[serde(default)]
    pub disabled: bool,
    /// Do not announce this pool's blocks over BGP. Default false.
    #[serde(default, rename = "disableBGPExport")]
    pub disable_bgp_export: bool,
    /// Nodes that may take blocks from this pool. Default `all()`.
    #[serde(default = "all_selector")]
    #[schemars(transform = schema_rules::selector)]
    pub node_selector: String,
}

impl IpPoolSpec {
    /// A pool of `cidr` with every other field at its default.
    pub fn new(cidr: &str) -> Self {
        IpPoolSpec {
            cidr: cidr.to_string(),
            block_size: None,
            ipip_mode: EncapMode::Never,
            vxlan_mode: EncapMode::Never,
            nat_outgoing: false,
            disabled: false,
            disable_bgp_export: false,
            node_selector: all_selector(),
        }
    }

    /// The pool's network.
    pub fn network(&self) -> Result<IpNet, String> {
        parse_network(&self.cidr)
    }

    /// The block size in force: the one given or the family's default.
    pub fn effective_block_size(&self) -> Option<u8> {
        let net = self.network().ok()?;
        Some(self.block_size.unwrap_or(match net {
            IpNet::V4(_) => 26,
            IpNet::V6(_) => 122,
        }))
    }

    /// What may not change once the pool is stored (Calico: "IPPool CIDR
    /// cannot be modified", "IPPool BlockSize cannot be modified"): blocks
    /// already claimed are carved from the pool as it was. Every problem
    /// of `self` as an update of `old`; fields are named from `spec`.
    pub fn check_update(&self, old: &IpPoolSpec) -> Vec<Problem> {
        let mut p = Problems::default();
        let (new_net, old_net) = (self.network().ok(), old.network().ok());
        let cidr_changed = match (new_net, old_net) {
            (Some(a), Some(b)) => a != b,
            _ => self.cidr != old.cidr,
        };
        if cidr_changed {
            p.add(
                "spec.cidr",
                format!(
                    "IPPool CIDR cannot be modified (stored {}); create a new pool (and disable this one) instead",
                    old.cidr
                ),
            );
        } else if let (Some(a), Some(b)) = (self.effective_block_size(), old.effective_block_size())
            && a != b
        {
            p.add(
                "spec.blockSize",
                format!(
                    "IPPool BlockSize cannot be modified (stored {b}); create a new pool (and disable this one) instead"
                ),
            );
        }
        p.0
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        let net = p.take("spec.cidr", self.network());
        if let Some(net) = net {
            let (family, lo, hi) = match net {
                IpNet::V4(_) => ("IPv4", 20, 32),
                IpNet::V6(_) => ("IPv6", 116, 128),
            };
            let size = self.effective_block_size().unwrap_or(hi);
            if let Some(b) = self.block_size
                && !(lo..=hi).contains(&b)
            {
                p.add(
                    "spec.blockSize",
                    format!("{b} is out of range for an {family} pool; allowed {lo} to {hi}"),
                );
            } else if size < net.prefix_len() && !self.disabled {
                p.add(
                    "spec.blockSize",
                    format!(
                        "{size} is shorter than the pool's prefix /{}; blocks must fit in the pool",
                        net.prefix_len()
                    ),
                );
            }
            let link_local: IpNet = match net {
                IpNet::V4(_) => LINK_LOCAL_V4,
                IpNet::V6(_) => LINK_LOCAL_V6,
            }
            .parse()
            .expect("a network");
            if link_local.contains(&net.network()) || net.contains(&link_local.network()) {
                p.add(
                    "spec.cidr",
                    format!(
                        "{net} overlaps the link-local range {link_local}, which pods cannot be given"
                    ),
                );
            }
            if matches!(net, IpNet::V6(_)) && self.ipip_mode != EncapMode::Never {
                p.add(
                    "spec.ipipMode",
                    "IPIP carries IPv4 only; an IPv6 pool allows Never (use vxlanMode)",
                );
            }
        }
        if self.ipip_mode != EncapMode::Never && self.vxlan_mode != EncapMode::Never {
            p.add(
                "spec.vxlanMode",
                "both ipipMode and vxlanMode are set; choose one encapsulation",
            );
        }
        check_selector("spec.nodeSelector", &self.node_selector, &mut p);
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_in() {
        let s: IpPoolSpec = serde_json::from_str(r#"{"cidr": "10.244.0.0/16"}"#).unwrap();
        assert_eq!(s, IpPoolSpec::new("10.244.0.0/16"));
        assert_eq!(s.effective_block_size(), Some(26));
        assert_eq!(s.node_selector, "all()");
        assert_eq!(s.ipip_mode, EncapMode::Never);
        let v6: IpPoolSpec = serde_json::from_str(r#"{"cidr": "fd00:10::/56"}"#).unwrap();
        assert_eq!(v6.effective_block_size(), Some(122));
        assert!(s.check().is_empty() && v6.check().is_empty());
    }

    #[test]
    fn block_must_fit_the_pool() {
        let mut s = IpPoolSpec::new("10.0.0.0/28");
        let p = s.check();
        assert_eq!(p.len(), 1);
        assert!(
            p[0].1.contains("shorter than the pool's prefix /28"),
            "{p:?}"
        );
        s.block_size = Some(30);
        assert!(s.check().is_empty());
    }

    #[test]
    fn a_disabled_pool_may_be_smaller_than_a_block() {
        // As Calico: the pool-size rule holds only for pools in use.
        let mut s = IpPoolSpec::new("10.0.0.0/28");
        s.disabled = true;
        assert!(s.check().is_empty(), "{:?}", s.check());
        // The range of blockSize still holds.
        s.block_size = Some(33);
        assert_eq!(s.check().len(), 1);
    }

    #[test]
    fn link_local_pools_are_refused() {
        for cidr in [
            "169.254.0.0/16",
            "169.254.10.0/24",
            "169.0.0.0/8",
            "fe80::/64",
            "fe80::/10",
            "fe00::/7",
        ] {
            let mut s = IpPoolSpec::new(cidr);
            s.block_size = Some(if cidr.contains(':') { 122 } else { 26 });
            s.disabled = true;
            let p = s.check();
            assert!(
                p.iter()
                    .any(|(f, m)| f == "spec.cidr" && m.contains("link-local")),
                "{cidr}: {p:?}"
            );
        }
        for cidr in ["169.255.0.0/16", "169.253.0.0/16", "fec0::/10", "fd00::/56"] {
            assert!(IpPoolSpec::new(cidr).check().is_empty(), "{cidr}");
        }
    }

    #[test]
    fn cidr_and_block_size_cannot_change() {
        let old = IpPoolSpec::new("10.0.0.0/16");
        let mut new = old.clone();
        new.nat_outgoing = true;
        new.block_size = Some(26); // the default, written out
        assert!(new.check_update(&old).is_empty());
        new.block_size = Some(24);
        let p = new.check_update(&old);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "spec.blockSize");
        assert!(
            p[0].1.contains("IPPool BlockSize cannot be modified"),
            "{p:?}"
        );
        let mut new = old.clone();
        new.cidr = "10.1.0.0/16".into();
        let p = new.check_update(&old);
        assert_eq!(p[0].0, "spec.cidr");
        assert!(p[0].1.contains("IPPool CIDR cannot be modified"), "{p:?}");
    }
}
