//! What an allocation reads and decides before it writes: the snapshot of
//! pools, reservations, blocks and the node's labels; the families and
//! pools that apply; and whether an ADD would find room (CNI STATUS).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::{IpPool, IpReservation, IpamBlock};
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;
use tracing::debug;

use super::block::{self, Exclusions};
use super::pools::{self, Family, Pool};
use super::{Ipam, IpamError, now};

/// Everything one allocation looks at, read once.
pub(super) struct Snapshot {
    pub(super) pools: Vec<IpPool>,
    pub(super) reservations: Vec<IpReservation>,
    pub(super) blocks: Vec<IpamBlock>,
    pub(super) node_labels: BTreeMap<String, String>,
}

impl Ipam {
    /// Everything, every block included.
    pub(super) async fn snapshot(&self) -> Result<Snapshot, IpamError> {
        let blocks = async {
            let (blocks, _) = self.store.list_typed::<IpamBlock>(None).await?;
            Ok(blocks)
        };
        self.snapshot_with(blocks).await
    }

    /// Pools, reservations and the node's labels, with the blocks `blocks`
    /// reads (all of them, or the few an ADD of the common case reads).
    /// The reads are independent: they are in flight together.
    pub(super) async fn snapshot_with(
        &self,
        blocks: impl std::future::Future<Output = Result<Vec<IpamBlock>, IpamError>>,
    ) -> Result<Snapshot, IpamError> {
        let (pools, reservations, blocks) = tokio::try_join!(
            async { Ok::<_, IpamError>(self.store.list_typed::<IpPool>(None).await?) },
            async { Ok::<_, IpamError>(self.store.list_typed::<IpReservation>(None).await?) },
            blocks,
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
            blocks,
            node_labels,
        })
    }

    /// The families to assign and their pools.
    pub(super) fn plan(&self, snap: &Snapshot) -> Result<Vec<(Family, Vec<Pool>)>, IpamError> {
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

    /// Whether an ADD would find an address now, for each family that
    /// applies (CNI STATUS). Reads only; claims nothing.
    pub async fn check_room(&self) -> Result<(), IpamError> {
        let snap = self.snapshot().await?;
        let node = self.cfg.node.as_str();
        let t = now();
        for (family, pools) in self.plan(&snap)? {
            let mut room = false;
            let taken: pools::Taken = snap
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
