//! Giving addresses back: by handle, by address, and garbage collection
//! of handles whose owners are gone (with repair of lost BlockAffinity
//! records).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use ipnet::IpNet;

use tartan_api::resources::{BlockAffinity, IpamBlock, IpamHandle};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;
use tracing::{info, warn};

use super::block;
use super::local::{NODE_LABEL, node_label_value};
use super::{Ipam, IpamError, affinity_name, handle_object_name, now};

impl Ipam {
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
    /// The blocks read are those the handle's IPAMHandle names; without
    /// one (a crash before it was written), every block.
    pub async fn release(&self, handle: &str) -> Result<Vec<IpAddr>, IpamError> {
        let which = |attr_handle: &str, _| attr_handle == handle;
        let released = match self.handle_blocks(handle).await? {
            Some(blocks) => self.release_in(blocks, which).await?,
            None => self.release_where(which).await?,
        };
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
        self.release_in(blocks, which).await
    }

    /// [`Ipam::release_where`] over `blocks` only.
    async fn release_in(
        &self,
        blocks: Vec<IpamBlock>,
        which: impl Fn(&str, IpAddr) -> bool,
    ) -> Result<Vec<(String, IpAddr)>, IpamError> {
        let (out, mut errors) = self.release_in_each(blocks, which).await;
        match errors.is_empty() {
            true => Ok(out),
            false => Err(errors.swap_remove(0)),
        }
    }

