//! Helpers shared by felix's kernel tests.

/// Run `f` on a thread in a new, unnamed network namespace (gone when
/// the thread ends; `nft` children and netlink sockets opened there
/// belong to it).
pub fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare (root?)");
        f()
    })
    .join()
    .unwrap()
}

/// `nft -j list table FAMILY TABLE`, parsed.
// Each test binary compiles this module; not all of them list tables.
#[allow(dead_code)]
pub fn nft_list(family: &str, table: &str) -> serde_json::Value {
    let out = std::process::Command::new("nft")
        .args(["-j", "list", "table", family, table])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Commands written by hand in nft's JSON, as a transaction of the model.
#[allow(dead_code)]
pub fn tx(v: &serde_json::Value) -> tartan_nft::Transaction {
    tartan_nft::Transaction::from_json(v).expect("commands of the model")
}
