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

/// This node's file of kind `ext` (the lock, the block names IPAM keeps)
/// for the datastore `store`: clusters sharing a host (the lab's) get
/// their own.
pub fn node_file(node: &str, store: &str, ext: &str) -> PathBuf {
    let digest = Sha256::digest(store.as_bytes());
    let tag: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    PathBuf::from(LOCK_DIR).join(format!("ipam-{node}-{tag}.{ext}"))
}

/// Remove `node`'s files for `store` (a lab's node taken down).
pub fn forget(node: &str, store: &str) {
    for ext in ["lock", "blocks"] {
        let _ = std::fs::remove_file(node_file(node, store, ext));
    }
}

/// Held until dropped.
pub struct NodeLock(#[allow(dead_code)] Option<Flock<File>>);

/// Take `node`'s IPAM lock for the datastore `store`, waiting at most
/// `limit`. Clusters sharing a host (the lab's) get a lock each. If the
/// lock file cannot be used, carry on without it (correctness does not
/// depend on it).
pub async fn take(node: &str, store: &str, limit: Duration) -> NodeLock {
    let path = node_file(node, store, "lock");
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
    // Usually the lock is free: take it at once, without a thread to
    // wait on.
    let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => return NodeLock(Some(lock)),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => file,
        Err((_, e)) => {
            warn!(path = %path.display(), error = %e, "cannot lock; going on without it");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_second_taker_waits_for_the_first() {
        let node = format!("locktest-{}", std::process::id());
        let store = "etcd://lock.test:2379";
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
        let _gone = Gone(node_file(&node, store, "lock"));
        let first = take(&node, store, Duration::from_secs(1)).await;
        assert!(first.0.is_some(), "a free lock is taken at once");
        // Busy: not taken within the limit (the caller goes on without).
        let none = take(&node, store, Duration::from_millis(100)).await;
        assert!(none.0.is_none());
        // Taken once the first lets go.
        let second = tokio::spawn({
            let node = node.clone();
            async move { take(&node, store, Duration::from_secs(30)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert!(second.await.unwrap().0.is_some());
    }
}
