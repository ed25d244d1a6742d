//! Block IPAM over the datastore.
//!
//! Pools are carved into blocks of `blockSize`; a node claims a block by
//! creating its IPAMBlock with `affinity: host:<node>` (the create is the
//! atomic claim: a second claimant meets AlreadyExists), then records a
//! BlockAffinity. Every change to a block is a compare-and-swap on its
//! resourceVersion, so two writers never both take an address.
//!
//! An address is written into its block (with the handle in the block's
//! attributes) before the IPAMHandle is written, so a crash between the two
//! leaves an allocation that GC finds by scanning blocks, never an address
//! that is in use but free in its block. Asking again with the same handle
//! returns the address already held (a retried ADD).

pub mod block;
mod error;
pub mod pools;
pub mod report;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use rand::Rng;
use sha2::{Digest, Sha256};
use tartan_api::resources::{
    AffinityState, BlockAffinity, BlockAffinitySpec, IpPool, IpReservation, IpamBlock,
    IpamBlockSpec, IpamHandle, IpamHandleSpec, block_name,
};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tracing::{debug, info, warn};

pub use error::IpamError;
pub use pools::{Family, Pool};

use block::Exclusions;

/// How many compare-and-swap rounds one call makes before giving up.
const MAX_ATTEMPTS: u32 = 400;

/// How long a released address rests before reuse, unless configured.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(10);

/// What one node's IPAM is told.
#[derive(Debug, Clone)]
pub struct IpamConfig {
    pub node: String,
    /// IPv4 pools to draw from, by name or CIDR; empty: every pool.
    pub ipv4_pools: Vec<String>,
    pub ipv6_pools: Vec<String>,
    /// Give an IPv4 address: `None` when some pool applies, `Some(true)`
    /// always (an error if no pool applies), `Some(false)` never.
    pub assign_ipv4: Option<bool>,
    pub assign_ipv6: Option<bool>,
    /// Blocks this node claims may not lend addresses to other nodes, and
    /// this node never borrows.
    pub strict_affinity: bool,
    pub cooldown: Duration,
}

impl IpamConfig {
    pub fn new(node: &str) -> Self {
        IpamConfig {
            node: node.to_string(),
            ipv4_pools: vec![],
            ipv6_pools: vec![],
            assign_ipv4: None,
            assign_ipv6: None,
            strict_affinity: false,
            cooldown: DEFAULT_COOLDOWN,
        }
    }

    fn wanted(&self, f: Family) -> (&[String], Option<bool>) {
        match f {
            Family::V4 => (&self.ipv4_pools, self.assign_ipv4),
            Family::V6 => (&self.ipv6_pools, self.assign_ipv6),
        }
    }
}

/// The object name of a handle's IPAMHandle: the handle itself when it is a
/// valid object name, otherwise `h-` and a digest of it.
pub fn handle_object_name(handle: &str) -> String {
    let ok = !handle.is_empty()
        && handle.len() <= 253
        && handle
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && handle.starts_with(|c: char| c.is_ascii_alphanumeric())
        && handle.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return handle.to_string();
    }
    let digest = Sha256::digest(handle.as_bytes());
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("h-{hex}")
}

/// The object name of a node's claim on a block.
pub fn affinity_name(node: &str, cidr: &IpNet) -> String {
    format!("{node}.{}", block_name(cidr))
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Addresses taken for a handle, and how many in each block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub handle: String,
    pub addresses: Vec<IpNet>,
    pub blocks: BTreeMap<String, u32>,
}

/// Everything one allocation looks at, read once.
struct Snapshot {
    pools: Vec<IpPool>,
    reservations: Vec<IpReservation>,
    blocks: Vec<IpamBlock>,
    node_labels: BTreeMap<String, String>,
}

/// One node's IPAM client.
pub struct Ipam {
    store: Arc<dyn Datastore>,
    cfg: IpamConfig,
}

