//! felix never runs with pods unchecked: on a node with no policy table it
//! writes the closed one before anything else, and when the kernel (here
//! an `nft` that refuses everything) will not take it, felix stops and
//! says why instead of going on without policy. Each felix runs in a
//! network namespace of its own, so the host's tables are not touched.

use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A named network namespace, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Netns {
        let name = format!("fxc{tag}{}", std::process::id());
        let out = Command::new("ip")
            .args(["netns", "add", &name])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        Netns(name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// A felix child, killed and reaped when dropped.
struct Felix(Option<Child>);

impl Felix {
    /// felix in `ns`, with `path_first` ahead of the PATH, waiting on a
    /// datastore that does not answer.
    fn start(ns: &Netns, path_first: Option<&std::path::Path>) -> Felix {
        let mut path = std::env::var("PATH").unwrap_or_default();
        if let Some(p) = path_first {
            path = format!("{}:{path}", p.display());
        }
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .arg(env!("CARGO_BIN_EXE_tartan-felix"))
            .args(["--datastore", "etcd://127.0.0.1:1", "--node", "n1"])
            .args(["--health-address", "none"])
            .env("PATH", path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Felix(Some(child))
    }

    /// Its output once it has exited, or `None` if it still runs after
    /// `limit`.
    fn exited_within(&mut self, limit: Duration) -> Option<Output> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            let child = self.0.as_mut().unwrap();
            if child.try_wait().unwrap().is_some() {
                return Some(self.0.take().unwrap().wait_with_output().unwrap());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Felix {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn table_in(ns: &Netns) -> Option<String> {
    let out = Command::new("ip")
        .args([
            "netns", "exec", &ns.0, "nft", "list", "table", "inet", "tartan",
        ])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn felix_writes_the_closed_table_before_it_reads_the_datastore() {
    let ns = Netns::new("w");
    let mut felix = Felix::start(&ns, None);
    let end = Instant::now() + Duration::from_secs(10);
    let table = loop {
        if let Some(t) = table_in(&ns) {
            break t;
        }
        assert!(Instant::now() < end, "no policy table after 10 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    // The closed table: every pod interface's traffic dropped.
    assert!(table.contains("drop"), "{table}");
    assert!(
        felix.exited_within(Duration::from_millis(500)).is_none(),
        "felix stopped although its table was written"
    );
}

#[test]
fn felix_stops_when_the_kernel_refuses_its_policy_table() {
    let ns = Netns::new("r");
    let dir = std::env::temp_dir().join(format!("fxc-nft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _rm = RemoveDir(dir.clone());
    let nft = dir.join("nft");
    std::fs::write(
        &nft,
        "#!/bin/sh\necho 'Error: refused by this test' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&nft, std::fs::Permissions::from_mode(0o755)).unwrap();

    let mut felix = Felix::start(&ns, Some(&dir));
    let out = felix
        .exited_within(Duration::from_secs(10))
        .expect("felix went on without a policy table");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write the policy table"), "{err}");
    assert!(err.contains("refused by this test"), "{err}");
    assert!(table_in(&ns).is_none());
}

struct RemoveDir(std::path::PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
