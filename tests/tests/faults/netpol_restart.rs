//! felix is restarted (and killed) on both nodes while a denied pod keeps
//! trying to reach a server and an allowed pod streams to it over one TCP
//! connection: no denied probe gets through, and the allowed connection
//! is not cut. felix leaves its table in place when it stops and replaces
//! it in one transaction when it starts, so there is never a moment
//! without policy. On etcd and on the Kubernetes datastore.

use std::time::Duration;

use tartan_tests::Datastore;

use tartan_tests::faults::{
    assert_running_then_stop, pings, restart_in_turn, spawn_in, stdout_of, stop_all, tcp_sink,
    tcp_stream,
};

const POLICY: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: only-ok, namespace: x}
spec:
  podSelector: {matchLabels: {pod: server}}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: ok}}
"#;

#[test]
fn felix_restarts_keep_denied_denied_and_allowed_flowing() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    policy_through_felix_restarts(Datastore::Etcd, "npr");
}

/// The same on the Kubernetes datastore: felix reads the policy, the
/// pods and the namespaces through the API server stand-in as the node
/// agent's service account, and lists them anew at each restart.
#[test]
fn felix_restarts_keep_denied_denied_and_allowed_flowing_on_kubernetes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    policy_through_felix_restarts(Datastore::Kubernetes, "npk");
}

fn policy_through_felix_restarts(datastore: Datastore, prefix: &str) {
    let (lab, _) = tartan_tests::lab_up_on(prefix, datastore, &["--nodes", "2"]);
    lab.ok(&[
        "pod",
        "add",
        "x/server",
        "--node",
        "node-1",
        "--labels",
        "pod=server",
    ]);
    lab.ok(&[
        "pod", "add", "x/ok", "--node", "node-2", "--labels", "pod=ok",
    ]);
    lab.ok(&[
        "pod", "add", "x/bad", "--node", "node-2", "--labels", "pod=bad",
    ]);
    let server = lab.ok(&["pod", "ip", "x/server"]).trim().to_string();
    assert!(lab.wait_reach("x/ok", "x/server", Duration::from_secs(10)));
    assert!(lab.reach("x/bad", "x/server"), "no policy yet: bad reaches");

    let file = tartan_lab::TempDir::new("npr").unwrap();
    let path = file.path().join("policy.yaml");
    std::fs::write(&path, POLICY).unwrap();
    lab.ok(&["ctl", "apply", "-f", path.to_str().unwrap()]);
    let denied = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        !lab.reach("x/bad", "x/server")
    });
    assert!(denied, "the policy never took effect");
    assert!(lab.reach("x/ok", "x/server"));

    // Servers: a sink for the stream, and a listener the denied pod tries.
    let mut servers = vec![
        tcp_sink(&lab, "x/server", 5001),
        spawn_in(
            &lab,
            "x/server",
            &["socat", "TCP-LISTEN:5002,reuseaddr,fork", "SYSTEM:echo hi"],
        ),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let stream = tcp_stream(&lab, "x/ok", &server, 5001);
    // About 12 s of fresh connections from the denied pod, each given
    // 300 ms; every one that connects prints a line.
    let probe = format!(
        "for i in $(seq 40); do timeout 0.3 socat -u TCP:{server}:5002,connect-timeout=0.3 - 2>/dev/null | grep -q hi && echo THROUGH; sleep 0.01; done; echo DONE"
    );
    let probes = spawn_in(&lab, "x/bad", &["bash", "-c", &probe]);
    let pings = pings(&lab, "x/bad", &server, "0.05", 200);

    restart_in_turn(
        &lab,
        &[
            (1000, &["node-1", "felix"]),
            (2000, &["node-1", "felix", "--kill"]),
            (2000, &["node-2", "felix", "--kill"]),
            (1000, &["node-1", "felix"]),
        ],
    );

    let text = stdout_of(probes);
    assert!(
        text.contains("DONE"),
        "the probe loop did not finish: {text}"
    );
    assert!(
        !text.contains("THROUGH"),
        "{} denied connections got through:\n{text}",
        text.matches("THROUGH").count()
    );
    let summary = stdout_of(pings);
    assert!(
        summary.contains("200 packets transmitted, 0 received"),
        "denied pings got through:\n{summary}"
    );
    assert_running_then_stop(stream, "the allowed connection broke");
    stop_all(&mut servers);
    // A new connection from the allowed pod still works after it all.
    assert!(lab.reach("x/ok", "x/server"));
    assert!(!lab.reach("x/bad", "x/server"));
}
