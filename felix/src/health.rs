//! Liveness, readiness and Prometheus metrics over HTTP.
//!
//! - `/livez`: 200 while the agent's loop turns (it has checked the
//!   dataplane within three resync periods).
//! - `/readyz`: 200 once the datastore was read in full and the dataplane
//!   applied without error at least once, and the last apply succeeded.
//! - `/metrics`: OpenMetrics text.
//!
//! And, on an address of its own (10256, as kube-proxy), the Service
//! proxy's health as load balancers and kube-proxy's own checks probe it:
//! `/healthz` and `/livez`, 200 while the Service table was last found or
//! made right within three resync periods, 503 otherwise, with a JSON body
//! giving when (`lastUpdated`, `currentTime`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::services::family::Fam;

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
    /// Passes that read this node's routes back from the kernel.
    pub route_reads: Counter,
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
    /// Unix seconds at which the CNI plugins' token (the last one written)
    /// expires; 0: none written.
    pub cni_token_expiry: Gauge,
    /// CNI plugin tokens requested and written.
    pub cni_token_refreshes: Counter,
    /// Attempts to request or write one that failed.
    pub cni_token_failures: Counter,
    /// How long a route pass against the kernel took.
    pub route_apply_seconds: Histogram,
    /// How long a write of the policy table took (a change or the whole).
    pub policy_write_seconds: Histogram,
    /// How long a write of the service table took (a change or the whole).
    pub service_write_seconds: Histogram,
    /// When the Service table was last synced; shared with the
    /// health-check node ports.
    proxy: ProxyHealth,
}

/// Whether the Service proxy is healthy: each served family's table
/// synced within `stale_after` (kube-proxy keeps one time per family and
/// is unhealthy when either is late). Cloned into whatever answers for
/// it (the proxy health port, the health-check node ports).
#[derive(Clone, Debug)]
pub struct ProxyHealth {
    /// Per family (IPv4, IPv6): Unix milliseconds of the last sync of its
    /// service table that succeeded; -1: none yet.
    synced_unix_ms: Arc<[AtomicI64; 2]>,
    /// Whether the IPv6 table is served (then its time counts too).
    v6_active: Arc<AtomicBool>,
    stale_after: Duration,
    /// Whether this node should still get load balancers' traffic (not
    /// being deleted, not marked for removal by the cluster autoscaler).
    eligible: Arc<AtomicBool>,
}

impl ProxyHealth {
    pub fn new(stale_after: Duration) -> ProxyHealth {
        ProxyHealth {
            synced_unix_ms: Arc::new([AtomicI64::new(-1), AtomicI64::new(-1)]),
            v6_active: Arc::new(AtomicBool::new(false)),
            stale_after,
            eligible: Arc::new(AtomicBool::new(true)),
        }
    }

    /// What this node's Node object says of its future (see
    /// `nodeEligible` in the `/healthz` answer).
    pub fn set_node_eligible(&self, eligible: bool) {
        if self.eligible.swap(eligible, Ordering::Relaxed) != eligible {
            tracing::info!(
                eligible,
                "node eligibility for load balancers changed (proxy /healthz)"
            );
        }
    }

    fn node_eligible(&self) -> bool {
        self.eligible.load(Ordering::Relaxed)
    }

    /// The last sync that succeeded, Unix milliseconds: of the served
    /// family synced longest ago (`None` while one has not synced yet).
    fn last(&self) -> Option<i64> {
        let served = if self.v6_active.load(Ordering::Relaxed) {
            2
        } else {
            1
        };
        self.synced_unix_ms[..served]
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .try_fold(i64::MAX, |m, t| (t >= 0).then_some(m.min(t)))
    }

    /// Every family's service table was found or made right, now.
    pub fn synced(&self) {
        for f in [Fam::V4, Fam::V6] {
            self.family_synced(f);
        }
    }

    /// Family `fam`'s service table was found or made right, now.
    pub fn family_synced(&self, fam: Fam) {
        self.synced_unix_ms[fam as usize].store(unix_ms(SystemTime::now()), Ordering::Relaxed);
    }

    /// Whether the IPv6 table is served (its sync then counts too).
    pub fn set_v6_served(&self, on: bool) {
        self.v6_active.store(on, Ordering::Relaxed);
    }

    /// Healthy now (whatever the node's eligibility: the health-check
    /// node ports of `Local` Services answer for the endpoints here).
    pub fn healthy(&self) -> bool {
        proxy_answer(
            self.last(),
            unix_ms(SystemTime::now()),
            self.stale_after,
            true,
        )
        .0
    }
}

/// Buckets from 0.5 ms to about 8 s (doubling): one endpoint changed is
/// well under a millisecond, a whole table of 10,000 Services under one
/// second.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

