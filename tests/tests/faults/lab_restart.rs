//! While pods stream to each other across nodes, felix is restarted and
//! bgpd is killed with SIGKILL and started again: no ping is lost and the
//! TCP connection is not broken (the dataplane stays; graceful restart
//! keeps the peers' routes).

use std::time::Duration;

use tartan_lab::cluster::client::LabCli;

#[test]
fn restarts_lose_no_packet_and_no_connection() {
    let lab = LabCli::new(env!("CARGO_BIN_EXE_tartan-lab"), "rs");
    lab.ok(&["up", "--nodes", "2"]);
    lab.ok(&["pod", "add", "default/a", "--node", "node-1"]);
    lab.ok(&["pod", "add", "default/b", "--node", "node-2"]);
    let b = lab.ok(&["pod", "ip", "default/b"]).trim().to_string();
    assert!(lab.wait_reach("default/a", "default/b", Duration::from_secs(10)));

    // A TCP stream a -> b, and pings every 20 ms for 12 s.
    let mut server = lab
        .spawn(&[
            "exec",
            "default/b",
            "--",
            "socat",
            "-u",
            "TCP-LISTEN:5001,reuseaddr",
            "OPEN:/dev/null",
        ])
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let target = format!("TCP:{b}:5001");
    let mut client = lab
        .spawn(&[
            "exec",
            "default/a",
            "--",
            "socat",
            "-u",
            "/dev/zero",
            &target,
        ])
        .unwrap();
    let ping = lab
        .spawn(&[
            "exec",
            "default/a",
            "--",
            "ping",
            "-q",
            "-i",
            "0.02",
            "-c",
            "600",
            "-W",
            "1",
            &b,
        ])
        .unwrap();

    std::thread::sleep(Duration::from_secs(2));
    lab.ok(&["restart", "node-2", "felix"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.ok(&["restart", "node-2", "bgpd", "--kill"]);
    std::thread::sleep(Duration::from_secs(2));
    lab.ok(&["restart", "node-1", "bgpd", "--kill"]);
    std::thread::sleep(Duration::from_secs(1));
    lab.ok(&["restart", "node-1", "felix"]);

    let out = ping.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        summary.contains("600 packets transmitted, 600 received"),
        "pings lost:\n{summary}"
    );
    // The stream is still going: the client has not exited.
    assert!(
        client.try_wait().unwrap().is_none(),
        "the TCP connection broke: {:?}",
        client
            .wait_with_output()
            .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
    );
    let _ = client.kill();
    let _ = client.wait();
    let _ = server.kill();
    let _ = server.wait();
    // The sessions came back.
    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["bgpSessionsEstablished"], 1, "{status}");
    }
}
