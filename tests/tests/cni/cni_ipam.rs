//! IPAM through the real plugin and a real etcd: parallel ADDs on one and
//! on three nodes, plugins killed in the middle of ADD, and exhaustion.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use ipnet::IpNet;
use serde_json::{Value, json};
use tartan_api::resources::{IpamBlock, IpamHandle, WorkloadEndpoint};
use tartan_api::store::typed::TypedStore;
use tartan_cni::ipam::{block, report};
use tartan_lab::cni::{Call, Runtime, tartan_bin_dir};
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::Netns;

fn blocks(lab: &CniLab) -> Vec<IpamBlock> {
    lab.rt.block_on(lab.store.list_typed(None)).unwrap().0
}

/// Every allocation: address -> (handle, the node whose block holds it).
fn allocations(lab: &CniLab) -> Vec<(IpAddr, String, Option<String>)> {
    let mut out = Vec::new();
    for b in blocks(lab) {
        let net = b.spec.network().unwrap();
        for (h, addrs) in block::holders(&b.spec, &net) {
            for a in addrs {
                out.push((a, h.clone(), b.spec.affine_node().map(str::to_string)));
            }
        }
    }
    out
}

/// `n` pods on node `i`, all added at once; their addresses.
fn parallel_adds(lab: &CniLab, rt: &Runtime, prefix: &str, n: usize) -> Vec<(Netns, Call, Value)> {
    let pods: Vec<(Netns, Call)> = (0..n)
        .map(|k| lab.pod("default", &format!("{prefix}-{k}")).unwrap())
        .collect();
    let results: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = pods
            .iter()
            .map(|(_, call)| s.spawn(move || rt.add(call)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{e}\n{}", lab.log()))
            })
            .collect()
    });
    pods.into_iter()
        .zip(results)
        .map(|((ns, call), r)| (ns, call, r))
        .collect()
}

fn address(r: &Value) -> IpAddr {
    r["ips"][0]["address"]
        .as_str()
        .unwrap()
        .parse::<IpNet>()
        .unwrap()
        .addr()
}

#[test]
fn a_hundred_parallel_adds_on_one_node() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(1, "10.90.0.0/16");
    let rt = lab.plain(0);
    let t = std::time::Instant::now();
    let pods = parallel_adds(&lab, &rt, "p", 100);
    eprintln!("100 parallel ADDs on one node: {:?}", t.elapsed());
    let addrs: HashSet<IpAddr> = pods.iter().map(|(_, _, r)| address(r)).collect();
    assert_eq!(addrs.len(), 100, "an address was given twice");
    let all = allocations(&lab);
    assert_eq!(all.len(), 100);
    for (a, _, node) in &all {
        assert!(addrs.contains(a));
        assert_eq!(
            node.as_deref(),
            Some("node-1"),
            "{a} is not in node-1's block"
        );
    }
    // 100 addresses need two /26 blocks; racing ADDs must not claim more.
    assert_eq!(blocks(&lab).len(), 2);
    assert!(
        report::check(&blocks(&lab), &[], &weps(&lab))
            .iter()
            .all(|f| matches!(f, report::Finding::EmptyHandle { .. })),
        "{:?}",
        report::check(&blocks(&lab), &[], &weps(&lab))
    );
}

fn weps(lab: &CniLab) -> Vec<WorkloadEndpoint> {
    lab.rt.block_on(lab.store.list_typed(None)).unwrap().0
}

