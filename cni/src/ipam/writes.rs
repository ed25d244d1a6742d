//! The compare-and-swap writes: changing a block on its
//! resourceVersion, claiming a block with its BlockAffinity, and writing
//! a handle's IPAMHandle.

use std::collections::BTreeMap;

use ipnet::IpNet;
use tartan_api::resources::{
    AffinityState, BlockAffinity, BlockAffinitySpec, IpamBlock, IpamBlockSpec, IpamHandle,
    IpamHandleSpec, block_name,
};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;
use tracing::info;

use super::local::{NODE_LABEL, node_label_value};
use super::{Ipam, IpamError, MAX_ATTEMPTS, affinity_name, backoff, handle_object_name};

impl Ipam {
    /// Change a block by compare-and-swap: `change` edits the latest copy
    /// or says why not (`Err`); a lost race re-reads and tries again.
    /// `Ok(Err(_))` carries `change`'s refusal (or a vanished block).
    pub(super) async fn cas_block<T, E: Default>(
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
    pub(super) async fn claim(&self, cidr: &IpNet) -> Result<Option<IpamBlock>, IpamError> {
        let node = &self.cfg.node;
        let mut spec = IpamBlockSpec::empty(cidr);
        spec.affinity = Some(format!("host:{node}"));
        spec.strict_affinity = self.cfg.strict_affinity;
        let name = block_name(cidr);
        let (b, claimed) = match self.store.create_typed(&IpamBlock::new(&name, spec)).await {
            Ok(b) => (b, true),
            // Another ADD on this node may have just claimed it.
            Err(StoreError::AlreadyExists(_)) => {
                (self.store.get_typed::<IpamBlock>(None, &name).await?, false)
            }
            Err(e) => return Err(e.into()),
        };
        if b.spec.affine_node() != Some(node.as_str()) {
            return Ok(None);
        }
        self.remember_also(&name);
        if claimed {
            info!(block = %cidr, node, "claimed a block");
            self.ensure_affinity(cidr).await?;
        }
        Ok(Some(b))
    }

    /// Record this node's claim on `cidr`, labelled with the node so that
    /// its ADDs find it without reading other nodes' ([`super::local`]).
    pub(super) async fn ensure_affinity(&self, cidr: &IpNet) -> Result<(), IpamError> {
        let mut a = BlockAffinity::new(
            &affinity_name(&self.cfg.node, cidr),
            BlockAffinitySpec {
                node: self.cfg.node.clone(),
                cidr: cidr.to_string(),
                state: AffinityState::Confirmed,
                deleted: false,
            },
        );
        a.metadata.labels = Some(BTreeMap::from([(
            NODE_LABEL.to_string(),
            node_label_value(&self.cfg.node),
        )]));
        match self.store.create_typed(&a).await {
            Ok(_) | Err(StoreError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Write the IPAMHandle: per block, how many addresses the handle holds.
    pub(super) async fn record_handle(
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
}
