//! What `tartanctl ipam show` and `ipam check` print, computed from the
//! stored objects. Pure.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Serialize;
use tartan_api::resources::{IpPool, IpamBlock, IpamHandle, WorkloadEndpoint};

use super::block;

/// One block's use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockUsage {
    pub cidr: String,
    /// The node it belongs to, if any.
    pub node: Option<String>,
    pub size: usize,
    pub in_use: usize,
    /// Addresses given to pods on other nodes.
    pub lent: usize,
}

/// One pool's use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolUsage {
    pub name: String,
    pub cidr: String,
    pub block_size: u8,
    pub disabled: bool,
    /// Addresses in the pool (saturating: an IPv6 /64 does not fit).
    pub capacity: u64,
    pub in_use: usize,
    pub blocks: Vec<BlockUsage>,
}

/// Use per pool, each with its blocks; blocks outside every pool come
/// last under a pool named `(none)`.
pub fn usage(pools: &[IpPool], blocks: &[IpamBlock]) -> Vec<PoolUsage> {
    let mut out: Vec<PoolUsage> = pools
        .iter()
        .filter_map(|p| {
            let net = p.spec.network().ok()?;
            let bits = u32::from(net.max_prefix_len() - net.prefix_len());
            Some(PoolUsage {
                name: p.metadata.name.clone().unwrap_or_default(),
                cidr: net.to_string(),
                block_size: p.spec.effective_block_size().unwrap_or(0),
                disabled: p.spec.disabled,
                capacity: 1u64.checked_shl(bits).unwrap_or(u64::MAX),
                in_use: 0,
                blocks: vec![],
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let mut orphans = Vec::new();
    for b in blocks {
        let Ok(net) = b.spec.network() else { continue };
        let node = b.spec.affine_node().map(str::to_string);
        let lent = b
            .spec
            .allocations
            .iter()
            .flatten()
            .filter(|&&a| {
                let holder = b
                    .spec
                    .attributes
                    .get(a as usize)
                    .and_then(|x| x.secondary.get("node"));
                holder.is_some() && holder != node.as_ref()
            })
            .count();
        let u = BlockUsage {
            cidr: net.to_string(),
            node,
            size: b.spec.allocations.len(),
            in_use: block::in_use(&b.spec),
            lent,
        };
        match out
            .iter_mut()
            .find(|p| p.cidr.parse::<IpNet>().is_ok_and(|pn| pn.contains(&net)))
        {
            Some(p) => {
                p.in_use += u.in_use;
                p.blocks.push(u);
            }
            None => orphans.push(u),
        }
    }
    for p in &mut out {
        p.blocks.sort_by(|a, b| {
            let k = |u: &BlockUsage| u.cidr.parse::<IpNet>().ok();
            k(a).cmp(&k(b))
        });
    }
    if !orphans.is_empty() {
        out.push(PoolUsage {
            name: "(none)".into(),
            cidr: String::new(),
            block_size: 0,
            disabled: false,
            capacity: 0,
            in_use: orphans.iter().map(|u| u.in_use).sum(),
            blocks: orphans,
        });
    }
    out
}

/// Something `ipam check` found wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "camelCase", tag = "problem")]
pub enum Finding {
    /// An address is allocated but no pod interface uses it (a leak).
    AllocationWithoutPod { address: IpAddr, handle: String },
    /// A pod interface has an address IPAM does not hold for it.
    PodWithoutAllocation {
        address: IpAddr,
        pod: String,
        container_id: String,
    },
    /// One address held twice: by two allocations or two pod interfaces.
    Duplicate {
        address: IpAddr,
        holders: Vec<String>,
    },
    /// An IPAMHandle that holds nothing.
    EmptyHandle { handle: String },
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::AllocationWithoutPod { address, handle } => {
                write!(f, "{address}: allocated to {handle} but no pod uses it")
            }
            Finding::PodWithoutAllocation {
                address,
                pod,
                container_id,
            } => write!(
                f,
                "{address}: used by pod {pod} (container {container_id}) but not allocated to it"
            ),
            Finding::Duplicate { address, holders } => {
                write!(f, "{address}: held more than once: {}", holders.join(", "))
            }
            Finding::EmptyHandle { handle } => {
                write!(f, "handle {handle} holds no address")
            }
        }
    }
}

/// The container ID of a handle `<network>.<containerID>`.
pub fn container_of(handle: &str) -> &str {
    handle.rsplit_once('.').map_or(handle, |(_, c)| c)
}

/// Cross-check allocations, handles and pod interfaces.
pub fn check(
    blocks: &[IpamBlock],
    handles: &[IpamHandle],
    endpoints: &[WorkloadEndpoint],
) -> Vec<Finding> {
    let mut out = Vec::new();
    // address -> handles holding it
    let mut held: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    for b in blocks {
        let Ok(net) = b.spec.network() else { continue };
        for (h, addrs) in block::holders(&b.spec, &net) {
            for a in addrs {
                held.entry(a).or_default().push(h.clone());
            }
        }
    }
    // address -> pods using it, with container IDs
    let mut used: BTreeMap<IpAddr, Vec<(String, String)>> = BTreeMap::new();
    for w in endpoints {
        let pod = format!(
            "{}/{}",
            w.metadata.namespace.as_deref().unwrap_or(""),
            w.spec.pod
        );
        for n in &w.spec.ip_networks {
            if let Ok(net) = n.parse::<IpNet>() {
                used.entry(net.addr())
                    .or_default()
                    .push((pod.clone(), w.spec.container_id.clone()));
            }
        }
    }
    for (a, hs) in &held {
        if hs.len() > 1 {
            out.push(Finding::Duplicate {
                address: *a,
                holders: hs.clone(),
            });
        }
        for h in hs {
            let c = container_of(h);
            if !used.get(a).is_some_and(|u| u.iter().any(|(_, id)| id == c)) {
                out.push(Finding::AllocationWithoutPod {
                    address: *a,
                    handle: h.clone(),
                });
            }
        }
    }
    for (a, us) in &used {
        if us.len() > 1 {
            out.push(Finding::Duplicate {
                address: *a,
                holders: us.iter().map(|(p, _)| p.clone()).collect(),
            });
        }
        for (pod, c) in us {
            let ok = held
                .get(a)
                .is_some_and(|hs| hs.iter().any(|h| container_of(h) == c));
            if !ok {
                out.push(Finding::PodWithoutAllocation {
                    address: *a,
                    pod: pod.clone(),
                    container_id: c.clone(),
                });
            }
        }
    }
    let holding: HashMap<&str, ()> = held.values().flatten().map(|h| (h.as_str(), ())).collect();
    for h in handles {
        if !holding.contains_key(h.spec.handle_id.as_str()) {
            out.push(Finding::EmptyHandle {
                handle: h.spec.handle_id.clone(),
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tartan_api::resources::{IpPoolSpec, IpamBlockSpec, IpamHandleSpec, WorkloadEndpointSpec};

    fn blk(cidr: &str, node: &str, holders: &[(u32, &str, &str)]) -> IpamBlock {
        let net: IpNet = cidr.parse().unwrap();
        let mut s = IpamBlockSpec::empty(&net);
        s.affinity = Some(format!("host:{node}"));
        for (o, h, on) in holders {
            let sec = BTreeMap::from([("node".to_string(), on.to_string())]);
            block::assign(&mut s, *o, h, &sec);
        }
        IpamBlock::new(&tartan_api::resources::block_name(&net), s)
    }

    fn wep(pod: &str, cid: &str, ip: &str) -> WorkloadEndpoint {
        let mut w = WorkloadEndpoint::new(
            &format!("{pod}.eth0"),
            WorkloadEndpointSpec {
                node: "n1".into(),
                pod: pod.into(),
                container_id: cid.into(),
                endpoint: "eth0".into(),
                interface_name: "tarx".into(),
                mac: None,
                ip_networks: vec![format!("{ip}/32")],
                ports: vec![],
            },
        );
        w.metadata.namespace = Some("default".into());
        w
    }

    #[test]
    fn usage_counts_per_pool_and_lending() {
        let pools = [IpPool::new("p", IpPoolSpec::new("10.0.0.0/24"))];
        let blocks = [
            blk("10.0.0.64/26", "n2", &[(0, "net.c", "n2")]),
            blk(
                "10.0.0.0/26",
                "n1",
                &[(1, "net.a", "n1"), (2, "net.b", "n2")],
            ),
            blk("10.9.0.0/26", "n3", &[]),
        ];
        let u = usage(&pools, &blocks);
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].in_use, 3);
        assert_eq!(u[0].capacity, 256);
        assert_eq!(u[0].blocks[0].cidr, "10.0.0.0/26");
        assert_eq!(u[0].blocks[0].lent, 1);
        assert_eq!(u[1].name, "(none)");
    }

    #[test]
    fn check_finds_leaks_orphans_and_duplicates() {
        let blocks = [
            blk(
                "10.0.0.0/26",
                "n1",
                &[(1, "net.a", "n1"), (2, "net.leak", "n1")],
            ),
            blk("10.0.0.0/26", "n1", &[(3, "net.dup1", "n1")]),
        ];
        let mut b2 = blocks[1].clone();
        block::assign(&mut b2.spec, 1, "net.x", &BTreeMap::new());
        let blocks = [blocks[0].clone(), b2];
        let handles = [IpamHandle::new(
            "net.gone",
            IpamHandleSpec {
                handle_id: "net.gone".into(),
                block: BTreeMap::new(),
                deleted: false,
            },
        )];
        let weps = [
            wep("a", "a", "10.0.0.1"),
            wep("z", "z", "10.0.0.9"),
            wep("d", "dup1", "10.0.0.3"),
        ];
        let f = check(&blocks, &handles, &weps);
        let text: Vec<String> = f.iter().map(|x| x.to_string()).collect();
        let has = |s: &str| text.iter().any(|t| t.contains(s));
        assert!(has("10.0.0.1: held more than once"), "{text:?}");
        assert!(has("10.0.0.2: allocated to net.leak"), "{text:?}");
        assert!(has("10.0.0.9: used by pod default/z"), "{text:?}");
        assert!(has("handle net.gone holds no address"), "{text:?}");
        assert!(!has("10.0.0.3"), "{text:?}");
    }
}
