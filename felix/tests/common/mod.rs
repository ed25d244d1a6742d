//! Helpers shared by felix's kernel tests.

/// Run `f` on a thread in a new, unnamed network namespace (gone when
/// the thread ends; `nft` children and netlink sockets opened there
/// belong to it).
#[allow(dead_code)]
pub fn in_new_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare (root?)");
        f()
    })
    .join()
    .unwrap()
}

/// Run a program (`args[0]`) to its end.
#[allow(dead_code)]
pub fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Run a program, which must succeed.
#[allow(dead_code)]
pub fn ok(args: &[&str]) {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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

/// The objects of `nft -j list table FAMILY TABLE` (metainfo left out),
/// each set's and map's elements sorted (the kernel lists them in the
/// order they went in) and without handles (which count up in the order
/// things were made): equal for equal tables however they were written.
#[allow(dead_code)]
pub fn normalized_table(family: &str, table: &str) -> Vec<serde_json::Value> {
    let v = nft_list(family, table);
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o.get("metainfo").is_none())
        .map(|o| {
            let mut o = o.clone();
            for k in ["set", "map"] {
                if let Some(elems) = o.get_mut(k).and_then(|s| s.get_mut("elem")) {
                    let mut list: Vec<String> = elems
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e.to_string())
                        .collect();
                    list.sort();
                    *elems = serde_json::json!(list);
                }
            }
            if let Some(m) = o
                .as_object_mut()
                .and_then(|m| m.values_mut().next())
                .and_then(|m| m.as_object_mut())
            {
                m.remove("handle");
            }
            o
        })
        .collect()
}

/// Commands written by hand in nft's JSON, as a transaction of the model.
#[allow(dead_code)]
pub fn tx(v: &serde_json::Value) -> tartan_nft::Transaction {
    tartan_nft::Transaction::from_json(v).expect("commands of the model")
}
