//! The ADD and DEL of the common case, reading only what they touch, so
//! that their cost does not grow with the cluster: an ADD reads this
//! node's BlockAffinities (a narrowed listing: their names start with
//! `<node>.` and they carry the label [`NODE_LABEL`]), the blocks they
//! name and the blocks the handle's IPAMHandle names; a DEL reads the
//! IPAMHandle, then its blocks. Only when those have no room (a block to
//! claim, one to borrow from) or the IPAMHandle is missing are all blocks
//! read.

use futures::future::{join_all, try_join_all};
use sha2::{Digest, Sha256};
use tartan_api::Kind;
use tartan_api::resources::{BlockAffinity, IpamBlock, IpamHandle, block_name};
use tartan_api::store::typed::{TypedStore, from_dynamic};
use tartan_api::store::{Narrow, StoreError};
use tracing::{debug, warn};

use super::assign::allocation;
use super::block::Shortage;
use super::plan::Snapshot;
use super::{Allocation, Ipam, IpamError, handle_object_name};

/// The label on a BlockAffinity naming its node (see [`node_label_value`]).
pub const NODE_LABEL: &str = "tartan.dev/node";

/// The value of [`NODE_LABEL`] for `node`: its name when that is a valid
/// label value (at most 63 characters), otherwise `h-` and a digest.
pub fn node_label_value(node: &str) -> String {
    let ok = !node.is_empty()
        && node.len() <= 63
        && node
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && node.starts_with(|c: char| c.is_ascii_alphanumeric())
        && node.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        return node.to_string();
    }
    let digest = Sha256::digest(node.as_bytes());
    let hex: String = digest.iter().take(20).map(|b| format!("{b:02x}")).collect();
    format!("h-{hex}")
}

impl Ipam {
    /// The blocks affine to this node, found through its BlockAffinities.
    async fn own_blocks(&self) -> Result<Vec<IpamBlock>, IpamError> {
        let node = self.cfg.node.as_str();
        let prefix = format!("{node}.");
        let value = node_label_value(node);
        let listing = self
            .store
            .list_narrow(
                Kind::BlockAffinity,
                None,
                Narrow {
                    name_prefix: &prefix,
                    label: (NODE_LABEL, &value),
                },
            )
            .await?;
        let mut names: Vec<String> = Vec::new();
        for o in listing.items {
            // An unreadable record is passed over; the full path reads
            // the blocks themselves.
            let Ok(a) = from_dynamic::<BlockAffinity>(o) else {
                continue;
            };
            if a.spec.node != node || a.spec.deleted {
                continue;
            }
            let Ok(cidr) = a.spec.cidr.parse() else {
                continue;
            };
            let name = block_name(&cidr);
            if !names.contains(&name) {
                names.push(name);
            }
        }
        // Kept in the affinities' order.
        let mut found = self.blocks_named(&names).await?;
        found.retain(|b| b.spec.affine_node() == Some(node));
        Ok(found)
    }

    /// The blocks of these names that exist, read together, in order.
    async fn blocks_named(&self, names: &[String]) -> Result<Vec<IpamBlock>, IpamError> {
        let found = try_join_all(names.iter().map(|n| self.block_named(n))).await?;
        Ok(found.into_iter().flatten().collect())
    }

