//! deploy/install-cni.sh, the node DaemonSet's init container, run as the
//! image runs it on directories laid out as the container sees them: the
//! host's CNI directories under a host root, the image's files under an
//! image root. It installs Tartan's plugins whole, adds `portmap` and
//! `loopback` only where the host has none, and leaves the conflist
//! pending for felix (which installs it once the plugins have a token).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkdirs(root: &Path, dirs: &[&str]) {
    for d in dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// An image root holding the built plugins and installer, stand-in
/// `portmap` and `loopback`, and the ConfigMap; a host root whose
/// `/opt/cni/bin` already has a `loopback` of its own.
fn layout() -> Scratch {
    let d = std::env::temp_dir().join(format!("tartan-install-script-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    let (image, host) = (d.join("image"), d.join("host"));
    mkdirs(
        &image,
        &["usr/local/bin", "usr/lib/cni", "etc/tartan/config"],
    );
    mkdirs(&host, &["opt/cni/bin", "etc/cni/net.d"]);
    for (name, built) in [
        ("tartan", env!("CARGO_BIN_EXE_tartan")),
        ("tartan-ipam", env!("CARGO_BIN_EXE_tartan-ipam")),
        (
            "tartan-install-cni",
            env!("CARGO_BIN_EXE_tartan-install-cni"),
        ),
    ] {
        std::os::unix::fs::symlink(built, image.join("usr/local/bin").join(name)).unwrap();
    }
    executable(
        &image.join("usr/lib/cni/portmap"),
        "#!/bin/sh\necho image portmap\n",
    );
    executable(
        &image.join("usr/lib/cni/loopback"),
        "#!/bin/sh\necho image loopback\n",
    );
    executable(
        &host.join("opt/cni/bin/loopback"),
        "#!/bin/sh\necho host loopback\n",
    );
    // A fixed MTU: nothing is read from this machine's interfaces.
    std::fs::write(image.join("etc/tartan/config/mtu"), "1400").unwrap();
    Scratch(d)
}

fn install(d: &Path) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/install-cni.sh");
    Command::new("sh")
        .arg(script)
        .env("TARTAN_IMAGE_ROOT", d.join("image"))
        .env("TARTAN_HOST_ROOT", d.join("host"))
        .env("NODENAME", "node-7")
        .output()
        .unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn the_init_container_installs_plugins_and_leaves_the_conflist_to_felix() {
    let s = layout();
    let d = &s.0;
    let bin = d.join("host/opt/cni/bin");
    let net = d.join("host/etc/cni/net.d");
    for round in 0..2 {
        // A second run is a pod restart on a node already installed.
        let out = install(d);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "round {round}: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            names(&bin),
            ["loopback", "portmap", "tartan", "tartan-ipam"],
            "round {round}: nothing else, no temporary file left"
        );
        for p in ["tartan", "tartan-ipam"] {
            let built = if p == "tartan" {
                env!("CARGO_BIN_EXE_tartan")
            } else {
                env!("CARGO_BIN_EXE_tartan-ipam")
            };
            assert_eq!(
                std::fs::read(bin.join(p)).unwrap(),
                std::fs::read(built).unwrap(),
                "{p} installed whole"
            );
            let mode = std::fs::metadata(bin.join(p)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755, "{p}");
        }
        // The host's own loopback stays; the image's portmap fills the gap.
        assert!(
            std::fs::read_to_string(bin.join("loopback"))
                .unwrap()
                .contains("host")
        );
        assert!(
            std::fs::read_to_string(bin.join("portmap"))
                .unwrap()
                .contains("image")
        );
        assert_eq!(
            said.contains("installed the portmap plugin"),
            round == 0,
            "{said}"
        );
        assert!(!said.contains("installed the loopback plugin"), "{said}");
        // The conflist waits for felix: nothing the runtime reads yet.
        assert_eq!(names(&net), ["10-tartan.conflist.pending"], "round {round}");
        let conflist: Value = serde_json::from_str(
            &std::fs::read_to_string(net.join("10-tartan.conflist.pending")).unwrap(),
        )
        .unwrap();
        let tartan = &conflist["plugins"][0];
        assert_eq!(tartan["type"], "tartan");
        assert_eq!(tartan["nodename"], "node-7");
        assert_eq!(tartan["kubeconfig"], "/etc/cni/net.d/tartan-kubeconfig");
        assert_eq!(tartan["mtu"], 1400);
    }
}