    /// [`Self::release_in`] going on past a block it could not write:
    /// what was released, and each block's failure.
    async fn release_in_each(
        &self,
        blocks: Vec<IpamBlock>,
        which: impl Fn(&str, IpAddr) -> bool,
    ) -> (Vec<(String, IpAddr)>, Vec<IpamError>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
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
                .await;
            match r {
                Ok(Ok((got, _))) => {
                    for (h, a) in &got {
                        info!(handle = %h, address = %a, "released");
                    }
                    out.extend(got);
                }
                Ok(Err(())) => {}
                Err(e) => {
                    warn!(block = %net, error = %e, "could not release in this block");
                    errors.push(e);
                }
            }
        }
        (out, errors)
    }

    /// Garbage collection on this node: release every allocation whose
    /// handle starts with `prefix`, that `keep` rejects, and that this
    /// node holds (its holder facts name this node, or without them its
    /// block is this node's: a runtime knows only its own node's
    /// attachments, so another node's are never its to collect); drop the IPAMHandles of what was released, and such
    /// handles that hold nothing; restore BlockAffinity records missing
    /// for this node's blocks. Returns what was released, per handle.
    ///
    /// A write that fails does not stop the collection (the CNI
    /// specification asks a GC to remove as much as it can): the rest is
    /// done, and the failures come back in [`Collected::errors`]. Only a
    /// failure to read what there is fails the whole call.
    pub async fn gc(
        &self,
        prefix: &str,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Collected, IpamError> {
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let mut doomed: HashSet<(String, IpAddr)> = HashSet::new();
        for b in &blocks {
            let Ok(net) = b.spec.network() else { continue };
            for (o, a) in b.spec.allocations.iter().enumerate() {
                let Some(attr) = a.and_then(|a| b.spec.attributes.get(a as usize)) else {
                    continue;
                };
                let h = attr.handle_id.as_deref().unwrap_or("");
                // Held by this node: as its holder facts say, or, for an
                // allocation without them, as its block's affinity says.
                let mine = match attr.secondary.get("node") {
                    Some(n) => *n == self.cfg.node,
                    None => b.spec.affine_node() == Some(self.cfg.node.as_str()),
                };
                if mine
                    && h.starts_with(prefix)
                    && !keep(h)
                    && let Some(addr) = u32::try_from(o)
                        .ok()
                        .and_then(|o| block::address_at(&net, o))
                {
                    doomed.insert((h.to_string(), addr));
                }
            }
        }
        let (released, mut errors) = self
            .release_in_each(blocks, |h, a| doomed.contains(&(h.to_string(), a)))
            .await;
        let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for (h, a) in released {
            out.entry(h).or_default().push(a);
        }
        let doomed_handles: HashSet<&str> = doomed.iter().map(|(h, _)| h.as_str()).collect();
        let (handles, _) = self.store.list_typed::<IpamHandle>(None).await?;
        // Which handles hold an address anywhere, and this node's blocks,
        // read after the handles: an ADD writes its block before its
        // handle (a DEL releases before it deletes), so a handle listed
        // above whose addresses are taken shows them here, whichever node
        // took them. A handle of this node's blocks that holds nothing is
        // an orphan (its removal failed after its addresses went back).
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let mut holding: HashSet<String> = HashSet::new();
        let mut own_blocks: HashSet<IpNet> = HashSet::new();
        for b in &blocks {
            let Ok(net) = b.spec.network() else { continue };
            holding.extend(block::holders(&b.spec, &net).into_keys());
            if b.spec.affine_node() == Some(self.cfg.node.as_str()) {
                own_blocks.insert(net);
            }
        }
        for h in handles {
            let id = &h.spec.handle_id;
            let orphan = !holding.contains(id.as_str())
                && h.spec.block.keys().all(|k| {
                    k.parse::<IpNet>()
                        .is_ok_and(|net| own_blocks.contains(&net))
                });
            let empty = h.spec.block.values().all(|n| *n == 0) || orphan;
            let ours = doomed_handles.contains(id.as_str());
            // A handle whose addresses could not all be released stays:
            // it is how the next GC finds them.
            let unreleased = ours && !released_all(&doomed, &out, id);
            if id.starts_with(prefix) && !keep(id) && (ours || empty) && !unreleased {
                let name = h.metadata.name.clone().unwrap_or_default();
                match self.drop_handle_object(&name).await {
                    Ok(()) => {
                        out.entry(id.clone()).or_default();
                    }
                    Err(e) => {
                        warn!(handle = %id, error = %e, "could not remove the handle");
                        errors.push(e);
                    }
                }
            }
        }
        if let Err(e) = self.repair_affinities().await {
            warn!(error = %e, "could not repair this node's block affinities");
            errors.push(e);
        }
        Ok(Collected {
            released: out,
            errors,
        })
    }

    /// Recreate the BlockAffinity of any block this node holds without one
    /// (a crash between claiming a block and recording the claim), and
    /// label this node's affinities written before the label existed (an
    /// ADD finds them by it).
    async fn repair_affinities(&self) -> Result<(), IpamError> {
        let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
        let (affinities, _) = self.store.list_typed::<BlockAffinity>(None).await?;
        let value = node_label_value(&self.cfg.node);
        for a in &affinities {
            let labelled = a
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NODE_LABEL))
                .is_some_and(|v| *v == value);
            if a.spec.node != self.cfg.node || labelled {
                continue;
            }
            let mut a = a.clone();
            a.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert(NODE_LABEL.to_string(), value.clone());
            match self.store.update_typed(&a).await {
                // Changed meanwhile: the next GC tries again.
                Ok(_) | Err(StoreError::Conflict { .. } | StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
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
}

/// What a GC released, per handle, and what it could not do.
#[derive(Debug, Default)]
pub struct Collected {
    pub released: BTreeMap<String, Vec<IpAddr>>,
    pub errors: Vec<IpamError>,
}

/// Every address of handle `id` that GC meant to release was released.
fn released_all(
    doomed: &HashSet<(String, IpAddr)>,
    released: &BTreeMap<String, Vec<IpAddr>>,
    id: &str,
) -> bool {
    let got = released.get(id).map(Vec::as_slice).unwrap_or(&[]);
    doomed
        .iter()
        .filter(|(h, _)| h == id)
        .all(|(_, a)| got.contains(a))
}
