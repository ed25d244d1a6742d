//! The workspace's binaries (`tartan-lab`, `tartan-bgpd`, `tartan-felix`,
//! the CNI plugins…) in the target directory beside the test executable.
//! Cargo builds a package's binaries only for that package's own
//! integration tests, not for these, so a missing one fails with the
//! command that builds them all.

use std::path::PathBuf;

/// The target directory's profile folder (`target/debug`): the test
/// executable's folder, or its parent when that is `deps`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// The built binary `name`, or a panic that says how to build it.
#[track_caller]
pub fn target_bin(name: &str) -> PathBuf {
    let path = target_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first \
         (cargo test builds a package's binaries only for that package's own tests)",
        path.display()
    );
    path
}

/// The `tartan-lab` binary.
#[track_caller]
pub fn lab_bin() -> PathBuf {
    target_bin("tartan-lab")
}
