use super::support::{FakeSource, TempDir, get_unix, wait_for};
use crate::control::{ControlError, serve_unix};
use crate::model::Family;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server; dropping `stop` shuts it down.
struct Running {
    path: PathBuf,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ControlError>>,
}

fn start(path: &Path, source: FakeSource) -> Running {
    let (stop, rx) = oneshot::channel::<()>();
    let p = path.to_owned();
    let task = tokio::spawn(async move {
        serve_unix(&p, source, async {
            let _ = rx.await;
        })
        .await
    });
    Running {
        path: path.to_owned(),
        stop,
        task,
    }
}

async fn start_ready(path: &Path, source: FakeSource) -> Running {
    let r = start(path, source);
    wait_for(path).await;
    r
}

#[tokio::test]
async fn serves_status_peers_and_routes() {
    let dir = TempDir::new();
    let path = dir.0.join("run/tartan/bgpd.sock");
    let r = start_ready(&path, FakeSource::default()).await;

    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o660);
    assert_eq!(mode(path.parent().unwrap()), 0o755);

    let (code, body) = get_unix(&path, "/v1/status").await;
    assert_eq!(code, 200);
    assert_eq!(body["routerId"], "10.0.0.1");
    let (code, body) = get_unix(&path, "/v1/peers").await;
    assert_eq!(code, 200);
    assert_eq!(body[0]["address"], "192.0.2.1");
    assert_eq!(body[0]["state"], "Established");
    let (code, body) = get_unix(&path, "/v1/routes").await;
    assert_eq!(code, 200);
    assert_eq!(body[0]["prefix"], "10.0.0.0/24");

    r.stop.send(()).unwrap();
    r.task.await.unwrap().unwrap();
    assert!(!r.path.exists(), "socket file removed on shutdown");
}

#[tokio::test]
async fn routes_query_is_parsed_and_normalized() {
    let dir = TempDir::new();
    let path = dir.0.join("bgpd.sock");
    let source = FakeSource::default();
    let seen = source.last_query.clone();
    let _r = start_ready(&path, source).await;

    let (code, _) = get_unix(&path, "/v1/routes?family=ipv4-unicast&prefix=10.0.0.7/24").await;
    assert_eq!(code, 200);
    let want = (
        Some(Family::Ipv4Unicast),
        Some("10.0.0.0/24".parse().unwrap()),
    );
    assert_eq!(*seen.lock().unwrap(), Some(want));

    let (code, _) = get_unix(&path, "/v1/routes?prefix=2001:db8::1").await;
    assert_eq!(code, 200);
    let want = (None, Some("2001:db8::1/128".parse().unwrap()));
    assert_eq!(*seen.lock().unwrap(), Some(want));

    let (code, _) = get_unix(&path, "/v1/routes?family=ipv6-unicast").await;
    assert_eq!(code, 200);
    assert_eq!(
        *seen.lock().unwrap(),
        Some((Some(Family::Ipv6Unicast), None))
    );
}

#[tokio::test]
async fn bad_queries_and_paths_get_json_errors() {
    let dir = TempDir::new();
    let path = dir.0.join("bgpd.sock");
    let _r = start_ready(&path, FakeSource::default()).await;
    let cases = [
        (
            "/v1/routes?family=ipv9-multicast",
            400,
            "unknown address family",
        ),
        ("/v1/routes?prefix=10.0.0.0/33", 400, "invalid prefix"),
        ("/v1/routes?prefix=banana", 400, "invalid prefix"),
        (
            "/v1/routes?family=ipv6-unicast&prefix=10.0.0.0/8",
            400,
            "not in family ipv6-unicast",
        ),
        ("/v1/routes?colour=red", 400, "colour"),
        ("/v1/nope", 404, "no such endpoint"),
        ("/", 404, "no such endpoint"),
    ];
    for (uri, want, text) in cases {
        let (code, body) = get_unix(&path, uri).await;
        assert_eq!(code, want, "{uri}");
        let msg = body["error"].as_str().unwrap_or_default();
        assert!(msg.contains(text), "{uri}: {msg}");
    }
}

#[tokio::test]
async fn unavailable_source_is_503() {
    let dir = TempDir::new();
    let path = dir.0.join("bgpd.sock");
    let source = FakeSource {
        unavailable: true,
        ..FakeSource::default()
    };
    let _r = start_ready(&path, source).await;
    let (code, body) = get_unix(&path, "/v1/peers").await;
    assert_eq!(code, 503);
    assert!(body["error"].as_str().unwrap().contains("shutting down"));
}

#[tokio::test]
async fn stale_socket_is_replaced_but_live_one_and_files_are_not() {
    let dir = TempDir::new();
    let path = dir.0.join("bgpd.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let first = start_ready(&path, FakeSource::default()).await;

    let second = start(&path, FakeSource::default());
    let err = second.task.await.unwrap().unwrap_err();
    assert!(matches!(err, ControlError::InUse { .. }), "{err}");
    drop(first);

    let file = dir.0.join("not-a-socket");
    std::fs::write(&file, "keep me").unwrap();
    let third = start(&file, FakeSource::default());
    let err = third.task.await.unwrap().unwrap_err();
    assert!(matches!(err, ControlError::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
}

#[tokio::test]
async fn drain_is_started_by_post_and_read_by_get() {
    use super::support::post_unix;
    let dir = TempDir::new();
    let path = dir.0.join("bgpd.sock");
    let _r = start_ready(&path, FakeSource::default()).await;

    let (code, body) = post_unix(&path, "/v1/drain", r#"{"waitSeconds": 30}"#).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["draining"], true);
    assert_eq!(body["closeInSeconds"], 30);
    let (code, body) = get_unix(&path, "/v1/drain").await;
    assert_eq!(code, 200);
    assert_eq!(body["draining"], false, "a GET only reads");

    for bad in [r#"{"waitSeconds": 3601}"#, r#"{"wait": 3}"#, "nonsense"] {
        let (code, body) = post_unix(&path, "/v1/drain", bad).await;
        assert_eq!(code, 400, "{bad}: {body}");
        assert!(body["error"].is_string());
    }
}
