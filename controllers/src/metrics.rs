//! Prometheus metrics of tartan-controllers, all named
//! `tartan_controllers_*` (and `tartan_build_info`), and the HTTP server
//! of `/livez`, `/readyz` (200 once serving, leading or on standby) and `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A label naming one thing: a controller, a kind or a pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Name {
    pub name: String,
}

pub struct Metrics {
    registry: Registry,
    pub leader: Gauge,
    pub ipam_released_addresses: Counter,
    /// Objects of deleted nodes deleted, by kind.
    pub ipam_deleted_objects: Family<Name, Counter>,
    pub ipam_labelled_affinities: Counter,
    pub lb_assigned: Counter,
    pub lb_released: Counter,
    pub lb_unsatisfied: Gauge,
    /// Per pool.
    pub lb_pool_addresses: Family<Name, Gauge>,
    pub lb_pool_in_use: Family<Name, Gauge>,
    /// Failed passes, per controller (`ipam-gc`, `loadbalancer`,
    /// `first-start`).
    pub pass_errors: Family<Name, Counter>,
    /// Problems in the ConfigMap that keep the default pools back.
    pub config_problems: Gauge,
    pub default_pools_created: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        tartan_api::build_info::register(&mut root, "tartan-controllers");
        let m = Metrics {
            registry: Registry::default(),
            leader: Gauge::default(),
            ipam_released_addresses: Counter::default(),
            ipam_deleted_objects: Family::default(),
            ipam_labelled_affinities: Counter::default(),
            lb_assigned: Counter::default(),
            lb_released: Counter::default(),
            lb_unsatisfied: Gauge::default(),
            lb_pool_addresses: Family::default(),
            lb_pool_in_use: Family::default(),
            pass_errors: Family::default(),
            config_problems: Gauge::default(),
            default_pools_created: Counter::default(),
        };
        let r = root.sub_registry_with_prefix("tartan_controllers");
        r.register(
            "leader",
            "1 while this replica holds the Lease and acts, else 0",
            m.leader.clone(),
        );
        r.register(
            "ipam_released_addresses",
            "Pod addresses of deleted nodes released",
            m.ipam_released_addresses.clone(),
        );
        r.register(
            "ipam_deleted_objects",
            "IPAM records of deleted nodes deleted, by kind",
            m.ipam_deleted_objects.clone(),
        );
        r.register(
            "ipam_labelled_affinities",
            "BlockAffinities given their tartan.dev/node label",
            m.ipam_labelled_affinities.clone(),
        );
        r.register(
            "lb_assigned_addresses",
            "LoadBalancer ingress addresses given to Services",
            m.lb_assigned.clone(),
        );
        r.register(
            "lb_released_addresses",
            "LoadBalancer ingress addresses taken back from Services",
            m.lb_released.clone(),
        );
        r.register(
            "lb_unsatisfied_services",
            "LoadBalancer Services without every address they want",
            m.lb_unsatisfied.clone(),
        );
        r.register(
            "lb_pool_addresses",
            "Addresses in each LoadBalancerIPPool",
            m.lb_pool_addresses.clone(),
        );
        r.register(
            "lb_pool_addresses_in_use",
            "Addresses of each LoadBalancerIPPool held by Services",
            m.lb_pool_in_use.clone(),
        );
        r.register(
            "pass_errors",
            "Controller passes that failed (the store refused or was unreachable)",
            m.pass_errors.clone(),
        );
        r.register(
            "config_problems",
            "Problems in the ConfigMap tartan-config that keep the default IPPools from being created (no pool exists yet)",
            m.config_problems.clone(),
        );
        r.register(
            "default_pools_created",
            "Default IPPools created from the ConfigMap tartan-config at first start",
            m.default_pools_created.clone(),
        );
        Metrics {
            registry: root,
            ..m
        }
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// What the HTTP handlers read.
#[derive(Clone)]
pub struct Health {
    pub metrics: Arc<Metrics>,
    pub leading: watch::Receiver<bool>,
}

async fn livez() -> &'static str {
    "ok\n"
}

/// Ready as a standby too: a rolling update waits for readiness, and a
/// standby that never became ready would stop it. Whether this replica
/// leads is in the body and in `tartan_controllers_leader`.
async fn readyz(State(h): State<Health>) -> Response {
    let body = if *h.leading.borrow() {
        "ok: leading\n"
    } else {
        "ok: standby\n"
    };
    (StatusCode::OK, body).into_response()
}

async fn metrics(State(h): State<Health>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        h.metrics.encode(),
    )
        .into_response()
}

/// Serve `/livez`, `/readyz` and `/metrics` on `listener`.
pub async fn serve(listener: TcpListener, h: Health) -> std::io::Result<()> {
    let app = Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(h);
    axum::serve(listener, app).await
}
