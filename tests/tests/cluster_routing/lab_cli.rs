//! `tartan-lab` as a user runs it: up, pods on different nodes, exec,
//! status, ctl, pod del, down; and nothing left afterwards. On etcd and
//! on the Kubernetes datastore (the API server stand-in enforcing
//! deploy/'s RBAC), where the default pool comes from the ConfigMap
//! `tartan-config` and a request a service account is not granted is
//! refused.

use std::process::Command;

use tartan_tests::Datastore;

#[test]
fn up_pods_exec_status_down() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    up_pods_exec_status_down_on(Datastore::Etcd, "tl");
}

#[test]
fn up_pods_exec_status_down_on_kubernetes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    up_pods_exec_status_down_on(Datastore::Kubernetes, "tk");
}

fn up_pods_exec_status_down_on(datastore: Datastore, prefix: &str) {
    let (lab, out) = tartan_tests::lab_up_on(prefix, datastore, &["--nodes", "3"]);
    assert!(out.contains("3 nodes, 3 BGP sessions"), "{out}");
    if datastore == Datastore::Kubernetes {
        kubernetes_only(&lab, &out);
    }
    let (code, _, err) = lab.run(&["up", "--nodes", "2"]);
    assert_ne!(code, 0);
    assert!(err.contains("exists"), "{err}");

    lab.ok(&[
        "pod",
        "add",
        "default/a",
        "--node",
        "node-1",
        "--labels",
        "app=a",
    ]);
    lab.ok(&["pod", "add", "default/b", "--node", "node-2"]);
    lab.ok(&["pod", "add", "other/c", "--node", "node-3"]);
    let b = lab.ok(&["pod", "ip", "default/b"]).trim().to_string();
    let c = lab.ok(&["pod", "ip", "other/c"]).trim().to_string();
    assert!(b.starts_with("10.244."), "{b}");
    let soon = std::time::Duration::from_secs(10);
    assert!(
        lab.wait_reach("default/a", "default/b", soon),
        "a -> b ({b})"
    );
    assert!(lab.wait_reach("default/a", "other/c", soon), "a -> c ({c})");

    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    assert_eq!(status["nodes"].as_array().unwrap().len(), 3);
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["bgpSessionsEstablished"], 2, "{status}");
        assert_eq!(n["felix"], true);
    }
    assert_eq!(status["pods"].as_array().unwrap().len(), 3);
    // The lab registers Nodes as a kubelet does: an InternalIP and no BGP
    // address annotation. Each bgpd detected its address and wrote it back.
    for n in ["node-1", "node-2", "node-3"] {
        let node: serde_json::Value =
            serde_json::from_str(&lab.ok(&["ctl", "get", "node", n, "-o", "json"])).unwrap();
        let internal = node["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["type"] == "InternalIP")
            .and_then(|a| a["address"].as_str())
            .unwrap_or_else(|| panic!("{n} has no InternalIP: {node}"))
            .to_string();
        let written = node["metadata"]["annotations"]["tartan.dev/bgp-ipv4-address"]
            .as_str()
            .unwrap_or_else(|| panic!("{n}: no address annotation written: {node}"));
        assert!(
            written.starts_with(&format!("{internal}/")),
            "{n}: {written} is not {internal} with a prefix"
        );
    }
    // The Namespace carries the label the API server would give it.
    let ns = lab.ok(&["ctl", "get", "namespace", "other", "-o", "json"]);
    assert!(
        ns.contains("\"kubernetes.io/metadata.name\": \"other\""),
        "{ns}"
    );
    let pod = lab.ok(&[
        "ctl",
        "get",
        "workloadendpoints",
        "-n",
        "default",
        "a.eth0",
        "-o",
        "json",
    ]);
    assert!(pod.contains("\"app\": \"a\""), "{pod}");

    lab.ok(&["pod", "del", "default/b"]);
    let (code, _, _) = lab.run(&["exec", "default/a", "--", "ping", "-c1", "-W1", &b]);
    assert_ne!(code, 0, "the deleted pod still answers");
    let (code, _, err) = lab.run(&["pod", "add", "default/d", "--node", "node-9"]);
    assert_ne!(code, 0);
    assert!(err.contains("no node node-9"), "{err}");

    if datastore == Datastore::Kubernetes {
        only_the_provoked_request_was_refused(&lab);
    }
    lab.ok(&["down"]);
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    assert!(!netns.contains(&format!("{}-", lab.name)), "{netns}");
    assert!(
        Command::new("ip")
            .args(["link", "show", &format!("{}-br", lab.name)])
            .output()
            .unwrap()
            .stdout
            .is_empty()
    );
    let (code, _, err) = lab.run(&["status"]);
    assert_ne!(code, 0);
    assert!(err.contains("no lab named"), "{err}");
}