impl Health {
    pub fn new(resync: Duration) -> Arc<Health> {
        let mut root = Registry::default();
        // Liveness and the proxy's health go stale after the same time.
        let stale_after = resync * 3 + Duration::from_secs(5);
        let h = Health {
            started: Instant::now(),
            last_pass_ms: AtomicI64::new(0),
            ready: AtomicBool::new(false),
            stale_after,
            registry: Mutex::new(Registry::default()),
            applies: Counter::default(),
            apply_failures: Counter::default(),
            routes_installed: Counter::default(),
            route_reads: Counter::default(),
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
            cni_token_expiry: Gauge::default(),
            cni_token_refreshes: Counter::default(),
            cni_token_failures: Counter::default(),
            route_apply_seconds: duration_histogram(),
            policy_write_seconds: duration_histogram(),
            service_write_seconds: duration_histogram(),
            proxy: ProxyHealth::new(stale_after),
        };
        h.ipip_supported.set(-1);
        tartan_api::build_info::register(&mut root, "tartan-felix");
        root.register(
            "tartan_felix_unreadable_objects",
            "Objects felix watches that do not read as their kind (a policy among them isolates what it would govern), by kind",
            h.unreadable.clone(),
        );
        let registry = root.sub_registry_with_prefix("tartan_felix");
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
            "route_reads",
            "Passes that read this node's routes back from the kernel (the first, a periodic check, a tunnel device changed, an IPv4 address removed, netlink events lost, a pass after a failure or a surprise); other passes compare with what was read and written since, corrected by the kernel's events",
            h.route_reads.clone(),
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
            "Desired routes whose interface does not exist yet or is down",
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
            "route_apply_duration_seconds",
            "Time of a pass that compared routes with the kernel and changed what differed",
            h.route_apply_seconds.clone(),
        );
        registry.register(
            "policy_write_duration_seconds",
            "Time of a policy table write (a change, or the whole table)",
            h.policy_write_seconds.clone(),
        );
        registry.register(
            "service_write_duration_seconds",
            "Time of a service table write (a change, or the whole table)",
            h.service_write_seconds.clone(),
        );
        registry.register(
            "conntrack_entries_deleted",
            "UDP and SCTP conntrack entries deleted because their Service endpoint or frontend went away",
            h.conntrack_deleted.clone(),
        );
        registry.register(
            "cni_token_expiry_timestamp_seconds",
            "When the CNI plugins' token in their kubeconfig expires (Unix seconds; 0: none written)",
            h.cni_token_expiry.clone(),
        );
        registry.register(
            "cni_token_refreshes",
            "CNI plugin tokens requested (TokenRequest) and written to their kubeconfig",
            h.cni_token_refreshes.clone(),
        );
        registry.register(
            "cni_token_refresh_failures",
            "Requests or writes of the CNI plugins' token that failed (retried with backoff)",
            h.cni_token_failures.clone(),
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

    /// Every family's service table was found or made right.
    pub fn proxy_synced(&self) {
        self.proxy.synced();
    }

    /// What a sync of the service tables came to, per family: the time
    /// of each that succeeded, a failure counted for each that did not.
    pub fn proxy_synced_families(&self, v4_ok: bool, v6_ok: Option<bool>) {
        self.proxy.set_v6_served(v6_ok.is_some());
        for (fam, ok) in [(Fam::V4, Some(v4_ok)), (Fam::V6, v6_ok)] {
            match ok {
                Some(true) => self.proxy.family_synced(fam),
                Some(false) => {
                    self.service_failures.inc();
                }
                None => {}
            }
        }
    }

    /// The Service proxy's health, for what answers for it elsewhere.
    pub fn proxy_health(&self) -> ProxyHealth {
        self.proxy.clone()
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

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn rfc3339(unix_ms: i64) -> serde_json::Value {
    match k8s_openapi::jiff::Timestamp::from_millisecond(unix_ms) {
        Ok(t) => t.to_string().into(),
        Err(_) => serde_json::Value::Null,
    }
}

/// The proxy health answer at `now_ms` (Unix milliseconds): healthy when
/// the last successful Service sync (`None`: none yet) is younger than
/// `stale_after`; the body says when it was and whether the node is
/// `eligible`, as kube-proxy's does.
pub fn proxy_answer(
    last_ms: Option<i64>,
    now_ms: i64,
    stale_after: Duration,
    eligible: bool,
) -> (bool, String) {
    let healthy =
        last_ms.is_some_and(|t| now_ms.saturating_sub(t) < stale_after.as_millis() as i64);
    let body = serde_json::json!({
        "lastUpdated": last_ms.map_or(serde_json::Value::Null, rfc3339),
        "currentTime": rfc3339(now_ms),
        "nodeEligible": eligible,
    });
    (healthy, format!("{body}\n"))
}

/// `/healthz`: 503 also while the node is not eligible, so that load
/// balancers checking it stop sending a node on its way out.
async fn proxy_healthz(State(h): State<Arc<Health>>) -> Response {
    proxy_status(&h, true)
}

/// `/livez`: the proxy alone.
async fn proxy_livez(State(h): State<Arc<Health>>) -> Response {
    proxy_status(&h, false)
}

fn proxy_status(h: &Health, with_eligibility: bool) -> Response {
    let eligible = h.proxy.node_eligible();
    let (healthy, body) = proxy_answer(
        h.proxy.last(),
        unix_ms(SystemTime::now()),
        h.proxy.stale_after,
        eligible,
    );
    let healthy = healthy && (eligible || !with_eligibility);
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Serve the Service proxy's health until the task is dropped.
pub async fn serve_proxy(addr: SocketAddr, h: Arc<Health>) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "service proxy health listening");
    let app = Router::new()
        .route("/healthz", get(proxy_healthz))
        .route("/livez", get(proxy_livez))
        .with_state(h);
    axum::serve(listener, app).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_is_healthy_while_its_last_sync_is_recent() {
        let stale = Duration::from_secs(35);
        let now = 1_795_000_000_000;
        let (ok, body) = proxy_answer(Some(now - 1_000), now, stale, true);
        assert!(ok, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["lastUpdated"], rfc3339(now - 1_000));
        assert_eq!(v["currentTime"], rfc3339(now));
        assert!(v["currentTime"].as_str().unwrap().ends_with('Z'), "{body}");
        assert_eq!(v["nodeEligible"], true);

        let (ok, body) = proxy_answer(Some(now - 35_000), now, stale, true);
        assert!(!ok, "stale: {body}");
        let (ok, body) = proxy_answer(None, now, stale, true);
        assert!(!ok, "never synced: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(v["lastUpdated"].is_null());
    }

    /// kube-proxy's stance: healthy only when every served family synced
    /// lately; the time reported is the oldest.
    #[test]
    fn the_proxy_is_unhealthy_while_a_served_family_fails() {
        let h = Health::new(Duration::from_secs(10));
        let p = h.proxy_health();
        h.proxy_synced_families(true, None);
        assert!(p.healthy(), "IPv4 alone served and synced");
        h.proxy_synced_families(true, Some(false));
        assert!(!p.healthy(), "IPv6 served and never synced");
        assert_eq!(h.service_failures.get(), 1, "the IPv6 failure counted");
        h.proxy_synced_families(true, Some(true));
        assert!(p.healthy());
        // IPv6 synced long ago, IPv4 now: the older time is the answer.
        p.synced_unix_ms[1].store(1_000, Ordering::Relaxed);
        assert_eq!(p.last(), Some(1_000));
        assert!(!p.healthy(), "IPv6 late");
        h.proxy_synced_families(false, Some(true));
        assert!(p.healthy());
        assert_eq!(h.service_failures.get(), 2, "the IPv4 failure counted");
    }

    #[tokio::test]
    async fn healthz_and_livez_answer_over_http() {
        let h = Health::new(Duration::from_secs(1));
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let server = tokio::spawn(serve_proxy(addr, h.clone()));
        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            for _ in 0..100 {
                if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                    let req =
                        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                    s.write_all(req.as_bytes()).await.unwrap();
                    let mut out = String::new();
                    s.read_to_string(&mut out).await.unwrap();
                    return out;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("no server on {addr}");
        };
        assert!(get("/healthz").await.starts_with("HTTP/1.1 503"));
        h.proxy_synced();
        for path in ["/healthz", "/livez"] {
            let r = get(path).await;
            assert!(r.starts_with("HTTP/1.1 200"), "{r}");
            assert!(r.contains("\"lastUpdated\":\"20"), "{r}");
        }
        // A node on its way out: /healthz says so with 503 (load balancers
        // stop sending it traffic), /livez does not, nor do the health
        // checks of Local Services.
        h.proxy_health().set_node_eligible(false);
        let r = get("/healthz").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(r.contains("\"nodeEligible\":false"), "{r}");
        assert!(get("/livez").await.starts_with("HTTP/1.1 200"));
        assert!(h.proxy_health().healthy());
        h.proxy_health().set_node_eligible(true);
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        server.abort();
    }
}

#[cfg(test)]
mod duration_tests {
    use super::*;

    #[test]
    fn write_and_apply_durations_are_histograms_in_seconds() {
        let h = Health::new(Duration::from_secs(1));
        h.service_write_seconds.observe(0.0003);
        h.service_write_seconds.observe(0.8);
        h.policy_write_seconds.observe(0.002);
        let text = h.encode();
        for name in [
            "tartan_felix_route_apply_duration_seconds",
            "tartan_felix_policy_write_duration_seconds",
            "tartan_felix_service_write_duration_seconds",
        ] {
            assert!(text.contains(&format!("# TYPE {name} histogram")), "{text}");
        }
        assert!(
            text.contains("tartan_felix_service_write_duration_seconds_count 2"),
            "{text}"
        );
        // The first bucket (0.5 ms) holds the one small write.
        assert!(
            text.contains("tartan_felix_service_write_duration_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
    }
}