impl Ipam {
    pub fn new(store: Arc<dyn Datastore>, cfg: IpamConfig) -> Self {
        Ipam { store, cfg }
    }

    pub fn config(&self) -> &IpamConfig {
        &self.cfg
    }

    async fn snapshot(&self) -> Result<Snapshot, IpamError> {
        // Three independent reads, in flight together.
        let (pools, reservations, blocks) = tokio::try_join!(
            self.store.list_typed::<IpPool>(None),
            self.store.list_typed::<IpReservation>(None),
            self.store.list_typed::<IpamBlock>(None),
        )?;
        // The node's labels, only when a pool selects nodes by them.
        let node_labels = if pools::any_node_selector(&pools.0) {
            match self.store.get_typed::<Node>(None, &self.cfg.node).await {
                Ok(n) => n.metadata.labels.unwrap_or_default(),
                Err(StoreError::NotFound(_)) => {
                    debug!(node = %self.cfg.node, "no Node object; the node has no labels");
                    BTreeMap::new()
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            BTreeMap::new()
        };
        Ok(Snapshot {
            pools: pools.0,
            reservations: reservations.0,
            blocks: blocks.0,
            node_labels,
        })
    }

    /// The families to assign and their pools.
    fn plan(&self, snap: &Snapshot) -> Result<Vec<(Family, Vec<Pool>)>, IpamError> {
        let mut out = Vec::new();
        for family in [Family::V4, Family::V6] {
            let (wanted, assign) = self.cfg.wanted(family);
            if assign == Some(false) {
                continue;
            }
            let (pools, skipped) = pools::eligible(&snap.pools, family, wanted, &snap.node_labels);
            for s in &skipped {
                debug!(pool = %s.pool, why = %s.why, "pool passed over");
            }
            if pools.is_empty() {
                if assign == Some(true) || !wanted.is_empty() {
                    return Err(self.no_pool(family, &skipped));
                }
                continue;
            }
            out.push((family, pools));
        }
        if out.is_empty() {
            let (_, skipped) = pools::eligible(
                &snap.pools,
                Family::V4,
                &self.cfg.ipv4_pools,
                &snap.node_labels,
            );
            return Err(self.no_pool(Family::V4, &skipped));
        }
        Ok(out)
    }

    fn no_pool(&self, family: Family, skipped: &[pools::Skipped]) -> IpamError {
        let detail = if skipped.is_empty() {
            String::new()
        } else {
            let s: Vec<String> = skipped
                .iter()
                .map(|s| format!("{} ({})", s.pool, s.why))
                .collect();
            format!("; passed over: {}", s.join(", "))
        };
        IpamError::NoPool {
            family,
            node: self.cfg.node.clone(),
            detail,
        }
    }

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
        let mut counts = BTreeMap::new();
        for b in &snap.blocks {
            let n = block::held_by(&b.spec, handle).len();
            if n > 0 {
                counts.insert(b.spec.cidr.clone(), n as u32);
            }
        }
        Ok(Allocation {
            handle: handle.to_string(),
            addresses: got.into_iter().map(|(a, _)| IpNet::from(a)).collect(),
            blocks: counts,
        })
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
        // Already held (a retried ADD)?
        for b in &snap.blocks {
            let Ok(net) = b.spec.network() else { continue };
            if Family::of(&net) != family {
                continue;
            }
            if let Some(&o) = block::held_by(&b.spec, handle).first()
                && let Some(a) = block::address_at(&net, o)
            {
                debug!(handle, address = %a, "handle already holds an address");
                return Ok((a, net));
            }
        }
        let node = self.cfg.node.as_str();
        let reserved: Vec<(Pool, Vec<IpNet>)> = pools
            .iter()
            .map(|p| (p.clone(), pools::reserved_in(p, &snap.reservations)))
            .collect();
        let pool_of = |net: &IpNet| reserved.iter().find(|(p, _)| p.net.contains(net));
        let mut cooling = block::Shortage::default();
        let mut note_cooling = |s: block::Shortage| {
            cooling.cooling += s.cooling;
            if let Some(w) = s.next_free_in {
                cooling.next_free_in = Some(cooling.next_free_in.map_or(w, |c| c.min(w)));
            }
        };

        // 1. The node's own blocks.
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
                    return Ok((addr, net));
                }
                Err(s) => note_cooling(s),
            }
        }

        // 2. A new block.
        let taken: HashSet<IpNet> = snap
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

    /// Change a block by compare-and-swap: `change` edits the latest copy
    /// or says why not (`Err`); a lost race re-reads and tries again.
    /// `Ok(Err(_))` carries `change`'s refusal (or a vanished block).
    async fn cas_block<T, E: Default>(
        &self,
        mut b: IpamBlock,
        mut change: impl FnMut(&mut IpamBlockSpec) -> Result<T, E>,
    ) -> Result<Result<(T, IpamBlock), E>, IpamError> {
        let name = b.metadata.name.clone().unwrap_or_default();
        for attempt in 0..MAX_ATTEMPTS {
            let before = b.spec.clone();
            let t = match change(&mut b.spec) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e)),
            };
            if b.spec == before {
                return Ok(Ok((t, b)));
            }
            match self.store.update_typed(&b).await {
                Ok(written) => return Ok(Ok((t, written))),
                Err(StoreError::Conflict { .. }) => {
                    backoff(attempt).await;
                    match self.store.get_typed::<IpamBlock>(None, &name).await {
                        Ok(fresh) => b = fresh,
                        Err(StoreError::NotFound(_)) => return Ok(Err(E::default())),
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(StoreError::NotFound(_)) => return Ok(Err(E::default())),
                Err(e) => return Err(e.into()),
            }
        }
        Err(IpamError::Contention {
            attempts: MAX_ATTEMPTS,
            what: format!("block {name}"),
        })
    }

    /// Claim `cidr` for this node. `None`: another node holds it.
    async fn claim(&self, cidr: &IpNet) -> Result<Option<IpamBlock>, IpamError> {
        let node = &self.cfg.node;
        let mut spec = IpamBlockSpec::empty(cidr);
        spec.affinity = Some(format!("host:{node}"));
        spec.strict_affinity = self.cfg.strict_affinity;
        let name = block_name(cidr);
        match self.store.create_typed(&IpamBlock::new(&name, spec)).await {
            Ok(b) => {
                info!(block = %cidr, node, "claimed a block");
                self.ensure_affinity(cidr).await?;
                Ok(Some(b))
            }
            Err(StoreError::AlreadyExists(_)) => {
                // Another ADD on this node may have just claimed it.
                let b = self.store.get_typed::<IpamBlock>(None, &name).await?;
                Ok((b.spec.affine_node() == Some(node.as_str())).then_some(b))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn ensure_affinity(&self, cidr: &IpNet) -> Result<(), IpamError> {
        let a = BlockAffinity::new(
            &affinity_name(&self.cfg.node, cidr),
            BlockAffinitySpec {
                node: self.cfg.node.clone(),
                cidr: cidr.to_string(),
                state: AffinityState::Confirmed,
                deleted: false,
            },
        );
        match self.store.create_typed(&a).await {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Write the IPAMHandle: per block, how many addresses the handle holds.
    async fn record_handle(
        &self,
        handle: &str,
        counts: &BTreeMap<String, u32>,
    ) -> Result<(), IpamError> {
        let name = handle_object_name(handle);
        let fresh = IpamHandle::new(
            &name,
            IpamHandleSpec {
                handle_id: handle.to_string(),
                block: counts.clone(),
                deleted: false,
            },
        );
        // Usually the handle is new: try that first (one round trip).
        match self.store.create_typed(&fresh).await {
            Ok(_) => return Ok(()),
            Err(StoreError::AlreadyExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
        for attempt in 0..MAX_ATTEMPTS {
            match self.store.get_typed::<IpamHandle>(None, &name).await {
                Err(StoreError::NotFound(_)) => match self.store.create_typed(&fresh).await {
                    Ok(_) => return Ok(()),
                    Err(StoreError::AlreadyExists(_)) => {}
                    Err(e) => return Err(e.into()),
                },
                Ok(mut h) => {
                    if h.spec.handle_id != handle {
                        return Err(IpamError::Corrupt(format!(
                            "IPAMHandle {name} belongs to handle {:?}, not {handle:?}",
                            h.spec.handle_id
                        )));
                    }
                    let mut merged = h.spec.block.clone();
                    merged.extend(counts.clone());
                    if merged == h.spec.block && !h.spec.deleted {
                        return Ok(());
                    }
                    h.spec.block = merged;
                    h.spec.deleted = false;
                    match self.store.update_typed(&h).await {
                        Ok(_) => return Ok(()),
                        Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
            }
            backoff(attempt).await;
        }
        Err(IpamError::Contention {
            attempts: MAX_ATTEMPTS,
            what: format!("handle {name}"),
        })
    }

    /// The addresses `handle` holds, in every block.
    pub async fn held(&self, handle: &str) -> Result<Vec<IpAddr>, IpamError> {
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let mut out = Vec::new();
        for b in blocks {
            let Ok(net) = b.spec.network() else { continue };
            out.extend(
                block::held_by(&b.spec, handle)
                    .into_iter()
                    .filter_map(|o| block::address_at(&net, o)),
            );
        }
        out.sort();
        Ok(out)
    }

    /// Release every address `handle` holds and its IPAMHandle. Releasing
    /// what is not held succeeds. Returns the addresses released.
    pub async fn release(&self, handle: &str) -> Result<Vec<IpAddr>, IpamError> {
        let released = self
            .release_where(|attr_handle, _| attr_handle == handle)
            .await?;
        self.drop_handle_object(&handle_object_name(handle)).await?;
        Ok(released.into_iter().map(|(_, a)| a).collect())
    }

    /// Release one address, whoever holds it. Returns its handle, or
    /// `None` when it was not allocated.
    pub async fn release_address(&self, addr: IpAddr) -> Result<Option<String>, IpamError> {
        let released = self.release_where(|_, a| a == addr).await?;
        let Some((handle, _)) = released.into_iter().next() else {
            return Ok(None);
        };
        // Drop the handle object when it now holds nothing.
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        if !blocks
            .iter()
            .any(|b| !block::held_by(&b.spec, &handle).is_empty())
        {
            self.drop_handle_object(&handle_object_name(&handle))
                .await?;
        }
        Ok(Some(handle))
    }

    async fn drop_handle_object(&self, name: &str) -> Result<(), IpamError> {
        match self
            .store
            .delete_typed::<IpamHandle>(None, name, None)
            .await
        {
            Ok(()) | Err(StoreError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Release, in every block, the allocations `which(handle, address)`
    /// picks. Returns `(handle, address)` of each.
    async fn release_where(
        &self,
        which: impl Fn(&str, IpAddr) -> bool,
    ) -> Result<Vec<(String, IpAddr)>, IpamError> {
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let mut out = Vec::new();
        for b in blocks {
            let Ok(net) = b.spec.network() else { continue };
            let hit = block::holders(&b.spec, &net)
                .iter()
                .any(|(h, addrs)| addrs.iter().any(|a| which(h, *a)));
            if !hit {
                continue;
            }
            let t = now();
            let r = self
                .cas_block(b, |spec| {
                    let mut got = Vec::new();
                    block::release_where(spec, t, |o, attr| {
                        let h = attr.handle_id.as_deref().unwrap_or("");
                        let hit = block::address_at(&net, o).is_some_and(|a| which(h, a));
                        if hit && let Some(a) = block::address_at(&net, o) {
                            got.push((h.to_string(), a));
                        }
                        hit
                    });
                    Ok::<_, ()>(got)
                })
                .await?;
            if let Ok((got, _)) = r {
                for (h, a) in &got {
                    info!(handle = %h, address = %a, "released");
                }
                out.extend(got);
            }
        }
        Ok(out)
    }

    /// Garbage collection: release every allocation whose handle starts
    /// with `prefix` and that `keep` rejects; drop such IPAMHandles; restore
    /// BlockAffinity records missing for this node's blocks. Returns what
    /// was released, per handle.
    pub async fn gc(
        &self,
        prefix: &str,
        keep: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, Vec<IpAddr>>, IpamError> {
        let released = self
            .release_where(|h, _| h.starts_with(prefix) && !keep(h))
            .await?;
        let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for (h, a) in released {
            out.entry(h).or_default().push(a);
        }
        let (handles, _) = self.store.list_typed::<IpamHandle>(None).await?;
        for h in handles {
            let id = &h.spec.handle_id;
            if id.starts_with(prefix) && !keep(id) {
                let name = h.metadata.name.clone().unwrap_or_default();
                self.drop_handle_object(&name).await?;
                out.entry(id.clone()).or_default();
            }
        }
        self.repair_affinities().await?;
        Ok(out)
    }

    /// Recreate the BlockAffinity of any block this node holds without one
    /// (a crash between claiming a block and recording the claim).
    async fn repair_affinities(&self) -> Result<(), IpamError> {
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let (affinities, _) = self.store.list_typed::<BlockAffinity>(None).await?;
        let have: HashSet<String> = affinities
            .iter()
            .filter_map(|a| a.metadata.name.clone())
            .collect();
        for b in blocks {
            if b.spec.affine_node() != Some(self.cfg.node.as_str()) {
                continue;
            }
            let Ok(net) = b.spec.network() else { continue };
            if !have.contains(&affinity_name(&self.cfg.node, &net)) {
                warn!(block = %net, "block had no affinity record; restoring it");
                self.ensure_affinity(&net).await?;
            }
        }
        Ok(())
    }

    /// Whether an ADD would find an address now, for each family that
    /// applies (CNI STATUS). Reads only; claims nothing.
    pub async fn check_room(&self) -> Result<(), IpamError> {
        let snap = self.snapshot().await?;
        let node = self.cfg.node.as_str();
        let t = now();
        for (family, pools) in self.plan(&snap)? {
            let mut room = false;
            let taken: HashSet<IpNet> = snap
                .blocks
                .iter()
                .filter_map(|b| b.spec.network().ok())
                .collect();
            for p in &pools {
                let reserved = pools::reserved_in(p, &snap.reservations);
                let ex = Exclusions {
                    reserved: &reserved,
                    now: t,
                    cooldown: self.cfg.cooldown.as_secs() as i64,
                };
                let usable = |b: &IpamBlock| {
                    let mine = b.spec.affine_node() == Some(node);
                    let lendable = !self.cfg.strict_affinity && !b.spec.strict_affinity;
                    b.spec.network().is_ok_and(|net| {
                        p.net.contains(&net)
                            && (mine || lendable)
                            && block::pick(&b.spec, &net, &ex).is_ok()
                    })
                };
                if snap.blocks.iter().any(usable)
                    || pools::free_blocks(p, &taken, &reserved).next().is_some()
                {
                    room = true;
                    break;
                }
            }
            if !room {
                let names: Vec<String> = pools.iter().map(Pool::describe).collect();
                return Err(IpamError::Exhausted {
                    family,
                    node: node.to_string(),
                    pools: names.join(", "),
                    detail: String::new(),
                });
            }
        }
        Ok(())
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

/// A short, growing, jittered pause after a lost race, so that many
/// writers on one block do not retry in lockstep.
async fn backoff(attempt: u32) {
    let cap_us = 200u64 * u64::from(attempt.min(20) + 1);
    let us = rand::rng().random_range(0..=cap_us);
    tokio::time::sleep(Duration::from_micros(us)).await;
}

#[cfg(test)]
mod tests;