#[test]
fn three_nodes_each_a_hundred_parallel_adds() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(3, "10.91.0.0/16");
    let rts: Vec<Runtime> = (0..3).map(|i| lab.plain(i)).collect();
    let per_node: Vec<Vec<(Netns, Call, Value)>> = std::thread::scope(|s| {
        let hs: Vec<_> = rts
            .iter()
            .enumerate()
            .map(|(i, rt)| {
                let lab = &lab;
                s.spawn(move || parallel_adds(lab, rt, &format!("n{i}"), 100))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = HashMap::new();
    for (i, pods) in per_node.iter().enumerate() {
        for (_, call, r) in pods {
            let a = address(r);
            if let Some(other) = seen.insert(a, call.container_id.clone()) {
                panic!("{a} given to {other} and {}", call.container_id);
            }
            let _ = i;
        }
    }
    assert_eq!(seen.len(), 300);
    let all = allocations(&lab);
    assert_eq!(all.len(), 300);
    // Each address lies in a block affine to the node that asked.
    let node_of: HashMap<String, String> = weps(&lab)
        .into_iter()
        .map(|w| (w.spec.container_id.clone(), w.spec.node.clone()))
        .collect();
    for (a, h, owner) in &all {
        let c = report::container_of(h);
        assert_eq!(owner.as_ref(), node_of.get(c), "{a} of {c}");
    }
    let findings = report::check(&blocks(&lab), &[], &weps(&lab));
    assert!(
        findings
            .iter()
            .all(|f| matches!(f, report::Finding::EmptyHandle { .. })),
        "{findings:?}"
    );
}

/// Borrowing, forced: a pool of two /29 blocks; node-1 takes one, node-2
/// the other, and node-1 then borrows from node-2's.
#[test]
fn a_node_borrows_when_the_pool_has_no_free_block() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab_with_pool(2, "small", "10.92.0.0/28", Some(29));
    let r1 = lab.plain(0);
    let r2 = lab.plain(1);
    let (_p0, c0) = lab.pod("default", "b0").unwrap();
    let (_p1, c1) = lab.pod("default", "b1").unwrap();
    let a0 = address(&r1.add(&c0).unwrap());
    let a1 = address(&r2.add(&c1).unwrap());
    assert!("10.92.0.0/29".parse::<IpNet>().unwrap().contains(&a0));
    assert!("10.92.0.8/29".parse::<IpNet>().unwrap().contains(&a1));
    // node-1's block has 7 usable addresses (.0 is the pool's edge).
    let mut pods = Vec::new();
    for k in 0..8 {
        let (ns, c) = lab.pod("default", &format!("x{k}")).unwrap();
        let r = r1.add(&c).unwrap();
        pods.push((ns, c, address(&r)));
    }
    let borrowed: Vec<_> = pods
        .iter()
        .filter(|(_, _, a)| "10.92.0.8/29".parse::<IpNet>().unwrap().contains(a))
        .collect();
    assert_eq!(borrowed.len(), 2, "{pods:?}");
    // With strict affinity the same request fails instead.
    let strict = tartan_tests::runtime_with(&lab, 0, json!({}), json!({"strictAffinity": true}));
    let (_ps, cs) = lab.pod("default", "strict").unwrap();
    let e = strict.add(&cs).unwrap_err().to_string();
    assert!(
        e.contains("strict affinity") || e.contains("no free IPv4 address"),
        "{e}"
    );
}

#[test]
fn exhaustion_is_a_clear_error_and_clears_after_release() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    // 8 addresses, 6 usable.
    let lab = tartan_tests::cni_lab_with_pool(1, "tiny", "10.93.0.0/29", Some(29));
    let rt = tartan_tests::runtime_with(&lab, 0, json!({}), json!({"releaseCooldownSeconds": 2}));
    let mut pods = Vec::new();
    for k in 0..6 {
        let (ns, c) = lab.pod("default", &format!("e{k}")).unwrap();
        let r = rt.add(&c).unwrap();
        pods.push((ns, c, r));
    }
    let (_extra_ns, extra) = lab.pod("default", "extra").unwrap();
    let e = rt.add(&extra).unwrap_err().to_string();
    assert!(
        e.contains("code Some(100)")
            && e.contains("no free IPv4 address for node node-1 in tiny (10.93.0.0/29)"),
        "{e}"
    );
    assert!(
        !lab.underlay
            .node(0)
            .netns
            .ip(&["-o", "link"])
            .unwrap()
            .contains(&tartan_cni::wire::host_interface_name(
                &extra.container_id,
                "eth0"
            ))
    );
    let (_, c, r) = &pods[3];
    let freed = address(r);
    rt.del(c, Some(r)).unwrap();
    // Cooling down: still refused, and the error says so.
    let e = rt.add(&extra).unwrap_err().to_string();
    assert!(e.contains("cooling down"), "{e}");
    std::thread::sleep(Duration::from_millis(2500));
    let r = rt.add(&extra).unwrap();
    assert_eq!(address(&r), freed);
}

/// The plugin SIGKILLed at random points of ADD, many times; then the
/// runtime's GC. Nothing leaks, nothing is given twice, and the survivors
/// keep their addresses.
#[test]
fn adds_killed_midway_leave_nothing_after_gc() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab_with_pool(1, "default", "10.94.0.0/16", Some(28));
    let rt = lab.plain(0);
    let bin = tartan_bin_dir().join("tartan");
    let conf = {
        let mut c = lab.tartan_entry(0, json!({}));
        c["name"] = json!(tartan_lab::cnilab::NETWORK);
        c["cniVersion"] = json!("1.1.0");
        c.to_string()
    };
    let node = lab.underlay.node(0).netns.name().to_string();
    let mut survivors = Vec::new();
    let mut killed = 0;
    // Kills land somewhere in the first `window` of an ADD. A busy machine
    // makes ADDs slower than the first window: while no kill has landed
    // after an allocation, more rounds are run with the window doubled.
    let mut window_us = 40_000u64;
    let mut rounds = 0..60u64;
    let mut next_batch = 60u64;
    // The containers whose ADD completed.
    let live_of = |survivors: &[(Netns, Call, Value)]| -> HashSet<String> {
        survivors
            .iter()
            .map(|(_, c, _)| c.container_id.clone())
            .collect()
    };
    let leaked_by_killed = |survivors: &[(Netns, Call, Value)]| {
        let live = live_of(survivors);
        allocations(&lab)
            .iter()
            .filter(|(_, h, _)| !live.contains(report::container_of(h)))
            .count()
    };
    loop {
        let Some(round) = rounds.next() else {
            if leaked_by_killed(&survivors) > 0 || window_us >= 2_000_000 {
                break;
            }
            window_us *= 2;
            rounds = next_batch..next_batch + 30;
            next_batch += 30;
            eprintln!("no kill landed after an allocation yet: {window_us} µs window");
            continue;
        };
        let (ns, call) = lab.pod("default", &format!("k{round}")).unwrap();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &node])
            .arg(&bin)
            .env("CNI_COMMAND", "ADD")
            .env("CNI_CONTAINERID", &call.container_id)
            .env("CNI_NETNS", call.netns.as_ref().unwrap())
            .env("CNI_IFNAME", "eth0")
            .env("CNI_PATH", "/usr/lib/cni")
            .env(
                "CNI_ARGS",
                format!("K8S_POD_NAMESPACE=default;K8S_POD_NAME=k{round}"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut i = child.stdin.take().unwrap();
            i.write_all(conf.as_bytes()).unwrap();
        }
        // Kill somewhere between start-up and completion (an ADD takes a
        // few to tens of milliseconds here).
        std::thread::sleep(Duration::from_micros((round * 7919) % window_us));
        let done = child.try_wait().unwrap().is_some();
        if !done {
            let _ = child.kill();
            killed += 1;
        }
        let out = child.wait_with_output().unwrap();
        if done && out.status.success() {
            let r: Value = serde_json::from_slice(&out.stdout).unwrap();
            survivors.push((ns, call, r));
        } else {
            // The runtime gives up on this sandbox; its namespace goes.
            drop(ns);
        }
    }
    eprintln!(
        "{killed} of {next_batch} ADDs killed midway, {} completed",
        survivors.len()
    );
    assert!(killed >= 10, "too few kills to mean anything: {killed}");
    let valid: Vec<(String, String)> = survivors
        .iter()
        .map(|(_, c, _)| (c.container_id.clone(), "eth0".to_string()))
        .collect();
    let live = live_of(&survivors);
    // Some kills must have landed after the address was taken, or the
    // test shows nothing about GC.
    let leaked = leaked_by_killed(&survivors);
    eprintln!("{leaked} allocations left by killed ADDs before GC");
    assert!(leaked >= 1, "no kill landed after allocation");
    rt.gc(&valid).unwrap();
    let all = allocations(&lab);
    let mut seen = HashSet::new();
    for (a, h, _) in &all {
        assert!(seen.insert(*a), "{a} allocated twice");
        assert!(live.contains(report::container_of(h)), "{a} leaked to {h}");
    }
    assert_eq!(all.len(), survivors.len());
    for (_, c, r) in &survivors {
        assert!(
            all.iter()
                .any(|(a, h, _)| *a == address(r) && report::container_of(h) == c.container_id)
        );
    }
    let handles: Vec<IpamHandle> = lab.rt.block_on(lab.store.list_typed(None)).unwrap().0;
    assert!(handles.len() <= survivors.len());
    let findings = report::check(&blocks(&lab), &handles, &weps(&lab));
    assert!(findings.is_empty(), "{findings:?}");
    // And the pool still works.
    let (_n, c) = lab.pod("default", "after").unwrap();
    let a = address(&rt.add(&c).unwrap());
    assert!(!all.iter().any(|(x, _, _)| *x == a));
}

/// A pool of one address (`/32`, blocks of 32) gives that address to the
/// first pod: it has no network or broadcast address to keep. The next
/// ADD finds none free.
#[test]
fn a_single_address_pool_gives_its_one_address() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab_with_pool(1, "one", "10.95.0.0/32", Some(32));
    let rt = lab.plain(0);
    let (_ns, c) = lab.pod("default", "solo").unwrap();
    let r = rt.add(&c).unwrap();
    assert_eq!(address(&r), "10.95.0.0".parse::<IpAddr>().unwrap());
    let (_ns2, c2) = lab.pod("default", "second").unwrap();
    let e = rt.add(&c2).unwrap_err().to_string();
    assert!(
        e.contains("no free IPv4 address for node node-1 in one (10.95.0.0/32)"),
        "{e}"
    );
    rt.del(&c, Some(&r)).unwrap();
}
