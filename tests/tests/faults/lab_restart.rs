//! While pods stream to each other across nodes, felix is restarted and
//! bgpd is killed with SIGKILL and started again: no ping is lost and the
//! TCP connection is not broken (the dataplane stays; graceful restart
//! keeps the peers' routes).

use std::time::Duration;

use tartan_tests::faults::{
    assert_running_then_stop, pings, restart_in_turn, stdout_of, stop_all, tcp_sink, tcp_stream,
};

#[test]
fn restarts_lose_no_packet_and_no_connection() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let (lab, _) = tartan_tests::lab_up("rs", &["--nodes", "2"]);
    lab.ok(&["pod", "add", "default/a", "--node", "node-1"]);
    lab.ok(&["pod", "add", "default/b", "--node", "node-2"]);
    let b = lab.ok(&["pod", "ip", "default/b"]).trim().to_string();
    assert!(lab.wait_reach("default/a", "default/b", Duration::from_secs(10)));

    // A TCP stream a -> b, and pings every 20 ms for 12 s.
    let server = tcp_sink(&lab, "default/b", 5001);
    std::thread::sleep(Duration::from_millis(300));
    let client = tcp_stream(&lab, "default/a", &b, 5001);
    let ping = pings(&lab, "default/a", &b, "0.02", 600);

    restart_in_turn(
        &lab,
        &[
            (2000, &["node-2", "felix"]),
            (1000, &["node-2", "bgpd", "--kill"]),
            (2000, &["node-1", "bgpd", "--kill"]),
            (1000, &["node-1", "felix"]),
        ],
    );

    let summary = stdout_of(ping);
    assert!(
        summary.contains("600 packets transmitted, 600 received"),
        "pings lost:\n{summary}"
    );
    // The stream is still going: the client has not exited.
    assert_running_then_stop(client, "the TCP connection broke");
    stop_all(&mut [server]);
    // The sessions came back.
    let status: serde_json::Value =
        serde_json::from_str(&lab.ok(&["status", "-o", "json"])).unwrap();
    for n in status["nodes"].as_array().unwrap() {
        assert_eq!(n["bgpSessionsEstablished"], 1, "{status}");
    }
}
