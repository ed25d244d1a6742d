use crate::control::{ControlSource, SourceUnavailable};
use crate::model::Family;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use tartan_api::bgp::*;

/// A directory removed on drop, also when the test fails.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "tartan-control-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub type Query = (Option<Family>, Option<IpNet>);

/// Answers from fixed data and records the last routes query.
#[derive(Default)]
pub struct FakeSource {
    pub unavailable: bool,
    pub last_query: Arc<Mutex<Option<Query>>>,
}

impl FakeSource {
    fn check(&self) -> Result<(), SourceUnavailable> {
        if self.unavailable {
            return Err(SourceUnavailable("shutting down".into()));
        }
        Ok(())
    }
}

pub fn peer() -> PeerStatus {
    PeerStatus {
        address: "192.0.2.1".parse().unwrap(),
        port: Some(179),
        asn: 65001,
        local_asn: 65000,
        kind: PeerKind::Ebgp,
        state: SessionState::Established,
        uptime_seconds: Some(75),
        router_id: Some(Ipv4Addr::new(192, 0, 2, 1)),
        hold_time: Some(90),
        families: vec!["ipv4-unicast".into()],
        prefixes: PrefixCounts::default(),
        last_error: None,
        messages: MessageCounts::default(),
        graceful_restart: None,
        rr_client: false,
        description: None,
        bfd: None,
    }
}

pub fn status() -> SpeakerStatus {
    SpeakerStatus {
        router_id: Ipv4Addr::new(10, 0, 0, 1),
        asn: 65000,
        peers: 1,
        established_peers: 1,
        routes: BTreeMap::new(),
        kernel: KernelCounts::default(),
        started_at: 1_700_000_000,
        uptime_seconds: 5,
        version: "test".into(),
        restart: None,
    }
}

impl ControlSource for FakeSource {
    async fn peers(&self) -> Result<Vec<PeerStatus>, SourceUnavailable> {
        self.check()?;
        Ok(vec![peer()])
    }

    async fn routes(
        &self,
        family: Option<Family>,
        prefix: Option<IpNet>,
    ) -> Result<Vec<RouteEntry>, SourceUnavailable> {
        self.check()?;
        *self.last_query.lock().unwrap() = Some((family, prefix));
        Ok(vec![RouteEntry {
            prefix: "10.0.0.0/24".parse().unwrap(),
            family: "ipv4-unicast".into(),
            paths: vec![],
        }])
    }

    async fn status(&self) -> Result<SpeakerStatus, SourceUnavailable> {
        self.check()?;
        Ok(status())
    }

    async fn drain(
        &self,
        wait: Option<std::time::Duration>,
    ) -> Result<tartan_api::bgp::DrainStatus, SourceUnavailable> {
        self.check()?;
        Ok(tartan_api::bgp::DrainStatus {
            draining: wait.is_some(),
            close_in_seconds: wait.map(|w| w.as_secs()),
            closed: false,
        })
    }
}

/// One GET over a fresh connection: (status, JSON body).
pub async fn get_unix(socket: &Path, uri: &str) -> (u16, serde_json::Value) {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (status, body) = get_over(TokioIo::new(stream), uri).await;
    (status, serde_json::from_slice(&body).unwrap())
}

pub async fn get_over<T>(io: T, uri: &str) -> (u16, Bytes)
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(uri)
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, body)
}

/// Waits until the server has bound its socket.
pub async fn wait_for(path: &Path) {
    for _ in 0..200 {
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("server did not come up at {}", path.display());
}

/// One POST of `body` over a fresh connection: (status, JSON body).
pub async fn post_unix(socket: &Path, uri: &str, body: &str) -> (u16, serde_json::Value) {
    let stream = tokio::net::UnixStream::connect(socket).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::post(uri)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap())
}
