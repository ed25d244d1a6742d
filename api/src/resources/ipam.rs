//! IPAM records: address blocks, the handles that own addresses in them,
//! and which node each block belongs to.

use std::collections::{BTreeMap, HashSet};

use ipnet::IpNet;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Problem, Problems, dns_subdomain, parse_network};
use super::schema_rules;

pub use super::limits::MAX_BLOCK_ADDRESSES;

/// Prefix of a block's `affinity`: `host:<nodename>`.
pub const HOST_AFFINITY_PREFIX: &str = "host:";

/// The conventional object name of the block for `cidr`: the CIDR with
/// `.`, `:` and `/` turned into `-`, e.g. `10-244-0-0-26`. IPv6 addresses
/// are written with all eight groups (`fd00-0-0-0-0-0-0-0-122`) so that the
/// name never starts or ends with `-`.
pub fn block_name(cidr: &IpNet) -> String {
    match cidr {
        IpNet::V4(n) => format!("{}-{}", n.addr(), n.prefix_len()).replace('.', "-"),
        IpNet::V6(n) => {
            let groups: Vec<String> = n
                .addr()
                .segments()
                .iter()
                .map(|g| format!("{g:x}"))
                .collect();
            format!("{}-{}", groups.join("-"), n.prefix_len())
        }
    }
}

/// The number of addresses in `net`, when it is small enough to be a block.
fn block_addresses(net: &IpNet) -> Option<u32> {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    1u32.checked_shl(host_bits)
        .filter(|n| *n <= MAX_BLOCK_ADDRESSES)
}

/// The rules of a block that relate its fields: its size, and ordinals and
/// indexes within range. A free entry of `allocations` is null; it is
/// compared as `dyn(...) == null`, as the type checker takes `int == null`
/// for no overload.
fn block_rules() -> serde_json::Value {
    const FAMILY: &str = "cidr(self.cidr).ip().family()";
    const PREFIX: &str = "cidr(self.cidr).prefixLength()";
    let sizes: Vec<String> = (0..=12).map(|b| (1u32 << b).to_string()).collect();
    let sizes = sizes.join(", ");
    serde_json::json!([
        {
            "rule": format!("!isCIDR(self.cidr) || {PREFIX} >= ({FAMILY} == 4 ? 20 : 116)"),
            "message": format!("cidr is too large for a block; at most {MAX_BLOCK_ADDRESSES} addresses (IPv4 /20, IPv6 /116)")
        },
        {
            "rule": format!("!isCIDR(self.cidr) || {PREFIX} < ({FAMILY} == 4 ? 20 : 116) || (has(self.allocations) ? size(self.allocations) : 0) == [{sizes}][({FAMILY} == 4 ? 32 : 128) - {PREFIX}]"),
            "message": "allocations: one entry per address of the block"
        },
        {
            "rule": "!has(self.unallocated) || self.unallocated.all(u, has(self.allocations) && u < size(self.allocations))",
            "message": "unallocated: an ordinal is past the block's end"
        },
        {
            "rule": "!has(self.unallocated) || !has(self.allocations) || self.unallocated.all(u, u >= size(self.allocations) || dyn(self.allocations[u]) == null)",
            "message": "unallocated: an address is both allocated and unallocated"
        },
        {
            "rule": "!has(self.allocations) || self.allocations.all(a, dyn(a) == null || (has(self.attributes) && a < size(self.attributes)))",
            "message": "allocations: an entry is not an index into attributes"
        },
        {
            "rule": "!has(self.released) || self.released.all(r, has(self.allocations) && r.ordinal < size(self.allocations))",
            "message": "released: an ordinal is past the block's end"
        }
    ])
}

/// A block of addresses and who holds each of them. Ordinal `i` is the
/// block's `i`-th address.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "IPAMBlock",
    plural = "ipamblocks",
    root = "IpamBlock",
    derive = "PartialEq",
    doc = "A block of pod addresses and their allocations. Written by IPAM only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("x-kubernetes-validations" = block_rules()))]
