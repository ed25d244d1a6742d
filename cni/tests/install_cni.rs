//! `tartan-install-cni` as the init container runs it: a ConfigMap volume
//! and the host's route table and interfaces (here files laid out the
//! same way) in, the conflist out, with the pods' MTU; a bad ConfigMap
//! fails the run and leaves the conflist as it was.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const ROUTE: &str =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
ens5\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
";

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(tag: &str, underlay_mtu: u32, config: &[(&str, &str)]) -> Scratch {
    let d = std::env::temp_dir().join(format!("tartan-install-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for sub in ["proc/net", "sys/class/net/ens5", "config", "net.d"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    std::fs::write(d.join("proc/net/route"), ROUTE).unwrap();
    std::fs::write(
        d.join("sys/class/net/ens5/mtu"),
        format!("{underlay_mtu}\n"),
    )
    .unwrap();
    for (k, v) in config {
        std::fs::write(d.join("config").join(k), v).unwrap();
    }
    Scratch(d)
}

fn run(d: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tartan-install-cni"))
        .arg("--config-dir")
        .arg(d.join("config"))
        .arg("--out")
        .arg(d.join("net.d/10-tartan.conflist"))
        .args([
            "--nodename",
            "node-7",
            "--kubeconfig",
            "/etc/cni/net.d/tartan-kubeconfig",
        ])
        .arg("--proc")
        .arg(d.join("proc"))
        .arg("--sys")
        .arg(d.join("sys"))
        .env_remove("TARTAN_UNDERLAY_INTERFACE")
        .output()
        .unwrap()
}

fn tartan_entry(d: &Path) -> Value {
    let text = std::fs::read_to_string(d.join("net.d/10-tartan.conflist")).unwrap();
    let list: Value = serde_json::from_str(&text).unwrap();
    list["plugins"][0].clone()
}

#[test]
fn vxlan_on_a_1500_byte_underlay_gives_pods_1450() {
    let s = scratch(
        "vxlan",
        1500,
        &[("encapsulation", "VXLAN"), ("mtu", "auto")],
    );
    let out = run(&s.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = tartan_entry(&s.0);
    assert_eq!(e["mtu"], 1450);
    assert_eq!(e["nodename"], "node-7");
    assert_eq!(e["kubeconfig"], "/etc/cni/net.d/tartan-kubeconfig");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("pod MTU 1450, underlay ens5 (MTU 1500)")
    );
}

#[test]
fn jumbo_frames_ipip_and_a_fixed_mtu() {
    let s = scratch("ipip", 9000, &[("encapsulation", "IPIP")]);
    assert!(run(&s.0).status.success());
    assert_eq!(tartan_entry(&s.0)["mtu"], 8980);
    let s = scratch("fixed", 9000, &[("mtu", "1300")]);
    assert!(run(&s.0).status.success());
    assert_eq!(tartan_entry(&s.0)["mtu"], 1300);
    // No encapsulation: the underlay's own MTU.
    let s = scratch("plain", 9000, &[("encapsulation", "None")]);
    assert!(run(&s.0).status.success());
    assert_eq!(tartan_entry(&s.0)["mtu"], 9000);
}

#[test]
fn a_bad_config_map_fails_and_keeps_the_old_conflist() {
    let s = scratch("bad", 1500, &[("ipv4-pool-cidr", "10.244.0.0/33")]);
    let conflist = s.0.join("net.d/10-tartan.conflist");
    std::fs::write(&conflist, "old").unwrap();
    let out = run(&s.0);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("ipv4-pool-cidr"), "{err}");
    assert_eq!(std::fs::read_to_string(&conflist).unwrap(), "old");
}

#[test]
fn encapsulation_without_a_default_route_asks_for_an_mtu() {
    let s = scratch("noroute", 1500, &[]);
    std::fs::write(s.0.join("proc/net/route"), "Iface\tDestination\n").unwrap();
    let out = run(&s.0);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("set mtu in tartan-config"));
}
