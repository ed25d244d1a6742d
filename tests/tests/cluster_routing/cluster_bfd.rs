//! BFD on the node mesh (acceptance 3 of issue 19): five nodes with
//! `nodeMeshBFD` in BGPConfiguration; one node's underlay link is cut, and
//! every other node drops that node's block from its kernel routes within
//! BFD's detection time plus the withdrawal, far below the hold time; the
//! pods on the other nodes keep reaching each other.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use serde_json::json;
use tartan_api::resources::{BgpConfiguration, BgpConfigurationSpec};
use tartan_api::store::typed::TypedStore;
use tartan_lab::netns::{Netns, wait_for};

const NODES: usize = 5;
/// The node whose link is cut (node-3).
const CUT: usize = 2;
/// BFD on the mesh: 100 ms both ways, three packets missed. Detection
/// takes 300 ms from the last packet received.
const INTERVAL_MS: u64 = 100;
/// The goal of the issue for the whole removal.
const GOAL: Duration = Duration::from_millis(500);
/// The bound asserted: the goal with room for a loaded machine, and still
/// far below the mesh's hold time (9 s), which BFD must beat.
const BOUND: Duration = Duration::from_secs(2);

/// The /26 block (the default block size) holding a pod's address.
fn block_of(addr: &str) -> String {
    let a: Ipv4Addr = addr.parse().expect("a pod's IPv4 address");
    let b = Ipv4Addr::from(u32::from(a) & !63);
    format!("{b}/26")
}

/// Seconds since midnight (UTC) of a log line's leading RFC 3339 stamp
/// (`2026-11-26T09:07:50.484375Z ...`).
fn stamp_of(line: &str) -> Option<f64> {
    let t = line.split_whitespace().next()?.split_once('T')?.1;
    let t = t.trim_end_matches('Z');
    let mut parts = t.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// Seconds since midnight (UTC) now.
fn now_of_day() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() % 86_400) as f64 + f64::from(d.subsec_micros()) / 1e6
}

/// When bgpd (by its log) saw BFD with `peer` go down after `since`
/// (seconds since midnight), in seconds since midnight.
fn bfd_down_at(log: &str, peer: &str, since: f64) -> Option<f64> {
    log.lines()
        .filter(|l| l.contains("BFD session state changed"))
        .filter(|l| l.contains(&format!("peer={peer} ")))
        .filter(|l| l.contains("to=down") || l.contains("to=\"down\""))
        .filter_map(stamp_of)
        .find(|t| *t >= since)
}

/// Whether bgpd's routes (`proto 201`) in `ns` hold `block`; None when
/// `ip` failed.
fn has_route(ns: &Netns, block: &str) -> Option<bool> {
    let r = ns.ip(&["route", "show", "proto", "201"]).ok()?;
    Some(r.lines().any(|l| l.starts_with(&format!("{block} "))))
}

