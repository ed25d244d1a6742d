//! `/livez` and `/readyz` over TCP with a fake daemon.
use super::support::get_over;
use crate::control::{Health, HealthSource, SourceUnavailable, readiness, serve_health_on};
use hyper_util::rt::TokioIo;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Answers with the neighbors in `pending`; hangs when `stuck`.
#[derive(Clone, Default)]
struct FakeDaemon {
    pending: Arc<Mutex<Vec<IpAddr>>>,
    stuck: bool,
}

impl HealthSource for FakeDaemon {
    async fn unattempted(&self) -> Result<Vec<IpAddr>, SourceUnavailable> {
        if self.stuck {
            std::future::pending::<()>().await;
        }
        Ok(self.pending.lock().unwrap().clone())
    }
}

async fn serve(h: Arc<Health<FakeDaemon>>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_health_on(listener, h, std::future::pending()));
    addr
}

async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
    let (code, body) = get_over(io, path).await;
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn readiness_names_the_neighbors_not_attempted() {
    let a: IpAddr = "192.0.2.1".parse().unwrap();
    assert!(!readiness(false, &[]).ok);
    assert!(readiness(true, &[]).ok);
    let v = readiness(true, &[a]);
    assert!(!v.ok);
    assert!(v.reason.contains("192.0.2.1"), "{}", v.reason);
}

#[tokio::test]
async fn ready_once_configured_and_every_session_attempted() {
    let h = Health::new();
    let addr = serve(h.clone()).await;
    // Before the configuration: alive, not ready.
    assert_eq!(get(addr, "/livez").await.0, 200);
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!((code, body.trim()), (503, "no configuration yet"));

    let d = FakeDaemon::default();
    d.pending.lock().unwrap().push("192.0.2.7".parse().unwrap());
    h.set_source(d.clone());
    assert_eq!(get(addr, "/livez").await.0, 200);
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503);
    assert!(body.contains("192.0.2.7"), "{body}");

    d.pending.lock().unwrap().clear();
    assert_eq!(get(addr, "/readyz").await, (200, "ok\n".into()));
    assert_eq!(get(addr, "/other").await.0, 404);
}

#[tokio::test]
async fn a_stuck_instance_is_not_alive() {
    let h = Health::new();
    h.set_source(FakeDaemon {
        stuck: true,
        ..Default::default()
    });
    let addr = serve(h).await;
    // The source never answers: the probe fails after LIVENESS_TIMEOUT.
    let (code, body) = get(addr, "/livez").await;
    assert_eq!(code, 503);
    assert!(body.contains("did not answer"), "{body}");
}