pub struct IpamBlockSpec {
    /// The block's network; its object name is conventionally
    /// `block_name(cidr)`, e.g. `10-244-0-0-26`.
    #[schemars(transform = schema_rules::network)]
    pub cidr: String,
    /// `host:<nodename>`: the node the block belongs to. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = schema_rules::affinity)]
    pub affinity: Option<String>,
    /// Only the affine node may allocate from this block. Default false.
    #[serde(default)]
    pub strict_affinity: bool,
    /// One entry per address: the index into `attributes` of its holder, or
    /// null when free.
    #[serde(default)]
    #[schemars(transform = schema_rules::block_list)]
    pub allocations: Vec<Option<u32>>,
    /// Ordinals of the free addresses, in the order they are handed out.
    #[serde(default)]
    #[schemars(transform = schema_rules::ordinal_set)]
    pub unallocated: Vec<u32>,
    /// Who holds allocated addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::block_list)]
    pub attributes: Vec<AllocationAttributes>,
    /// The block is being released; no new allocations. Default false.
    #[serde(default)]
    pub deleted: bool,
    /// Addresses released recently, with when: they are handed out again
    /// only after a cool-down, so that a late packet never reaches a new
    /// pod. An entry goes when its address is allocated again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = schema_rules::block_list)]
    pub released: Vec<ReleasedAddress>,
}

/// An address given back, and when.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleasedAddress {
    /// The address's ordinal in the block.
    pub ordinal: u32,
    /// Seconds since the Unix epoch when it was released.
    pub at: i64,
}

/// The holder of one or more addresses in a block.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllocationAttributes {
    /// The IPAMHandle that owns the addresses.
    #[serde(default, rename = "handleID", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub handle_id: Option<String>,
    /// Free-form facts about the holder (node, namespace, pod).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secondary: BTreeMap<String, String>,
}

impl IpamBlockSpec {
    /// An empty block of `cidr`, with every address free.
    pub fn empty(cidr: &IpNet) -> Self {
        let n = block_addresses(cidr).unwrap_or(0);
        IpamBlockSpec {
            cidr: cidr.to_string(),
            affinity: None,
            strict_affinity: false,
            allocations: vec![None; n as usize],
            unallocated: (0..n).collect(),
            attributes: vec![],
            deleted: false,
            released: vec![],
        }
    }

    pub fn network(&self) -> Result<IpNet, String> {
        parse_network(&self.cidr)
    }

    /// The node the block belongs to, from `host:<nodename>`.
    pub fn affine_node(&self) -> Option<&str> {
        self.affinity.as_deref()?.strip_prefix(HOST_AFFINITY_PREFIX)
    }

    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        if let Some(a) = &self.affinity {
            match a.strip_prefix(HOST_AFFINITY_PREFIX) {
                Some(node) => {
                    if let Err(e) = dns_subdomain(node) {
                        p.add("spec.affinity", format!("the node name {e}"));
                    }
                }
                None => p.add(
                    "spec.affinity",
                    format!("{a:?} is not an affinity; expected host:<nodename>"),
                ),
            }
        }
        let size = match p.take("spec.cidr", self.network()) {
            Some(net) => match block_addresses(&net) {
                Some(n) => Some(n as usize),
                None => {
                    p.add(
                        "spec.cidr",
                        format!(
                            "{net} is too large for a block; at most {MAX_BLOCK_ADDRESSES} addresses (IPv4 /20, IPv6 /116)"
                        ),
                    );
                    None
                }
            },
            None => None,
        };
        if let Some(size) = size
            && self.allocations.len() != size
        {
            p.add(
                "spec.allocations",
                format!(
                    "has {} entries but {} holds {size} addresses; one entry per address",
                    self.allocations.len(),
                    self.cidr
                ),
            );
        }
        for (i, a) in self.allocations.iter().enumerate() {
            if let Some(a) = a
                && *a as usize >= self.attributes.len()
            {
                p.add(
                    format!("spec.allocations[{i}]"),
                    format!(
                        "{a} is not an index into attributes, which has {} entries",
                        self.attributes.len()
                    ),
                );
            }
        }
        let mut seen = HashSet::new();
        for (i, &u) in self.unallocated.iter().enumerate() {
            let f = format!("spec.unallocated[{i}]");
            match self.allocations.get(u as usize) {
                None => p.add(
                    f,
                    format!(
                        "{u} is past the block's end; ordinals run 0 to {}",
                        self.allocations.len().saturating_sub(1)
                    ),
                ),
                Some(Some(_)) => p.add(f, format!("address {u} is both allocated and unallocated")),
                Some(None) if !seen.insert(u) => p.add(f, format!("{u} is listed twice")),
                Some(None) => {}
            }
        }
        for (i, r) in self.released.iter().enumerate() {
            if r.ordinal as usize >= self.allocations.len() {
                p.add(
                    format!("spec.released[{i}].ordinal"),
                    format!("{} is past the block's end", r.ordinal),
                );
            }
        }
        for (i, a) in self.attributes.iter().enumerate() {
            if a.handle_id.as_deref() == Some("") {
                p.add(
                    format!("spec.attributes[{i}].handleID"),
                    "is empty; leave it out or name the handle",
                );
            }
        }
        p.0
    }
}

