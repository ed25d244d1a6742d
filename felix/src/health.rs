//! Liveness, readiness and Prometheus metrics over HTTP.
//!
//! - `/livez`: 200 while the agent's loop turns (it has checked the
//!   dataplane within three resync periods).
//! - `/readyz`: 200 once the datastore was read in full and the dataplane
//!   applied without error at least once, and the last apply succeeded.
//! - `/metrics`: OpenMetrics text.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// What felix reports about itself.
pub struct Health {
    started: Instant,
    /// Milliseconds since `started` of the last pass of the loop.
    last_pass_ms: AtomicI64,
    ready: AtomicBool,
    stale_after: Duration,
    registry: Mutex<Registry>,
    pub applies: Counter,
    pub apply_failures: Counter,
    pub routes_installed: Counter,
    pub routes_removed: Counter,
    pub routes_desired: Gauge,
    pub routes_waiting: Gauge,
    /// 1: IPIP devices work here; 0: the kernel refused one; -1: not tried.
    pub ipip_supported: Gauge,
    pub vxlan_peers: Gauge,
    pub policy_writes: Counter,
    pub policy_failures: Counter,
    pub service_writes: Counter,
    pub service_failures: Counter,
    /// Objects felix watches that it cannot read, by `kind`.
    unreadable: Family<Vec<(String, String)>, Gauge>,
    pub conntrack_deleted: Counter,
}

impl Health {
    pub fn new(resync: Duration) -> Arc<Health> {
        let mut root = Registry::default();
        let h = Health {
            started: Instant::now(),
            last_pass_ms: AtomicI64::new(0),
            ready: AtomicBool::new(false),
            stale_after: resync * 3 + Duration::from_secs(5),
            registry: Mutex::new(Registry::default()),
            applies: Counter::default(),
            apply_failures: Counter::default(),
            routes_installed: Counter::default(),
            routes_removed: Counter::default(),
            routes_desired: Gauge::default(),
            routes_waiting: Gauge::default(),
            ipip_supported: Gauge::default(),
            vxlan_peers: Gauge::default(),
            policy_writes: Counter::default(),
            policy_failures: Counter::default(),
            service_writes: Counter::default(),
            service_failures: Counter::default(),
            unreadable: Family::default(),
            conntrack_deleted: Counter::default(),
        };
        h.ipip_supported.set(-1);
        root.register(
            "tartan_felix_unreadable_objects",
            "Objects felix watches that do not read as their kind (a policy among them isolates what it would govern), by kind",
            h.unreadable.clone(),
        );
        let registry = root.sub_registry_with_prefix("felix");
        registry.register(
            "route_applies",
            "Passes that compared routes with the kernel",
            h.applies.clone(),
        );
        registry.register(
            "route_apply_failures",
            "Passes the kernel refused",
            h.apply_failures.clone(),
        );
        registry.register(
            "routes_installed",
            "Routes installed or replaced",
            h.routes_installed.clone(),
        );
        registry.register(
            "routes_removed",
            "Routes of Tartan's removed",
            h.routes_removed.clone(),
        );
        registry.register(
            "routes_desired",
            "Routes this node should have",
            h.routes_desired.clone(),
        );
        registry.register(
            "routes_waiting",
            "Desired routes whose interface does not exist yet",
            h.routes_waiting.clone(),
        );
        registry.register(
            "ipip_supported",
            "1 if this kernel makes IPIP devices, 0 if it refused one (IPIP pools then routed natively), -1 if no IPIP pool asked yet",
            h.ipip_supported.clone(),
        );
        registry.register(
            "vxlan_peers",
            "Other nodes reached through the VXLAN device",
            h.vxlan_peers.clone(),
        );
        registry.register(
            "policy_writes",
            "nft transactions that changed the policy table",
            h.policy_writes.clone(),
        );
        registry.register(
            "policy_write_failures",
            "Policy table writes nft refused (each followed by a full rebuild)",
            h.policy_failures.clone(),
        );
        registry.register(
            "service_writes",
            "nft transactions that changed the service table",
            h.service_writes.clone(),
        );
        registry.register(
            "service_write_failures",
            "Service table writes nft refused",
            h.service_failures.clone(),
        );
        registry.register(
            "conntrack_entries_deleted",
            "UDP and SCTP conntrack entries deleted because their Service endpoint or frontend went away",
            h.conntrack_deleted.clone(),
        );
        if let Ok(mut r) = h.registry.lock() {
            *r = root;
        }
        Arc::new(h)
    }

    /// How many objects of `kind` felix cannot read now.
    pub fn set_unreadable(&self, kind: tartan_api::Kind, n: usize) {
        self.unreadable
            .get_or_create(&vec![("kind".to_string(), kind.to_string())])
            .set(n as i64);
    }

    /// The loop turned.
    pub fn pass(&self) {
        self.last_pass_ms
            .store(self.started.elapsed().as_millis() as i64, Ordering::Relaxed);
    }

    pub fn set_ready(&self, ok: bool) {
        self.ready.store(ok, Ordering::Relaxed);
    }

    fn live(&self) -> bool {
        let last = Duration::from_millis(self.last_pass_ms.load(Ordering::Relaxed).max(0) as u64);
        self.started.elapsed().saturating_sub(last) < self.stale_after
    }

    fn encode(&self) -> String {
        let mut out = String::new();
        if let Ok(r) = self.registry.lock() {
            let _ = encode(&mut out, &r);
        }
        out
    }
}

async fn livez(State(h): State<Arc<Health>>) -> Response {
    if h.live() {
        (StatusCode::OK, "live\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the agent's loop has stalled\n",
        )
            .into_response()
    }
}

async fn readyz(State(h): State<Arc<Health>>) -> Response {
    if h.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the datastore is not read in full, or the last apply failed\n",
        )
            .into_response()
    }
}

async fn metrics(State(h): State<Arc<Health>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.encode(),
    )
        .into_response()
}

/// Serve until the task is dropped.
pub async fn serve(addr: SocketAddr, h: Arc<Health>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "health and metrics listening");
    let app = Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(h);
    axum::serve(listener, app).await
}
