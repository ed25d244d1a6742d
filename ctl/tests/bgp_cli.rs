//! Runs the built `tartanctl` against a fake tartan-bgpd on a Unix socket.
use axum::Json;
use axum::Router;
use axum::extract::RawQuery;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};

/// A directory removed on drop, also when the test fails.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("tartanctl-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn peers() -> Value {
    json!([{
        "address": "192.0.2.1", "port": 179, "asn": 65001, "localAsn": 65000,
        "kind": "ebgp", "state": "Established", "uptimeSeconds": 192,
        "routerId": "192.0.2.1", "holdTime": 90, "families": ["ipv4-unicast"],
        "prefixes": {"received": 10, "accepted": 9, "advertised": 3},
        "lastError": null,
        "messages": {
            "sent": {"open": 1, "update": 2, "notification": 0, "keepalive": 5, "routeRefresh": 0},
            "received": {"open": 1, "update": 7, "notification": 0, "keepalive": 5, "routeRefresh": 0}
        },
        "gracefulRestart": null, "rrClient": false, "description": "tor-a"
    }])
}

fn routes() -> Value {
    json!([{
        "prefix": "10.0.1.0/26", "family": "ipv4-unicast",
        "paths": [{
            "best": true, "multipath": false, "stale": false,
            "peer": "192.0.2.1", "nextHop": "192.0.2.1", "asPath": "65001",
            "origin": "igp", "med": null, "localPref": 100,
            "communities": [], "largeCommunities": [], "originatorId": null, "clusterList": []
        }]
    }])
}

type Seen = Arc<Mutex<Option<String>>>;

/// Serves fixed answers on `path`; records the last routes query.
async fn fake_bgpd(path: &Path) -> Seen {
    let seen: Seen = Arc::default();
    let recorder = seen.clone();
    let app = Router::new()
        .route("/v1/peers", get(|| async { Json(peers()) }))
        .route(
            "/v1/routes",
            get(move |RawQuery(q): RawQuery| async move {
                let bad = q.as_deref().is_some_and(|q| q.contains("banana"));
                *recorder.lock().unwrap() = q;
                if bad {
                    let body = json!({"error": "invalid prefix \"banana\""});
                    return (StatusCode::BAD_REQUEST, Json(body));
                }
                (StatusCode::OK, Json(routes()))
            }),
        );
    let listener = tokio::net::UnixListener::bind(path).unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    seen
}

async fn tartanctl(args: &[&str], socket_env: Option<&Path>) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_tartanctl"));
    cmd.args(args).env_remove("TARTAN_BGP_SOCKET");
    if let Some(p) = socket_env {
        cmd.env("TARTAN_BGP_SOCKET", p);
    }
    cmd.output().await.unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[tokio::test]
async fn peers_as_json_and_table() {
    let dir = TempDir::new("peers");
    let sock = dir.0.join("bgpd.sock");
    fake_bgpd(&sock).await;
    let s = sock.to_str().unwrap();

    let out = tartanctl(&["bgp", "peers", "-o", "json", "--bgp-socket", s], None).await;
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed, peers());

    let out = tartanctl(&["--bgp-socket", s, "bgp", "peers"], None).await;
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let cells: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "PEER", "ASN", "TYPE", "STATE", "BFD", "UPTIME", "PREFIXES", "LAST", "ERROR"
        ]
    );
    let cells: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "192.0.2.1",
            "65001",
            "ebgp",
            "Established",
            "-",
            "3m12s",
            "10/9/3",
            "-"
        ]
    );
    // Columns line up: every header starts where its cells start.
    assert_eq!(lines[0].find("STATE"), lines[1].find("Established"));

    let out = tartanctl(&["bgp", "peers", "-o", "wide"], Some(&sock)).await;
    let text = stdout(&out);
    assert!(text.contains("tor-a") && text.contains("13/8"), "{text}");
}

#[tokio::test]
async fn routes_pass_filters_and_show_flags() {
    let dir = TempDir::new("routes");
    let sock = dir.0.join("bgpd.sock");
    let seen = fake_bgpd(&sock).await;

    let args = [
        "bgp",
        "routes",
        "--family",
        "ipv4-unicast",
        "--prefix",
        "10.0.1.0/26",
    ];
    let text = stdout(&tartanctl(&args, Some(&sock)).await);
    assert_eq!(
        seen.lock().unwrap().as_deref(),
        Some("family=ipv4-unicast&prefix=10.0.1.0/26")
    );
    let row = text.lines().nth(1).unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "*>",
            "10.0.1.0/26",
            "192.0.2.1",
            "192.0.2.1",
            "-",
            "100",
            "65001"
        ]
    );

    let out = tartanctl(&["bgp", "routes", "-o", "json"], Some(&sock)).await;
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        routes()
    );

    let out = tartanctl(&["bgp", "routes", "--prefix", "banana"], Some(&sock)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("400") && err.contains("invalid prefix"),
        "{err}"
    );
}

#[tokio::test]
async fn missing_socket_is_a_clear_error() {
    let dir = TempDir::new("missing");
    let sock = dir.0.join("nope.sock");
    let out = tartanctl(&["bgp", "peers"], Some(&sock)).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let want = format!(
        "cannot reach tartan-bgpd at {}: No such file or directory \
         (is tartan-bgpd running? set --bgp-socket or TARTAN_BGP_SOCKET)",
        sock.display()
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&want), "{err}");
}

#[tokio::test]
async fn bad_arguments_are_rejected_by_the_cli() {
    let out = tartanctl(&["bgp", "routes", "--family", "ipv9"], None).await;
    assert_eq!(out.status.code(), Some(2));
    let out = tartanctl(&["bgp", "peers", "-o", "yaml"], None).await;
    assert_eq!(out.status.code(), Some(2));
}
