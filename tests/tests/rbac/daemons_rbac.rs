//! Every request the daemons make under the API server stand-in is allowed
//! by deploy/'s roles, and nothing more is granted.
//!
//! What runs, each with `--datastore kubernetes` and a kubeconfig holding
//! a token of its deploy/ service account:
//! - tartan-bgpd and tartan-felix as node-1 (`tartan-system/tartan-node`),
//!   in a throwaway network namespace as the lab runs them (felix programs
//!   its nftables there, bgpd listens on port 179 there); the stand-in's
//!   listener is bound on that namespace's loopback. No BGP session comes
//!   up (the other nodes and the peer are addresses nobody answers), which
//!   costs no API request: sessions only change the status report bgpd
//!   writes anyway.
//! - the CNI plugins `tartan`/`tartan-ipam` (ADD, DEL, STATUS, GC, as a
//!   container runtime calls them) under their own account
//!   (`tartan-system/tartan-cni`), with the kubeconfig felix writes: felix
//!   requests their token (TokenRequest, bound to its Pod), as in
//!   deploy/.
//! - tartan-controllers (`tartan-system/tartan-controllers`): it takes the
//!   Lease, gives a LoadBalancer Service its address, releases the IPAM
//!   records of a deleted Node, and gives the Lease up when stopped.
//! - tartan-dns (`kube-system/tartan-dns`), checked to answer for a
//!   Service.
//! - tartanctl as the cluster admin (`kubernetes-admin`, in
//!   `system:masters`): deploy/ gives operators no role, so its requests
//!   are listed, not judged.
//!
//! The stand-in judges but does not refuse (a refused request would send
//! a daemon down another path); the test then fails on (a) any request no
//! role of its identity allows, naming it, and (b) any single grant (one
//! verb on one resource) that no request used and that the allow-list
//! below does not excuse with its reason. The table of used against
//! granted per identity is printed. Needs root (network namespaces), nft
//! and dig; skipped with the reason when not root.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tartan_api::kind::Kind;
use tartan_apiserver::rbac::ADMIN;
use tartan_apiserver::{Policy, service_account_user};
use tartan_lab::Daemon;
use tartan_lab::cni::Runtime;
use tartan_tests::standin::{StandIn, wait_until};
use tartan_tests::{PluginFiles, target_bin};

use crate::scene::{annotation, key, node_3_blocks, of_node, pod, seed, seed_pools};
use crate::verdict::{Unused, judge};

const NODE: &str = "tartan-system/tartan-node";
const CNI: &str = "tartan-system/tartan-cni";
const CONTROLLERS: &str = "tartan-system/tartan-controllers";
const DNS: &str = "kube-system/tartan-dns";

/// Upper bound on each wait (a slow machine), not a measurement.
const LIMIT: Duration = Duration::from_secs(90);

/// Grants no run here uses, each with why it stays (deploy/README.md
/// lists them too).
const KEPT_UNUSED: &[Unused] = &[
    Unused {
        account: CNI,
        verb: "update",
        group: "tartan.dev",
        resource: "ipamhandles",
        why: "an ADD whose IPAMHandle already exists (a retried ADD) adds to it (cni/src/ipam/writes.rs)",
    },
    Unused {
        account: CNI,
        verb: "update",
        group: "tartan.dev",
        resource: "blockaffinities",
        why: "the plugin's GC labels its node's BlockAffinities written before the tartan.dev/node label existed (cni/src/ipam/release.rs)",
    },
    Unused {
        account: CONTROLLERS,
        verb: "update",
        group: "tartan.dev",
        resource: "ipamblocks",
        why: "a deleted node's addresses in a block that stays (borrowed from a live node's block, or lent by the deleted node's) are released by rewriting it (controllers/src/ipamgc/plan.rs)",
    },
    Unused {
        account: CONTROLLERS,
        verb: "update",
        group: "tartan.dev",
        resource: "blockaffinities",
        why: "labels a live node's BlockAffinity written before the tartan.dev/node label existed (controllers/src/ipamgc/plan.rs)",
    },
    Unused {
        account: NODE,
        verb: "delete",
        group: "tartan.dev",
        resource: "bgpnodestatuses",
        why: "bgpd deletes its own status report when its Node is deleted (bgpd/src/datastore/publish.rs); node-1, where bgpd runs here, stays",
    },
];

