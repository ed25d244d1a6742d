//! One node's plugins take turns at IPAM. Without this, a hundred pods
//! started at once on a node all race for the same block in the datastore
//! and most compare-and-swaps are lost, each a wasted round trip. Nodes
//! still race each other through compare-and-swap, which is what keeps
//! addresses unique; the lock only saves work.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use sha2::{Digest, Sha256};
use tracing::warn;

/// Where the lock files live.
pub const LOCK_DIR: &str = "/run/tartan";

/// Held until dropped.
pub struct NodeLock(#[allow(dead_code)] Option<Flock<File>>);

/// Take `node`'s IPAM lock for the datastore `store`, waiting at most
/// `limit`. Clusters sharing a host (the lab's) get a lock each. If the
/// lock file cannot be used, carry on without it (correctness does not
/// depend on it).
pub async fn take(node: &str, store: &str, limit: Duration) -> NodeLock {
    let digest = Sha256::digest(store.as_bytes());
    let tag: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let path = PathBuf::from(LOCK_DIR).join(format!("ipam-{node}-{tag}.lock"));
    let file = std::fs::create_dir_all(LOCK_DIR).and_then(|()| {
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
    });
    let file = match file {
        Ok(f) => f,
        Err(e) => {
            warn!(path = %path.display(), error = %e, "no IPAM lock file; going on without it");
            return NodeLock(None);
        }
    };
    let wait = tokio::task::spawn_blocking(move || Flock::lock(file, FlockArg::LockExclusive));
    match tokio::time::timeout(limit, wait).await {
        Ok(Ok(Ok(lock))) => NodeLock(Some(lock)),
        Ok(Ok(Err((_, e)))) => {
            warn!(path = %path.display(), error = %e, "cannot lock; going on without it");
            NodeLock(None)
        }
        Ok(Err(_)) | Err(_) => {
            warn!(path = %path.display(), "IPAM lock not free within {limit:?}; going on without it");
            NodeLock(None)
        }
    }
}
