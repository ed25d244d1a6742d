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

/// What tells one datastore from another in the names of a node's files:
/// the datastore setting, and the kubeconfig that reaches it (every
/// Kubernetes datastore is `kubernetes`; clusters sharing a host, as the
/// lab's do, have their own kubeconfigs).
pub fn store_identity(datastore: &str, kubeconfig: Option<&str>) -> String {
    match kubeconfig {
        Some(k) => format!("{datastore} {k}"),
        None => datastore.to_string(),
    }
}

/// This node's file of kind `ext` (the lock, the block names IPAM keeps)
/// for the datastore `store` (a [`store_identity`]).
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
    take_at(node_file(node, store, "lock"), limit).await
}

/// The lock of the file `path`, waiting at most `limit`.
async fn take_at(path: PathBuf, limit: Duration) -> NodeLock {
    let dir = path.parent().map(PathBuf::from).unwrap_or_default();
    let file = std::fs::create_dir_all(dir).and_then(|()| {
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
    async fn a_free_lock_is_taken_at_once_and_a_second_taker_waits() {
        let dir = std::env::temp_dir().join(format!("tartan-locktest-{}", std::process::id()));
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _gone = Gone(dir.clone());
        let path = dir.join("ipam-n1-00000000.lock");
        // With no time to wait, only the attempt that does not wait
        // can take it.
        let first = take_at(path.clone(), Duration::ZERO).await;
        assert!(first.0.is_some(), "a free lock is taken at once");
        // Busy: not taken within the limit (the caller goes on without).
        let none = take_at(path.clone(), Duration::from_millis(100)).await;
        assert!(none.0.is_none());
        // Taken once the first lets go.
        let second = tokio::spawn({
            let path = path.clone();
            async move { take_at(path, Duration::from_secs(30)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert!(second.await.unwrap().0.is_some());
    }

    #[test]
    fn clusters_on_one_host_have_files_of_their_own() {
        let a = store_identity("kubernetes", Some("/run/lab-a/kubeconfig"));
        let b = store_identity("kubernetes", Some("/run/lab-b/kubeconfig"));
        assert_ne!(
            node_file("node-1", &a, "blocks"),
            node_file("node-1", &b, "blocks")
        );
        assert_eq!(
            store_identity("etcd://10.0.0.1:2379", None),
            "etcd://10.0.0.1:2379"
        );
    }
}