/// What the Kubernetes datastore adds: the pool made by tartan-controllers
/// from `tartan-config` (the lab wrote none), and deploy/'s RBAC enforced
/// on a daemon's identity while the admin may do anything.
fn kubernetes_only(lab: &tartan_lab::cluster::client::LabCli, out: &str) {
    assert!(out.contains("(from tartan-config)"), "{out}");
    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    assert_eq!(status["datastore"], "kubernetes", "{status}");
    assert_eq!(status["apiServer"]["up"], true, "{status}");
    let pool: serde_json::Value =
        serde_json::from_str(&lab.ok(&["ctl", "get", "ippool", "default-ipv4", "-o", "json"]))
            .unwrap();
    assert_eq!(pool["spec"]["cidr"], "10.244.0.0/16", "{pool}");
    let cm = lab.ok(&[
        "ctl",
        "get",
        "configmap",
        "tartan-config",
        "-n",
        "tartan-system",
        "-o",
        "json",
    ]);
    assert!(cm.contains("ipv4-pool-cidr"), "{cm}");
    // The node agent's service account may read pools, not delete them:
    // the stand-in refuses, and the pool stays.
    let st = tartan_tests::state_json(lab);
    let dir = st["apiserver"]["dir"].as_str().unwrap().to_string();
    let node_kubeconfig = format!("{dir}/kubeconfig-tartan-system.tartan-node");
    let ctl = tartan_tests::target_bin("tartanctl");
    let run = |args: &[&str]| {
        Command::new(&ctl)
            .env("KUBECONFIG", &node_kubeconfig)
            .args(["--datastore", "kubernetes"])
            .args(args)
            .output()
            .unwrap()
    };
    let read = run(&["get", "ippools"]);
    assert!(
        read.status.success(),
        "the node agent reads pools: {}",
        String::from_utf8_lossy(&read.stderr)
    );
    let delete = run(&["delete", "ippool", "default-ipv4"]);
    let err = String::from_utf8_lossy(&delete.stderr).to_lowercase();
    assert!(!delete.status.success(), "the node agent deleted a pool");
    assert!(err.contains("forbidden"), "not refused by RBAC: {err}");
    lab.ok(&["ctl", "get", "ippool", "default-ipv4"]);
}

/// Stops the lab's API server and reads every request it saw
/// (`requests.jsonl`, written as they came): under deploy/'s enforced RBAC nothing the lab and
/// its programs did was refused, but the node agent's delete of a pool
/// in [`kubernetes_only`].
fn only_the_provoked_request_was_refused(lab: &tartan_lab::cluster::client::LabCli) {
    let st = tartan_lab::cluster::LabState::load(&lab.name).unwrap();
    let api = st
        .apiserver
        .clone()
        .expect("a Kubernetes lab has an API server");
    tartan_lab::cluster::detached::stop(&api.proc, std::time::Duration::from_secs(10));
    let path = api.dir.join("requests.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !path.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut users = std::collections::BTreeSet::new();
    let refused: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .inspect(|r| {
            users.insert(r["user"].as_str().unwrap_or("").to_string());
        })
        .filter(|r| r["allowed"] == false)
        .collect();
    // Every program spoke as its own identity; the CNI plugin with the
    // token felix asked for it.
    for user in [
        "kubernetes-admin",
        "system:serviceaccount:tartan-system:tartan-node",
        "system:serviceaccount:tartan-system:tartan-cni",
        "system:serviceaccount:tartan-system:tartan-controllers",
        "system:serviceaccount:kube-system:tartan-dns",
    ] {
        assert!(users.contains(user), "no request of {user}: {users:?}");
    }
    assert!(
        !refused.is_empty()
            && refused.iter().all(|r| r["verb"] == "delete"
                && r["user"] == "system:serviceaccount:tartan-system:tartan-node"
                && r["request"].as_str().unwrap_or("").contains("ippools")),
        "refused: {refused:#?}"
    );
}
