//! Giving addresses back: by handle, by address, and garbage collection
//! of handles whose owners are gone (with repair of lost BlockAffinity
//! records).

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

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

    /// Garbage collection on this node: release every allocation whose
    /// handle starts with `prefix`, that `keep` rejects, and that this
    /// node holds (its holder facts name this node, or without them its
    /// block is this node's: a runtime knows only its own node's
    /// attachments, so another node's are never its to collect); drop the IPAMHandles of what was released, and such
    /// handles that hold nothing; restore BlockAffinity records missing
    /// for this node's blocks. Returns what was released, per handle.
    pub async fn gc(
        &self,
        prefix: &str,
        keep: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, Vec<IpAddr>>, IpamError> {
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
        let released = self
            .release_in(blocks, |h, a| doomed.contains(&(h.to_string(), a)))
            .await?;
        let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
        for (h, a) in released {
            out.entry(h).or_default().push(a);
        }
        let doomed_handles: HashSet<&str> = doomed.iter().map(|(h, _)| h.as_str()).collect();
        let (handles, _) = self.store.list_typed::<IpamHandle>(None).await?;
        for h in handles {
            let id = &h.spec.handle_id;
            let empty = h.spec.block.values().all(|n| *n == 0);
            let ours = doomed_handles.contains(id.as_str());
            if id.starts_with(prefix) && !keep(id) && (ours || empty) {
                let name = h.metadata.name.clone().unwrap_or_default();
                self.drop_handle_object(&name).await?;
                out.entry(id.clone()).or_default();
            }
        }
        self.repair_affinities().await?;
        Ok(out)
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
