//! What the kernel tests share: a fresh network namespace per backend,
//! transactions written in nft's JSON.

use serde_json::{Value, json};
use tartan_nft::Transaction;

/// Run `f` on a thread of its own in a new network namespace, which goes
/// away with the thread (needs root).
pub fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare (root?)");
        f()
    })
    .join()
    .unwrap()
}

/// Commands written in nft's JSON, as the model.
pub fn tx(v: Value) -> Transaction {
    Transaction::from_json(&json!({ "nftables": v })).expect("commands of the model")
}