#[test]
fn node_mesh_bfd_drops_a_cut_node_within_half_a_second() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(NODES, "10.86.0.0/16");
    for i in 0..NODES {
        lab.add_node_object(i).unwrap();
    }
    let ms = format!("{INTERVAL_MS}ms");
    let spec: BgpConfigurationSpec = serde_json::from_value(json!({
        "nodeMeshBFD": {"minRx": ms, "minTx": ms, "multiplier": 3},
    }))
    .unwrap();
    lab.rt
        .block_on(
            lab.store
                .create_typed(&BgpConfiguration::new("default", spec)),
        )
        .unwrap();
    let (dir, daemons, pods) = tartan_tests::daemons_and_a_pod_each(&lab, NODES, "meshbfd");
    let blocks: Vec<String> = pods.iter().map(|p| block_of(&p.2)).collect();
    let ns = |i: usize| &lab.underlay.node(i).netns;

    // The full mesh: every node has every other node's block. A session
    // opens only with BFD Up, so this is also BFD up on every pair.
    for (i, (bgpd, _)) in daemons.iter().enumerate() {
        for j in (0..NODES).filter(|j| *j != i) {
            wait_for(&blocks[j], Duration::from_secs(60), || {
                has_route(ns(i), &blocks[j])?.then_some(())
            })
            .unwrap_or_else(|e| {
                panic!(
                    "node-{}: {e}\nroutes:\n{}\nbgpd:\n{}",
                    i + 1,
                    ns(i).ip(&["route"]).unwrap_or_default(),
                    bgpd.log_tail(30)
                )
            });
        }
    }
    // tartanctl shows node-1's sessions Established, each with BFD up.
    let out = std::process::Command::new(tartan_tests::bins::target_bin("tartanctl"))
        .arg("--bgp-socket")
        .arg(dir.join("bgpd-0.sock"))
        .args(["bgp", "peers"])
        .output()
        .expect("tartanctl");
    let shown = String::from_utf8_lossy(&out.stdout);
    let up = shown
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|c| c.get(3) == Some(&"Established") && c.get(4) == Some(&"up"))
        .count();
    assert_eq!(
        up,
        NODES - 1,
        "node-1's sessions:\n{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Let the sessions leave the slow pre-Up rate (a Poll Sequence).
    std::thread::sleep(Duration::from_secs(2));

    // node-3's underlay link goes down: its peers hear nothing more.
    let others: Vec<usize> = (0..NODES).filter(|i| *i != CUT).collect();
    let cut = lab.underlay.node(CUT);
    let cut_addr = cut.address.to_string();
    let wall0 = now_of_day();
    let t0 = Instant::now();
    cut.netns.ip(&["link", "set", &cut.ifname, "down"]).unwrap();
    // Each survivor polled on a thread of its own, so that one node's
    // `ip` does not delay another's reading.
    let gone: BTreeMap<usize, Option<Duration>> = std::thread::scope(|s| {
        let handles: Vec<_> = others
            .iter()
            .map(|&i| {
                let (n, block) = (ns(i), &blocks[CUT]);
                s.spawn(move || {
                    while t0.elapsed() < Duration::from_secs(15) {
                        if has_route(n, block) == Some(false) {
                            return (i, Some(t0.elapsed()));
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    (i, None)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a polling thread"))
            .collect()
    });
    for (i, t) in &gone {
        eprintln!(
            "node-{}: node-3's block {} out of the kernel after {t:?} (goal {GOAL:?})",
            i + 1,
            blocks[CUT]
        );
    }
    let slowest = gone.values().max().copied().flatten();
    for (i, t) in &gone {
        let t = t.unwrap_or_else(|| {
            panic!(
                "node-{}: node-3's block still routed 15 s after the cut\nbgpd:\n{}",
                i + 1,
                daemons[*i].0.log_tail(30)
            )
        });
        assert!(
            t <= BOUND,
            "node-{}: node-3's block withdrawn only after {t:?} (bound {BOUND:?})",
            i + 1
        );
    }
    eprintln!(
        "slowest of the {} survivors: {slowest:?} (BFD {INTERVAL_MS} ms x 3)",
        others.len()
    );
    // BFD, not the hold time, ended the sessions: each survivor's bgpd
    // logs BFD with node-3 going down, and its log's clock tells when,
    // free of the delay of polling routes with `ip` on a loaded machine.
    for &i in &others {
        let log = daemons[i].0.log();
        let at = bfd_down_at(&log, &cut_addr, wall0).unwrap_or_else(|| {
            panic!(
                "node-{}: no BFD Down for {cut_addr} in bgpd's log:\n{}",
                i + 1,
                daemons[i].0.log_tail(30)
            )
        });
        eprintln!(
            "node-{}: BFD with node-3 down {:.0} ms after the cut (bgpd's log)",
            i + 1,
            (at - wall0) * 1000.0
        );
    }

    // The pods of the other nodes still reach each other, at once.
    let mut failures = Vec::new();
    for &from in &others {
        for &to in others.iter().filter(|to| **to != from) {
            let ping = ["-c3", "-i0.2", "-W2", pods[to].2.as_str()];
            if pods[from].0.exec("ping", &ping).is_err() {
                failures.push((from + 1, to + 1));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "pod pairs (node from, node to) that no longer reach each other: {failures:?}"
    );

    // node-3 back on the wire (its default route went with the link):
    // its sessions and its block return, and every pod is removed.
    cut.netns.ip(&["link", "set", &cut.ifname, "up"]).unwrap();
    cut.netns
        .ip(&[
            "route",
            "replace",
            "default",
            "via",
            &lab.underlay.gateway.to_string(),
        ])
        .unwrap();
    for &i in &others {
        wait_for("node-3's block back", Duration::from_secs(30), || {
            has_route(ns(i), &blocks[CUT])?.then_some(())
        })
        .unwrap_or_else(|e| panic!("node-{}: {e}", i + 1));
    }
    for (i, (_, call, _)) in pods.iter().enumerate() {
        lab.plain(i).del(call, None).unwrap();
    }
}
