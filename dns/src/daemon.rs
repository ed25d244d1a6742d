//! The whole server assembled: the datastore watch, the DNS sockets (UDP
//! on threads of their own, TCP on the runtime) and the HTTP endpoint,
//! sharing one [`Records`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use anyhow::{Context, Result};
use tartan_api::store::Datastore;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::info;

use crate::answer::Zone;
use crate::forward::{ForwardConfig, Forwarder};
use crate::handler::Handler;
use crate::health::Health;
use crate::limit::{LimitConfig, Limiter};
use crate::metrics::Metrics;
use crate::records::Records;
use crate::server::Server;

#[derive(Clone, Debug)]
pub struct Config {
    /// Where DNS is served (UDP and TCP).
    pub listen: SocketAddr,
    /// Where `/livez`, `/readyz` and `/metrics` are served, if anywhere.
    pub health: Option<SocketAddr>,
    pub zone: Zone,
    pub forward: ForwardConfig,
    pub limit: LimitConfig,
    pub max_inflight: usize,
    pub max_tcp: usize,
    /// UDP sockets, each read by a thread of its own (at least one).
    pub udp_threads: usize,
}

/// A running server; its tasks and threads stop when it is dropped.
pub struct Running {
    pub dns: SocketAddr,
    pub health: Option<SocketAddr>,
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    pub records: Arc<RwLock<Records>>,
    tasks: Vec<JoinHandle<()>>,
    /// Tells the UDP threads to end.
    stop: Arc<AtomicBool>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Running {
    /// Wait until every task has ended (they end only on errors).
    pub async fn wait(mut self) {
        for t in std::mem::take(&mut self.tasks) {
            let _ = t.await;
        }
    }
}

/// The runtime's worker threads (the datastore watch, TCP, upstream
/// queries and HTTP; the UDP threads are apart).
pub const WORKERS: usize = 2;

/// UDP threads by default: one per core the process may use, at most 4.
pub fn default_udp_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// Bind the sockets and start serving.
pub async fn start(cfg: Config, store: Arc<dyn Datastore>) -> Result<Running> {
    let metrics = Arc::new(Metrics::new());
    let records = Arc::new(RwLock::new(Records::new()));
    let ready = Arc::new(AtomicBool::new(false));
    let udp = crate::sockets::bind_udp(cfg.listen, cfg.udp_threads)
        .with_context(|| format!("bind UDP {}", cfg.listen))?;
    let dns = udp[0].local_addr()?;
    // TCP on the same port as UDP (which may have been chosen by the kernel).
    let tcp = TcpListener::bind(dns)
        .await
        .with_context(|| format!("bind TCP {dns}"))?;
    let forwarder = (!cfg.forward.upstreams.is_empty())
        .then(|| Forwarder::new(cfg.forward.clone(), metrics.clone()));
    let handler = Arc::new(Handler {
        records: records.clone(),
        zone: cfg.zone.clone(),
        forwarder,
        metrics: metrics.clone(),
        replies: crate::replies::ReplyCache::new(crate::handler::REPLY_CACHE),
        forwarded: crate::replies::ReplyCache::new(crate::handler::REPLY_CACHE),
        ready: ready.clone(),
    });
    let server = Arc::new(Server {
        handler,
        limiter: Arc::new(Limiter::new(cfg.limit)),
        max_inflight: cfg.max_inflight,
        max_tcp: cfg.max_tcp,
    });
    let stop = Arc::new(AtomicBool::new(false));
    server
        .start_udp(udp, tokio::runtime::Handle::current(), stop.clone())
        .context("start the UDP threads")?;
    let mut tasks = vec![
        tokio::spawn(server.serve_tcp(tcp)),
        tokio::spawn(crate::watch::follow(
            store,
            records.clone(),
            ready.clone(),
            metrics.clone(),
        )),
    ];
    let mut health = None;
    if let Some(addr) = cfg.health {
        let l = TcpListener::bind(addr)
            .await
            .with_context(|| format!("bind {addr}"))?;
        health = Some(l.local_addr()?);
        let h = Health {
            ready: ready.clone(),
            metrics: metrics.clone(),
        };
        tasks.push(tokio::spawn(async move {
            if let Err(e) = crate::health::serve_on(l, h).await {
                tracing::warn!(error = %e, "health endpoint failed");
            }
        }));
    }
    info!(%dns, zone = %cfg.zone.domain, upstreams = ?cfg.forward.upstreams, "tartan-dns serving");
    Ok(Running {
        dns,
        health,
        ready,
        metrics,
        records,
        tasks,
        stop,
    })
}
