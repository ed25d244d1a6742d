//! `GET /metrics` over TCP.
use super::{ControlError, Metrics, server::error};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no such endpoint; try /metrics") })
        .with_state(metrics)
}

/// Binds `addr` and serves metrics until `shutdown` completes.
pub async fn serve_metrics(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ControlError::BindTcp { addr, source })?;
    serve_metrics_on(listener, metrics, shutdown).await
}

/// Serves metrics on an already bound listener (e.g. port 0 in tests).
pub async fn serve_metrics_on(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "metrics listening");
    }
    axum::serve(listener, metrics_router(metrics))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ControlError::Serve)
}

async fn scrape(State(metrics): State<Arc<Metrics>>) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()).into_response()
}
