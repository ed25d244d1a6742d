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

/// `tartan-controllers` on `datastore` as candidate `id`, with a short
/// Lease (2 s) so that it leads at once, no health server, and logging
/// at info; callers add the intervals their scene needs.
pub fn controllers_command(datastore: &str, id: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(target_bin("tartan-controllers"));
    cmd.args([
        "--datastore",
        datastore,
        "--id",
        id,
        "--health-address",
        "none",
        "--lease-duration",
        "2",
        "--renew-deadline-ms",
        "1500",
        "--retry-period-ms",
        "200",
    ])
    .env("TARTAN_LOG", "info")
    .env_remove("POD_NAME")
    .env_remove("POD_NAMESPACE");
    cmd
}
