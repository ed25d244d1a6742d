//! felix is restarted (and killed) on both nodes while a denied pod keeps
//! trying to reach a server and an allowed pod streams to it over one TCP
//! connection: no denied probe gets through, and the allowed connection
//! is not cut. felix leaves its table in place when it stops and replaces
//! it in one transaction when it starts, so there is never a moment
//! without policy.

use std::time::Duration;

use tartan_lab::cluster::client::LabCli;

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
    let lab = LabCli::new(env!("CARGO_BIN_EXE_tartan-lab"), "npr");
    lab.ok(&["up", "--nodes", "2"]);
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
        lab.spawn(&[
            "exec",
            "x/server",
            "--",
            "socat",
            "-u",
            "TCP-LISTEN:5001,reuseaddr",
            "OPEN:/dev/null",
        ])
        .unwrap(),
        lab.spawn(&[
            "exec",
            "x/server",
            "--",
            "socat",
            "TCP-LISTEN:5002,reuseaddr,fork",
            "SYSTEM:echo hi",
        ])
        .unwrap(),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let mut stream = lab
        .spawn(&[
            "exec",
            "x/ok",
            "--",
            "socat",
            "-u",
            "/dev/zero",
            &format!("TCP:{server}:5001"),
        ])
        .unwrap();
    // About 12 s of fresh connections from the denied pod, each given
    // 300 ms; every one that connects prints a line.
    let probe = format!(
        "for i in $(seq 40); do timeout 0.3 socat -u TCP:{server}:5002,connect-timeout=0.3 - 2>/dev/null | grep -q hi && echo THROUGH; sleep 0.01; done; echo DONE"
    );
    let probes = lab
        .spawn(&["exec", "x/bad", "--", "bash", "-c", &probe])
        .unwrap();
    let pings = lab
        .spawn(&[
            "exec", "x/bad", "--", "ping", "-q", "-i", "0.05", "-c", "200", "-W", "1", &server,
        ])
        .unwrap();

    std::thread::sleep(Duration::from_secs(1));
    lab.ok(&["restart", "node-1", "felix"]);
    std::thread::sleep(Duration::from_secs(2));
    lab.ok(&["restart", "node-1", "felix", "--kill"]);
    std::thread::sleep(Duration::from_secs(2));
    lab.ok(&["restart", "node-2", "felix", "--kill"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.ok(&["restart", "node-1", "felix"]);

    let out = probes.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("DONE"),
        "the probe loop did not finish: {text}"
    );
    assert!(
        !text.contains("THROUGH"),
        "{} denied connections got through:\n{text}",
        text.matches("THROUGH").count()
    );
    let out = pings.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        summary.contains("200 packets transmitted, 0 received"),
        "denied pings got through:\n{summary}"
    );
    assert!(
        stream.try_wait().unwrap().is_none(),
        "the allowed connection broke: {:?}",
        stream
            .wait_with_output()
            .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
    );
    let _ = stream.kill();
    let _ = stream.wait();
    for s in &mut servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    // A new connection from the allowed pod still works after it all.
    assert!(lab.reach("x/ok", "x/server"));
    assert!(!lab.reach("x/bad", "x/server"));
}
