//! `tartanctl node status` run on the host, outside every node, shows every
//! node's BGP sessions from the datastore (acceptance 5 of issue 19): five
//! nodes in a full mesh; one node's bgpd killed shows its sessions down on
//! the others and its own report stale within the refresh interval; its
//! Node deleted, its report is gone. Each bgpd answers its `/livez` and
//! `/readyz` probes.

use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use nix::sys::signal::Signal;
use serde_json::Value;
use tartan_api::store::typed::TypedStore;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::wait_for;
use tartan_lab::{Daemon, TempDir};

const NODES: usize = 5;
/// bgpd's `--status-interval` here (30 s by default).
const INTERVAL: u64 = 2;
/// bgpd's health probes, in each node's namespace.
const HEALTH: &str = "127.0.0.1:9098";

/// The HTTP status of a GET of `path` on node `i`'s health server.
fn probe(lab: &CniLab, i: usize, path: &str) -> String {
    lab.underlay
        .node(i)
        .netns
        .exec(
            "curl",
            &[
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                "-m",
                "5",
                &format!("http://{HEALTH}{path}"),
            ],
        )
        .unwrap_or_default()
}

fn start_bgpd(lab: &CniLab, i: usize, dir: &TempDir) -> Daemon {
    let bin = tartan_lab::cni::tartan_bin_dir().join("tartan-bgpd");
    let mut cmd = lab
        .underlay
        .node(i)
        .netns
        .command(&bin.display().to_string());
    cmd.args([
        "--datastore",
        &lab.etcd.datastore_spec(),
        "--node",
        &CniLab::node_name(i),
        "--status-interval",
        &INTERVAL.to_string(),
        "--health",
        HEALTH,
        "--socket",
    ])
    .arg(dir.join(&format!("bgpd-{i}.sock")));
    Daemon::start(&format!("bgpd-{i}"), cmd).expect("tartan-bgpd")
}

/// `tartanctl node status -o json` from the host: the views by node.
fn node_status(lab: &CniLab) -> Vec<Value> {
    let out = Command::new(tartan_tests::bins::target_bin("tartanctl"))
        .args([
            "--datastore",
            &lab.etcd.datastore_spec(),
            "node",
            "status",
            "-o",
            "json",
        ])
        .output()
        .expect("tartanctl");
    assert!(
        out.status.success(),
        "tartanctl node status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .expect("JSON")
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The state `node`'s report gives its session with `peer`.
fn session_state(views: &[Value], node: &str, peer: &str) -> Option<String> {
    let v = views.iter().find(|v| v["node"] == node)?;
    let s = v["report"]["sessions"]
        .as_array()?
        .iter()
        .find(|s| s["peer"] == peer)?;
    s["state"].as_str().map(String::from)
}

#[test]
fn node_status_from_anywhere_follows_bgpd_and_the_node() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(NODES, "10.89.0.0/16");
    for i in 0..NODES {
        lab.add_node_object(i).unwrap();
    }
    let dir = TempDir::new("nstatus").unwrap();
    let bgpds: Vec<Daemon> = (0..NODES).map(|i| start_bgpd(&lab, i, &dir)).collect();
    let addr = |i: usize| lab.underlay.node(i).address.to_string();
    let logs = |bgpds: &[Daemon]| {
        bgpds
            .iter()
            .map(|d| d.log_tail(8))
            .collect::<Vec<_>>()
            .join("\n---\n")
    };

    // Every node reports a full mesh, Established, fresh.
    let all_up = |views: &[Value]| {
        views.len() == NODES
            && (0..NODES).all(|i| {
                let node = CniLab::node_name(i);
                (0..NODES).filter(|j| *j != i).all(|j| {
                    session_state(views, &node, &addr(j)).as_deref() == Some("Established")
                })
            })
            && views.iter().all(|v| v["stale"] == false)
    };
    wait_for(
        "every node's sessions Established",
        Duration::from_secs(40),
        || all_up(&node_status(&lab)).then_some(()),
    )
    .unwrap_or_else(|e| panic!("{e}\n{:#?}\nbgpd:\n{}", node_status(&lab), logs(&bgpds)));
    // Every bgpd is live and ready: configured, every session attempted.
    for i in 0..NODES {
        assert_eq!(probe(&lab, i, "/livez"), "200", "node-{}", i + 1);
        assert_eq!(probe(&lab, i, "/readyz"), "200", "node-{}", i + 1);
    }
    // The table shows the same, a row per session.
    let table = Command::new(tartan_tests::bins::target_bin("tartanctl"))
        .args(["--datastore", &lab.etcd.datastore_spec(), "node", "status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert_eq!(
        text.lines().filter(|l| l.contains("Established")).count(),
        NODES * (NODES - 1),
        "{text}"
    );

    // node-5's bgpd dies without a word.
    let last = NODES - 1;
    let dead = CniLab::node_name(last);
    bgpds[last].kill(Signal::SIGKILL).unwrap();
    let killed = std::time::Instant::now();
    // The others show their session with it down (the kernel resets its
    // connections), and its own report goes stale: it reads stale once
    // older than INTERVAL plus the margin (timestamps in whole seconds:
    // one more), and its last write was at the kill at the latest; plus
    // slack for a reader's poll.
    let bound = Duration::from_secs(
        INTERVAL + tartan_api::resources::nodestatus::STALE_MARGIN_SECONDS + 1 + 2,
    );
    wait_for(
        "node-5 down on the others and stale",
        Duration::from_secs(20),
        || {
            let v = node_status(&lab);
            let others_see_down = (0..last).all(|i| {
                session_state(&v, &CniLab::node_name(i), &addr(last))
                    .is_some_and(|s| s != "Established")
            });
            let stale = v
                .iter()
                .any(|x| x["node"] == dead.as_str() && x["stale"] == true);
            (others_see_down && stale).then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{:#?}", node_status(&lab)));
    let took = killed.elapsed();
    eprintln!("node-5 shown down and stale {took:?} after its bgpd was killed");
    assert!(
        took <= bound,
        "node-5 shown down and stale after {took:?}, more than {bound:?}"
    );
    // The survivors' reports stay fresh.
    let v = node_status(&lab);
    assert!(
        v.iter()
            .filter(|x| x["node"] != dead.as_str())
            .all(|x| x["stale"] == false),
        "{v:#?}"
    );

    // node-5 leaves the cluster: its report is deleted by tartan-controllers'
    // garbage collection (no bgpd lists other nodes' reports).
    let mut cmd = tartan_tests::bins::controllers_command(&lab.etcd.datastore_spec(), "c1");
    cmd.args(["--ipam-gc-interval-ms", "200"]);
    let _controllers = Daemon::start("controllers", cmd).expect("tartan-controllers");
    lab.rt
        .block_on(lab.store.delete_typed::<Node>(None, &dead, None))
        .unwrap();
    wait_for(
        "node-5's report gone",
        Duration::from_secs(INTERVAL * 3 + 2),
        || {
            let v = node_status(&lab);
            (v.len() == NODES - 1 && v.iter().all(|x| x["node"] != dead.as_str())).then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{:#?}\nbgpd:\n{}", node_status(&lab), logs(&bgpds)));
}
