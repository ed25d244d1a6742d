//! Taking addresses: for each family, an address the handle already
//! holds, else one from the node's own blocks, a newly claimed block, or
//! (without strict affinity) another node's block; then the IPAMHandle.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use tartan_api::resources::IpamBlock;
use tracing::{debug, info, warn};

use super::block::{self, Exclusions};
use super::plan::Snapshot;
use super::pools::{self, Family, Pool};
use super::{Allocation, Ipam, IpamError, MAX_ATTEMPTS, now};

impl Ipam {
    /// Addresses for `handle`, one per family that applies, as host
    /// networks (`/32`, `/128`), with its IPAMHandle written. The same
    /// handle asking again gets the same addresses. On failure nothing
    /// stays allocated by this call.
    pub async fn assign(
        &self,
        handle: &str,
        secondary: &BTreeMap<String, String>,
    ) -> Result<Vec<IpNet>, IpamError> {
        let a = self.allocate(handle, secondary).await?;
        self.record(&a).await?;
        Ok(a.addresses)
    }

    /// The first half of [`Ipam::assign`]: the addresses, taken in their
    /// blocks. [`Ipam::record`] writes the IPAMHandle; a caller may do other
    /// work meanwhile (nothing is lost if it never does: blocks are the
    /// truth, and GC reads them).
    pub async fn allocate(
        &self,
        handle: &str,
        secondary: &BTreeMap<String, String>,
    ) -> Result<Allocation, IpamError> {
        // Usually the handle's own blocks or this node's have room: read
        // only those. Otherwise (a new block to claim, one to borrow from)
        // read every block.
        if let Some(a) = self.allocate_locally(handle, secondary).await? {
            return Ok(a);
        }
        let mut snap = self.snapshot().await?;
        let plan = self.plan(&snap)?;
        let mut got: Vec<(IpAddr, IpNet)> = Vec::new();
        for (family, pools) in &plan {
            match self
                .assign_family(*family, pools, handle, secondary, &mut snap)
                .await
            {
                Ok(a) => got.push(a),
                Err(e) => {
                    if !got.is_empty() {
                        // Nothing half-applied: give back the other family.
                        if let Err(r) = self.release(handle).await {
                            warn!(handle, error = %r, "could not undo a partial assignment; GC will");
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(allocation(handle, &snap, got))
    }

    /// Write the IPAMHandle of an allocation.
    pub async fn record(&self, a: &Allocation) -> Result<(), IpamError> {
        self.record_handle(&a.handle, &a.blocks).await
    }

    /// One address of `family` for `handle`, and its block's network.
    async fn assign_family(
        &self,
        family: Family,
        pools: &[Pool],
        handle: &str,
        secondary: &BTreeMap<String, String>,
        snap: &mut Snapshot,
    ) -> Result<(IpAddr, IpNet), IpamError> {
        let mut cooling = block::Shortage::default();
        if let Some(got) = self
            .held_or_own(family, pools, handle, secondary, snap, &mut cooling)
            .await?
        {
            return Ok(got);
        }
        let node = self.cfg.node.as_str();
        let reserved = reserved_of(pools, snap);
        let pool_of = |net: &IpNet| reserved.iter().find(|(p, _)| p.net.contains(net));
        let mut note_cooling = |s: block::Shortage| note(&mut cooling, s);

        // 2. A new block.
        let taken: pools::Taken = snap
            .blocks
            .iter()
            .filter_map(|b| b.spec.network().ok())
            .collect();
        for (pool, res) in &reserved {
            let mut tried = 0;
            for cidr in pools::free_blocks(pool, &taken, res) {
                tried += 1;
                if tried > MAX_ATTEMPTS {
                    break;
                }
                let Some(b) = self.claim(&cidr).await? else {
                    continue;
                };
                let fresh = b.clone();
                replace_block(&mut snap.blocks, fresh);
                match self.take_from(b, res, handle, secondary).await? {
                    Ok((addr, written)) => {
                        replace_block(&mut snap.blocks, written);
                        return Ok((addr, cidr));
                    }
                    Err(s) => note_cooling(s),
                }
            }
        }

        // 3. Borrow from another node's block.
        if !self.cfg.strict_affinity {
            let others: Vec<IpamBlock> = snap
                .blocks
                .iter()
                .filter(|b| b.spec.affine_node() != Some(node) && !b.spec.strict_affinity)
                .cloned()
                .collect();
            for b in others {
                let Ok(net) = b.spec.network() else { continue };
                let Some((_, res)) = pool_of(&net) else {
                    continue;
                };
                let owner = b.spec.affine_node().unwrap_or("no node").to_string();
                match self.take_from(b, res, handle, secondary).await? {
                    Ok((addr, written)) => {
                        info!(handle, address = %addr, block = %net, owner, "borrowed an address from another node's block");
                        replace_block(&mut snap.blocks, written);
                        return Ok((addr, net));
                    }
                    Err(s) => note_cooling(s),
                }
            }
        }

        let names: Vec<String> = pools.iter().map(Pool::describe).collect();
        let mut detail = String::new();
        if cooling.cooling > 0 {
            detail = format!(
                "; {} released address(es) are cooling down, the first free again in {} s",
                cooling.cooling,
                cooling.next_free_in.unwrap_or(0)
            );
        }
        if self.cfg.strict_affinity {
            detail.push_str("; strict affinity: not borrowing from other nodes' blocks");
        }
        Err(IpamError::Exhausted {
            family,
            node: node.to_string(),
            pools: names.join(", "),
            detail,
        })
    }

    /// An address of `family` that `handle` already holds in the blocks of
    /// `snap` (a retried ADD), else one taken from this node's own blocks
    /// among them; `None` when neither has one (what is cooling is noted
    /// in `cooling`).
    pub(super) async fn held_or_own(
        &self,
        family: Family,
        pools: &[Pool],
        handle: &str,
        secondary: &BTreeMap<String, String>,
        snap: &mut Snapshot,
        cooling: &mut block::Shortage,
    ) -> Result<Option<(IpAddr, IpNet)>, IpamError> {
        for b in &snap.blocks {
            let Ok(net) = b.spec.network() else { continue };
            if Family::of(&net) != family {
                continue;
            }
            if let Some(&o) = block::held_by(&b.spec, handle).first()
                && let Some(a) = block::address_at(&net, o)
            {
                debug!(handle, address = %a, "handle already holds an address");
                return Ok(Some((a, net)));
            }
        }
        let node = self.cfg.node.as_str();
        let reserved = reserved_of(pools, snap);
        let pool_of = |net: &IpNet| reserved.iter().find(|(p, _)| p.net.contains(net));
        let mine: Vec<IpamBlock> = snap
            .blocks
            .iter()
            .filter(|b| b.spec.affine_node() == Some(node))
            .cloned()
            .collect();
        for b in mine {
            let Ok(net) = b.spec.network() else { continue };
            let Some((_, res)) = pool_of(&net) else {
                continue;
            };
            match self.take_from(b, res, handle, secondary).await? {
                Ok((addr, written)) => {
                    replace_block(&mut snap.blocks, written);
                    return Ok(Some((addr, net)));
                }
                Err(s) => note(cooling, s),
            }
        }
        Ok(None)
    }

    /// Take the next free address of `b` for `handle` by compare-and-swap,
    /// re-reading the block after every lost race. `Ok(Err(_))`: the block
    /// has nothing to give.
    async fn take_from(
        &self,
        b: IpamBlock,
        reserved: &[IpNet],
        handle: &str,
        secondary: &BTreeMap<String, String>,
    ) -> Result<Result<(IpAddr, IpamBlock), block::Shortage>, IpamError> {
        let Ok(net) = b.spec.network() else {
            return Ok(Err(block::Shortage::default()));
        };
        let ex = Exclusions {
            reserved,
            now: now(),
            cooldown: self.cfg.cooldown.as_secs() as i64,
        };
        let r = self
            .cas_block(b, |spec| {
                // Someone (a retry of ours) may have given it meanwhile.
                if let Some(&o) = block::held_by(spec, handle).first() {
                    return Ok(Some(o));
                }
                let o = block::pick(spec, &net, &ex)?;
                block::assign(spec, o, handle, secondary);
                Ok(Some(o))
            })
            .await?;
        Ok(match r {
            Ok((Some(o), written)) => match block::address_at(&net, o) {
                Some(a) => Ok((a, written)),
                None => Err(block::Shortage::default()),
            },
            Ok((None, _)) => Err(block::Shortage::default()),
            Err(s) => Err(s),
        })
    }
}

/// The allocation of `handle`: the addresses `got`, and how many it
/// holds in each block of `snap`.
pub(super) fn allocation(handle: &str, snap: &Snapshot, got: Vec<(IpAddr, IpNet)>) -> Allocation {
    let mut counts = BTreeMap::new();
    for b in &snap.blocks {
        let n = block::held_by(&b.spec, handle).len();
        if n > 0 {
            counts.insert(b.spec.cidr.clone(), n as u32);
        }
    }
    Allocation {
        handle: handle.to_string(),
        addresses: got.into_iter().map(|(a, _)| IpNet::from(a)).collect(),
        blocks: counts,
    }
}

/// Each pool with the networks reserved in it.
fn reserved_of(pools: &[Pool], snap: &Snapshot) -> Vec<(Pool, Vec<IpNet>)> {
    pools
        .iter()
        .map(|p| (p.clone(), pools::reserved_in(p, &snap.reservations)))
        .collect()
}

/// Add what `s` says is cooling to `into`.
fn note(into: &mut block::Shortage, s: block::Shortage) {
    into.cooling += s.cooling;
    if let Some(w) = s.next_free_in {
        into.next_free_in = Some(into.next_free_in.map_or(w, |c| c.min(w)));
    }
}

fn replace_block(blocks: &mut Vec<IpamBlock>, b: IpamBlock) {
    match blocks
        .iter_mut()
        .find(|x| x.metadata.name == b.metadata.name)
    {
        Some(x) => *x = b,
        None => blocks.push(b),
    }
}