/// tartan-controllers' arguments: short intervals, so that the scene's
/// changes are seen at once.
const CONTROLLERS_ARGS: &[&str] = &[
    "--datastore",
    "kubernetes",
    "--id",
    "c1",
    "--lease-namespace",
    "tartan-system",
    "--lease-name",
    "tartan-controllers",
    "--lease-duration",
    "3",
    "--renew-deadline-ms",
    "2000",
    "--retry-period-ms",
    "200",
    "--loadbalancer-interval-ms",
    "200",
    "--ipam-gc-interval-ms",
    "200",
    "--ipam-gc-grace",
    "1",
    "--health-address",
    "none",
];

fn user(account: &str) -> String {
    let (ns, name) = account.split_once('/').unwrap_or(("", account));
    service_account_user(ns, name)
}

/// The last lines of each daemon's log.
fn logs(daemons: &[&Daemon]) -> String {
    daemons
        .iter()
        .map(|d| format!("--- {}:\n{}", d.name(), d.log_tail(40)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits for `f`, failing with the daemons' logs.
fn wait(what: &str, daemons: &[&Daemon], f: impl FnMut() -> bool) {
    if let Err(e) = wait_until(what, LIMIT, f) {
        panic!("{e}\n{}", logs(daemons));
    }
}

#[test]
fn the_daemons_use_what_deploy_grants_and_nothing_more() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    // /proc/self belongs to the process's effective user.
    let root =
        std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
    if !root {
        eprintln!("skipped: running the daemons in a network namespace needs root");
        return;
    }
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let policy = Policy::from_dir(&deploy).unwrap();
    let api = StandIn::new("rbac", policy.clone()).unwrap();
    // node-1's InternalIP, on a link of the namespace (a veth pair: this
    // kernel has no dummy links).
    for args in [
        &[
            "link", "add", "rbac0", "type", "veth", "peer", "name", "rbac1",
        ][..],
        &["link", "set", "rbac1", "up"],
        &["addr", "add", "10.77.0.1/24", "dev", "rbac0"],
        &["link", "set", "rbac0", "up"],
    ] {
        api.netns.ip(args).unwrap();
    }
    seed(&api).unwrap();
    // First start: with no IPPool, the leader makes the default pool from
    // the ConfigMap; the scene then swaps it for its own two (as the
    // store's administrator, outside any daemon's account).
    {
        let first = api
            .daemon(
                &target_bin("tartan-controllers"),
                CONTROLLERS_ARGS,
                &user(CONTROLLERS),
                "controllers-first-start",
            )
            .unwrap();
        let pool = key(Kind::IpPool, None, "default-ipv4");
        wait("the default pool from tartan-config", &[&first], || {
            api.get(&pool).is_some()
        });
        first.stop();
        api.delete(&pool).unwrap();
    }
    seed_pools(&api).unwrap();

    let node = user(NODE);
    let sock = api.dir.join("bgpd.sock").display().to_string();
    let bgpd = api
        .daemon(
            &target_bin("tartan-bgpd"),
            &[
                "--datastore",
                "kubernetes",
                "--node",
                "node-1",
                "--socket",
                sock.as_str(),
                "--status-interval",
                "1",
            ],
            &node,
            "bgpd",
        )
        .unwrap();
    // felix runs as the Pod tartan-node-rbac and keeps the CNI plugins'
    // kubeconfig fresh.
    let pod_uid = api
        .create(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "tartan-node-rbac", "namespace": "tartan-system"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "felix", "image": "tartan"}]}}))
        .unwrap()
        .metadata
        .uid
        .unwrap_or_default();
    let cni_kubeconfig = api.dir.join("tartan-kubeconfig");
    let felix = {
        let mut cmd = api
            .command(&target_bin("tartan-felix"), &node, "felix")
            .unwrap();
        cmd.env("POD_NAME", "tartan-node-rbac")
            .env("POD_UID", &pod_uid)
            .env("POD_NAMESPACE", "tartan-system")
            .args([
                "--datastore",
                "kubernetes",
                "--node",
                "node-1",
                "--resync-seconds",
                "1",
                "--health-address",
                "none",
                "--proxy-health-address",
                "none",
                "--cni-kubeconfig",
                &cni_kubeconfig.display().to_string(),
            ]);
        Daemon::start("felix", cmd).unwrap()
    };
    let controllers = api
        .daemon(
            &target_bin("tartan-controllers"),
            CONTROLLERS_ARGS,
            &user(CONTROLLERS),
            "controllers",
        )
        .unwrap();
    let dns = api
        .daemon(
            &target_bin("tartan-dns"),
            &[
                "--datastore",
                "kubernetes",
                "--listen",
                "127.0.0.1:10053",
                "--health-address",
                "none",
                "--upstream",
                "127.0.0.1:9",
            ],
            &user(DNS),
            "dns",
        )
        .unwrap();
    let daemons: [&Daemon; 4] = [&bgpd, &felix, &controllers, &dns];
    // Start-up: bgpd writes node-1's autodetected address and its status
    // report; felix programs its table; the controllers take the Lease and
    // address the LoadBalancer Service; tartan-dns answers.
    wait("bgpd annotates node-1", &daemons, || {
        api.get(&key(Kind::Node, None, "node-1"))
            .and_then(|o| {
                annotation(
                    &serde_json::to_value(o).ok()?,
                    "tartan.dev/bgp-ipv4-address",
                )
            })
            .is_some()
    });
    wait("bgpd reports node-1's status", &daemons, || {
        api.get(&key(Kind::BgpNodeStatus, None, "node-1")).is_some()
    });
    // And refreshes it (every second here): an update, not only a create.
    let version = |api: &StandIn| {
        api.get(&key(Kind::BgpNodeStatus, None, "node-1"))
            .and_then(|o| o.metadata.resource_version)
    };
    let first = version(&api);
    wait("bgpd refreshes node-1's status", &daemons, || {
        version(&api) != first
    });
    wait("felix programs inet tartan", &daemons, || {
        api.netns
            .exec("nft", &["list", "table", "inet", "tartan"])
            .is_ok()
    });
    // ... and, with its routes and policy written, says node-1's network
    // is up (through the Node's status).
    wait("felix marks node-1's network available", &daemons, || {
        api.get(&key(Kind::Node, None, "node-1"))
            .and_then(|o| serde_json::to_value(o).ok())
            .and_then(|v| {
                let cs = v.pointer("/status/conditions")?.as_array()?.clone();
                cs.into_iter().find(|c| c["type"] == "NetworkUnavailable")
            })
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "TartanIsUp")
    });
    wait("the controllers hold the Lease", &daemons, || {
        api.get(&key(
            Kind::Lease,
            Some("tartan-system"),
            "tartan-controllers",
        ))
        .is_some()
    });
    wait("the LoadBalancer Service gets an address", &daemons, || {
        api.get(&key(Kind::Service, Some("default"), "lb"))
            .and_then(|o| serde_json::to_value(o).ok())
            .and_then(|v| v.pointer("/status/loadBalancer/ingress/0/ip").cloned())
            .is_some()
    });
    wait("tartan-dns answers for web", &daemons, || {
        api.netns
            .exec(
                "dig",
                &[
                    "@127.0.0.1",
                    "-p",
                    "10053",
                    "+short",
                    "+time=1",
                    "+tries=1",
                    "web.default.svc.cluster.local",
                ],
            )
            .is_ok_and(|out| out.contains("10.96.0.20"))
    });

    // The CNI plugin wires a pod on node-1 (claiming pool-a's block) and
    // one on node-3 (claiming pool-b's), then a new sandbox of the second
    // (its endpoint replaced), removes the first pod, reports its status
    // and collects garbage (both sandboxes still held).
    wait("felix writes the CNI plugins' kubeconfig", &daemons, || {
        cni_kubeconfig.exists()
    });
    let runtime = |n: &str, pool: &str| {
        let conflist = json!({"cniVersion": "1.1.0", "name": "rbac", "plugins": [{
            "type": "tartan", "datastore": "kubernetes",
            "kubeconfig": cni_kubeconfig.display().to_string(), "nodename": n,
            "logFile": api.dir.join("cni.log").display().to_string(), "logLevel": "debug",
            "ipam": {"type": "tartan-ipam", "releaseCooldownSeconds": 0, "ipv4Pools": [pool]}
        }]});
        Runtime::new(conflist).in_netns(api.netns.name())
    };
    let cni_log = || std::fs::read_to_string(api.dir.join("cni.log")).unwrap_or_default();
    let (_pa, a) = pod("a");
    let (_pb, b) = pod("b");
    let (_pb2, b2) = pod("b");
    let on1 = runtime("node-1", "pool-a");
    let on3 = runtime("node-3", "pool-b");
    // The files the plugins keep on the host go with the test, also when
    // it fails.
    let _files = [PluginFiles::of(&on1), PluginFiles::of(&on3)];
    on1.add(&a)
        .unwrap_or_else(|e| panic!("ADD a: {e}\n{}", cni_log()));
    on3.add(&b)
        .unwrap_or_else(|e| panic!("ADD b: {e}\n{}", cni_log()));
    on3.add(&b2)
        .unwrap_or_else(|e| panic!("ADD b again: {e}\n{}", cni_log()));
    on1.del(&a, None)
        .unwrap_or_else(|e| panic!("DEL a: {e}\n{}", cni_log()));
    on1.status()
        .unwrap_or_else(|e| panic!("STATUS: {e}\n{}", cni_log()));
    let held = [
        (b.container_id.clone(), "eth0".to_string()),
        (b2.container_id.clone(), "eth0".to_string()),
    ];
    on3.gc(&held)
        .unwrap_or_else(|e| panic!("GC: {e}\n{}", cni_log()));
    assert_eq!(
        of_node(&api, Kind::WorkloadEndpoint, "node-3"),
        1,
        "b's endpoint"
    );

    // node-3 goes: the controllers release its IPAM records and delete
    // its status report.
    assert_eq!(
        node_3_blocks(&api),
        (1, 0),
        "node-3 holds a block: {}",
        cni_log()
    );
    api.delete(&key(Kind::Node, None, "node-3")).unwrap();
    wait("node-3's IPAM records are released", &daemons, || {
        of_node(&api, Kind::WorkloadEndpoint, "node-3") == 0
            && of_node(&api, Kind::BlockAffinity, "node-3") == 0
            && api.list(Kind::IpamHandle).is_empty()
            && node_3_blocks(&api) == (0, 0)
    });
    wait(
        "the controllers delete node-3's status report",
        &daemons,
        || api.get(&key(Kind::BgpNodeStatus, None, "node-3")).is_none(),
    );

    // Watches fire on changes.
    let relabel = |o: &mut tartan_api::store::DynamicObject| {
        o.metadata
            .labels
            .get_or_insert_default()
            .insert("tartan.dev/revision".into(), "2".into());
    };
    api.modify(&key(Kind::Service, Some("default"), "web"), relabel)
        .unwrap();
    api.modify(&key(Kind::EndpointSlice, Some("default"), "web-1"), relabel)
        .unwrap();
    api.modify(&key(Kind::IpPool, None, "pool-a"), relabel)
        .unwrap();

    // node-1 registered anew while felix runs (deleted and created again,
    // a cloud's kubelet saying its network is unavailable): felix marks
    // the new Node too.
    let node_1 = key(Kind::Node, None, "node-1");
    let mut again = serde_json::to_value(api.get(&node_1).unwrap()).unwrap();
    for field in ["uid", "resourceVersion", "creationTimestamp"] {
        again["metadata"].as_object_mut().unwrap().remove(field);
    }
    again["status"]["conditions"] = json!([{"type": "NetworkUnavailable", "status": "True",
        "reason": "NoRouteCreated", "message": "Node created without a route"}]);
    api.delete(&node_1).unwrap();
    api.create(again).unwrap();
    wait("felix marks node-1 registered anew", &daemons, || {
        api.get(&node_1)
            .and_then(|o| serde_json::to_value(o).ok())
            .and_then(|v| {
                let cs = v.pointer("/status/conditions")?.as_array()?.clone();
                cs.into_iter().find(|c| c["type"] == "NetworkUnavailable")
            })
            .is_some_and(|c| c["status"] == "False" && c["reason"] == "TartanIsUp")
    });

    // An operator reads with tartanctl.
    for args in [
        &["get", "ippools"][..],
        &["ipam", "check"],
        &["node", "status"],
    ] {
        let out = api
            .command(&target_bin("tartanctl"), ADMIN, "tartanctl")
            .unwrap()
            .env("TARTAN_DATASTORE", "kubernetes")
            .args(args)
            .output()
            .unwrap();
        eprintln!(
            "tartanctl {}: {}\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "tartanctl {}", args.join(" "));
    }

    for d in daemons {
        assert!(d.is_running(), "{} stopped:\n{}", d.name(), d.log_tail(40));
        d.stop();
    }
    let v = judge(
        &policy,
        &[NODE, CNI, CONTROLLERS, DNS],
        &api.requests(),
        KEPT_UNUSED,
    );
    eprintln!("used against granted:{}", v.table);
    for u in &v.used_anyway {
        eprintln!("note: kept as unused, but used: {u}");
    }
    assert!(
        v.denied.is_empty(),
        "requests deploy/ does not allow:\n  {}",
        v.denied.join("\n  ")
    );
    assert!(
        v.unused.is_empty(),
        "granted by deploy/ but used by no daemon (remove them, or keep them in KEPT_UNUSED with the reason):\n  {}",
        v.unused.join("\n  ")
    );
}
