//! `/livez`, `/readyz` and `/metrics` over HTTP.
//!
//! - `/livez`: 200 while the process serves.
//! - `/readyz`: 200 once the first full listing of Services, EndpointSlices
//!   and Namespaces is in (until then cluster names would be missing).
//! - `/metrics`: OpenMetrics text.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Health {
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
}

async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz(State(h): State<Health>) -> Response {
    if h.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "waiting for the first full listing\n",
        )
            .into_response()
    }
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

pub fn router(h: Health) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(h)
}

/// Serve on `listener` until the task is dropped.
pub async fn serve_on(listener: TcpListener, h: Health) -> std::io::Result<()> {
    axum::serve(listener, router(h)).await
}

pub async fn serve(addr: SocketAddr, h: Health) -> std::io::Result<()> {
    serve_on(TcpListener::bind(addr).await?, h).await
}