    /// The block called `name`, if it exists.
    async fn block_named(&self, name: &str) -> Result<Option<IpamBlock>, IpamError> {
        match self.store.get_typed::<IpamBlock>(None, name).await {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The blocks `handle`'s IPAMHandle names; `None` when it has none (or
    /// names none, or belongs to another handle): then only a reading of
    /// every block finds what the handle holds.
    pub(super) async fn handle_blocks(
        &self,
        handle: &str,
    ) -> Result<Option<Vec<IpamBlock>>, IpamError> {
        let name = handle_object_name(handle);
        let h = match self.store.get_typed::<IpamHandle>(None, &name).await {
            Ok(h) => h,
            Err(StoreError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if h.spec.handle_id != handle || h.spec.block.is_empty() {
            return Ok(None);
        }
        let mut names = Vec::new();
        for cidr in h.spec.block.keys() {
            let Ok(net) = cidr.parse() else {
                return Ok(None);
            };
            names.push(block_name(&net));
        }
        Ok(Some(self.blocks_named(&names).await?))
    }

    /// An ADD that reads only this node's blocks and the handle's: the
    /// allocation when every family found its address there (already
    /// held, or free in a block of this node's), `None` otherwise. The
    /// node's blocks are the ones whose names are kept (read with the
    /// other reads) when they have room, else those its affinities name.
    pub(super) async fn allocate_locally(
        &self,
        handle: &str,
        secondary: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<Allocation>, IpamError> {
        let kept = self.remembered();
        if kept.is_empty() {
            // Nothing kept: the affinities are listed with the other reads.
            let listed = async {
                let blocks = self.own_blocks().await?;
                let names = names_of(&blocks);
                if !names.is_empty() {
                    self.remember(&names);
                }
                Ok(blocks)
            };
            return self.allocate_among(listed, handle, secondary).await;
        }
        if let Some(a) = self
            .allocate_among(self.kept_blocks(&kept), handle, secondary)
            .await?
        {
            return Ok(Some(a));
        }
        // No room there: the blocks the affinities name, with the kept ones
        // still this node's (a block claimed whose affinity was not written,
        // perhaps holding an address this call just took for one family).
        let mut blocks = self.own_blocks().await?;
        let listed = names_of(&blocks);
        let extra: Vec<String> = kept
            .iter()
            .filter(|n| !listed.contains(n))
            .cloned()
            .collect();
        blocks.extend(self.kept_blocks(&extra).await?);
        let names = names_of(&blocks);
        if same_names(&names, &kept) {
            // The blocks just found without room: claim or borrow.
            debug!(handle, "no room in this node's blocks; reading every block");
            return Ok(None);
        }
        debug!(
            handle,
            "no room in the blocks kept; trying those this node's affinities name"
        );
        self.remember(&names);
        self.allocate_among(async { Ok(blocks) }, handle, secondary)
            .await
    }

    /// The blocks of `names` that exist and are this node's. One that
    /// cannot be read is passed over (logged): the names are a hint, and
    /// the affinities are listed when what is found has no room.
    async fn kept_blocks(&self, names: &[String]) -> Result<Vec<IpamBlock>, IpamError> {
        let node = self.cfg.node.as_str();
        let found = join_all(names.iter().map(|n| self.block_named(n))).await;
        let mut out = Vec::new();
        for (name, r) in names.iter().zip(found) {
            match r {
                Ok(Some(b)) if b.spec.affine_node() == Some(node) => out.push(b),
                Ok(_) => {}
                Err(e) => {
                    warn!(block = %name, error = %e, "cannot read a block whose name this node kept; passing it over");
                }
            }
        }
        Ok(out)
    }

    /// [`Ipam::allocate_locally`] with this node's blocks read by `mine`.
    async fn allocate_among(
        &self,
        mine: impl std::future::Future<Output = Result<Vec<IpamBlock>, IpamError>>,
        handle: &str,
        secondary: &std::collections::BTreeMap<String, String>,
    ) -> Result<Option<Allocation>, IpamError> {
        // This node's blocks, the handle's, the pools and reservations:
        // independent reads, in flight together.
        let blocks = async {
            let (mut blocks, held) = tokio::try_join!(mine, self.handle_blocks(handle))?;
            for b in held.into_iter().flatten() {
                if !blocks.iter().any(|x| x.metadata.name == b.metadata.name) {
                    blocks.push(b);
                }
            }
            Ok(blocks)
        };
        let mut snap: Snapshot = self.snapshot_with(blocks).await?;
        let plan = self.plan(&snap)?;
        let mut got = Vec::new();
        for (family, pools) in &plan {
            let mut cooling = Shortage::default();
            match self
                .held_or_own(*family, pools, handle, secondary, &mut snap, &mut cooling)
                .await?
            {
                Some(a) => got.push(a),
                None => {
                    debug!(
                        handle,
                        ?family,
                        "no room in this node's blocks; reading every block"
                    );
                    return Ok(None);
                }
            }
        }
        Ok(Some(allocation(handle, &snap, got)))
    }
}

/// The names of `blocks`, in order.
fn names_of(blocks: &[IpamBlock]) -> Vec<String> {
    blocks
        .iter()
        .filter_map(|b| b.metadata.name.clone())
        .collect()
}

/// Whether `a` and `b` name the same blocks.
fn same_names(a: &[String], b: &[String]) -> bool {
    let a: std::collections::BTreeSet<&String> = a.iter().collect();
    let b: std::collections::BTreeSet<&String> = b.iter().collect();
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_name_that_is_a_label_value_is_its_own_value() {
        assert_eq!(node_label_value("node-1.example"), "node-1.example");
        let long = "n".repeat(64);
        let v = node_label_value(&long);
        assert!(v.starts_with("h-") && v.len() <= 63, "{v}");
        assert_ne!(node_label_value(&"m".repeat(64)), v);
    }
}
