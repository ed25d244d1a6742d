//! `tartan-lab` as a user runs it: up, pods on different nodes, exec,
//! status, ctl, pod del, down; and nothing left afterwards.

use std::process::Command;

#[test]
fn up_pods_exec_status_down() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let (lab, out) = tartan_tests::lab_up("tl", &["--nodes", "3"]);
    assert!(out.contains("3 nodes, 3 BGP sessions"), "{out}");
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