/// The addresses one holder (a pod, usually) has, counted per block. Its
/// object name is the handle ID.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "IPAMHandle",
    plural = "ipamhandles",
    root = "IpamHandle",
    derive = "PartialEq",
    doc = "The addresses one holder has, per block. Written by IPAM only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IpamHandleSpec {
    /// The handle's ID, as in the blocks' attributes.
    #[serde(rename = "handleID")]
    #[schemars(transform = schema_rules::handle_id)]
    pub handle_id: String,
    /// Block CIDR to the number of addresses held in it.
    #[serde(default)]
    #[schemars(transform = schema_rules::handle_blocks)]
    pub block: BTreeMap<String, u32>,
    /// The handle is being released. Default false.
    #[serde(default)]
    pub deleted: bool,
}

impl IpamHandleSpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        if self.handle_id.is_empty() || self.handle_id.chars().any(char::is_control) {
            p.add("spec.handleID", "a handle needs a printable, non-empty ID");
        }
        for cidr in self.block.keys() {
            p.take(&format!("spec.block[{cidr}]"), parse_network(cidr));
        }
        p.0
    }
}

/// Where a node's claim on a block stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AffinityState {
    /// Claimed; the block is being written.
    Pending,
    /// The block belongs to the node.
    Confirmed,
    /// Being released.
    PendingDeletion,
}

/// A node's claim on a block.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tartan.dev",
    version = "v1",
    kind = "BlockAffinity",
    plural = "blockaffinities",
    root = "BlockAffinity",
    derive = "PartialEq",
    doc = "A node's claim on an address block. Written by IPAM only."
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockAffinitySpec {
    /// The node's name.
    #[schemars(transform = schema_rules::dns_name)]
    pub node: String,
    /// The block's network.
    #[schemars(transform = schema_rules::network)]
    pub cidr: String,
    pub state: AffinityState,
    /// The claim is being released. Default false.
    #[serde(default)]
    pub deleted: bool,
}

impl BlockAffinitySpec {
    /// Every problem with this spec; fields are named from `spec`.
    pub fn check(&self) -> Vec<Problem> {
        let mut p = Problems::default();
        p.take("spec.node", dns_subdomain(&self.node));
        p.take("spec.cidr", parse_network(&self.cidr));
        p.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_names() {
        let n = |s: &str| block_name(&s.parse().unwrap());
        assert_eq!(n("10.244.0.0/26"), "10-244-0-0-26");
        assert_eq!(n("192.168.255.192/30"), "192-168-255-192-30");
        assert_eq!(n("fd00:10:244::40/122"), "fd00-10-244-0-0-0-0-40-122");
        assert_eq!(n("::/122"), "0-0-0-0-0-0-0-0-122");
        for s in ["10.0.0.0/24", "fd00::/122", "::/128"] {
            let name = n(s);
            assert!(
                super::super::common::dns_subdomain(&name).is_ok(),
                "{name} is not a valid object name"
            );
        }
    }

    #[test]
    fn an_empty_block_is_consistent() {
        let b = IpamBlockSpec::empty(&"10.244.0.0/29".parse().unwrap());
        assert_eq!(b.allocations.len(), 8);
        assert_eq!(b.unallocated, (0..8).collect::<Vec<_>>());
        assert!(b.check().is_empty());
        assert!(!b.strict_affinity && !b.deleted);
    }

    #[test]
    fn defaults_fill_in() {
        let b: IpamBlockSpec = serde_json::from_str(r#"{"cidr": "10.0.0.0/31"}"#).unwrap();
        assert!(b.allocations.is_empty() && !b.deleted && b.affinity.is_none());
        // An entry per address is still required.
        assert_eq!(b.check().len(), 1);
        let a: BlockAffinitySpec =
            serde_json::from_str(r#"{"node": "n1", "cidr": "10.0.0.0/26", "state": "Pending"}"#)
                .unwrap();
        assert!(!a.deleted);
    }
}
