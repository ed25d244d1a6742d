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

/// Why these tests cannot run here (they make network namespaces and
/// tables), if they cannot.
fn cannot_run() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    match Command::new("nft").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("no nft on the PATH".into()),
    }
}

macro_rules! needs_root_and_nft {
    () => {
        if let Some(why) = cannot_run() {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// An `nft` in a directory of its own, ahead of the real one on felix's
/// PATH: `script` is its body.
struct FakeNft(std::path::PathBuf);

impl FakeNft {
    fn new(tag: &str, script: &str) -> FakeNft {
        let dir = std::env::temp_dir().join(format!("fxc-nft-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = FakeNft(dir);
        let nft = fake.0.join("nft");
        std::fs::write(&nft, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&nft, std::fs::Permissions::from_mode(0o755)).unwrap();
        fake
    }
}

impl Drop for FakeNft {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The real `nft`'s path, for a fake that hands commands on to it.
fn real_nft() -> String {
    let out = Command::new("sh")
        .args(["-c", "command -v nft"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn felix_writes_the_closed_table_before_it_reads_the_datastore() {
    needs_root_and_nft!();
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
    needs_root_and_nft!();
    let ns = Netns::new("r");
    // No tables listed; every write refused.
    let fake = FakeNft::new(
        "r",
        "[ \"$1\" = list ] && exit 0\necho 'Error: refused by this test' >&2\nexit 1\n",
    );
    let mut felix = Felix::start(&ns, Some(&fake.0));
    let out = felix
        .exited_within(Duration::from_secs(10))
        .expect("felix went on without a policy table");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot check or write the policy table"),
        "{err}"
    );
    assert!(err.contains("nftables table inet tartan"), "{err}");
    assert!(err.contains("refused by this test"), "{err}");
    assert!(table_in(&ns).is_none());
}

/// A restarted felix asks the kernel itself (netlink) whether its policy
/// table is there, never `nft list` (which on nft 1.0.6 fetches every set
/// element of the family first): with an `nft` that fails every listing,
/// it finds the live table an earlier felix wrote (here a marker chain),
/// leaves it as it is, never swapped for the closed one, and goes on.
#[test]
fn a_restarted_felix_finds_the_live_table_without_listing_it() {
    needs_root_and_nft!();
    let ns = Netns::new("l");
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns.0,
            "nft",
            "add table inet tartan; add chain inet tartan live_marker",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let real = real_nft();
    let fake = FakeNft::new(
        "l",
        &format!(
            "[ \"$1\" = list ] && {{ echo 'Error: listing failed in this test' >&2; exit 1; }}\nexec {real} \"$@\"\n"
        ),
    );
    let mut felix = Felix::start(&ns, Some(&fake.0));
    if let Some(out) = felix.exited_within(Duration::from_secs(3)) {
        panic!("felix stopped: {}", String::from_utf8_lossy(&out.stderr));
    }
    let table = table_in(&ns).expect("the live table is gone");
    assert!(table.contains("live_marker"), "{table}");
}
