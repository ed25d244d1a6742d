//! The HTTP + JSON control API.
use super::{ControlError, ControlSource, SourceUnavailable, socket};
use crate::model::Family;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use ipnet::IpNet;
use serde::Deserialize;
use std::future::Future;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use tartan_api::bgp::{DrainRequest, ErrorBody, PATH_DRAIN, PATH_PEERS, PATH_ROUTES, PATH_STATUS};

/// The control API's routes over `source`; [`serve_unix`] serves it.
pub fn router<S: ControlSource>(source: S) -> Router {
    Router::new()
        .route(PATH_STATUS, get(status::<S>))
        .route(PATH_PEERS, get(peers::<S>))
        .route(PATH_ROUTES, get(routes::<S>))
        .route(PATH_DRAIN, get(drain_status::<S>).post(drain::<S>))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(Arc::new(source))
}

/// Serves the control API on a Unix socket at `path` until `shutdown`
/// completes, then removes the socket file.
pub async fn serve_unix<S: ControlSource>(
    path: &Path,
    source: S,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    let listener = socket::bind(path).await?;
    tracing::info!(path = %path.display(), "control API listening");
    let served = axum::serve(listener, router(source))
        .with_graceful_shutdown(shutdown)
        .await;
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove control socket");
    }
    served.map_err(ControlError::Serve)
}

pub(super) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = ErrorBody {
        error: message.into(),
    };
    (status, Json(body)).into_response()
}

fn answer<T: serde::Serialize>(result: Result<T, SourceUnavailable>) -> Response {
    match result {
        Ok(v) => Json(v).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn status<S: ControlSource>(State(s): State<Arc<S>>) -> Response {
    answer(s.status().await)
}

async fn peers<S: ControlSource>(State(s): State<Arc<S>>) -> Response {
    answer(s.peers().await)
}

async fn drain_status<S: ControlSource>(State(s): State<Arc<S>>) -> Response {
    answer(s.drain(None).await)
}

/// Longest wait a drain may ask for: an hour.
const MAX_DRAIN_WAIT: u64 = 3600;

async fn drain<S: ControlSource>(State(s): State<Arc<S>>, body: axum::body::Bytes) -> Response {
    let req: DrainRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("expected {{\"waitSeconds\": N}}: {e}"),
            );
        }
    };
    if req.wait_seconds > MAX_DRAIN_WAIT {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "waitSeconds {} is more than {MAX_DRAIN_WAIT}",
                req.wait_seconds
            ),
        );
    }
    answer(
        s.drain(Some(std::time::Duration::from_secs(req.wait_seconds)))
            .await,
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutesQuery {
    family: Option<String>,
    prefix: Option<String>,
}

async fn routes<S: ControlSource>(
    State(s): State<Arc<S>>,
    query: Result<Query<RoutesQuery>, QueryRejection>,
) -> Response {
    let Query(q) = match query {
        Ok(q) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, e.body_text()),
    };
    match parse_routes_query(&q) {
        Ok((family, prefix)) => answer(s.routes(family, prefix).await),
        Err(msg) => error(StatusCode::BAD_REQUEST, msg),
    }
}

fn parse_routes_query(q: &RoutesQuery) -> Result<(Option<Family>, Option<IpNet>), String> {
    let family = q.family.as_deref().map(str::parse::<Family>).transpose()?;
    let prefix = q.prefix.as_deref().map(parse_prefix).transpose()?;
    if let (Some(f), Some(p)) = (family, prefix)
        && Family::of(&p) != f
    {
        return Err(format!("prefix {p} is not in family {f}"));
    }
    Ok((family, prefix))
}

/// A prefix, or a bare address meaning its host prefix. Host bits are
/// cleared so that `10.0.0.1/24` finds `10.0.0.0/24`.
fn parse_prefix(s: &str) -> Result<IpNet, String> {
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    s.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("invalid prefix {s:?} (expected e.g. 10.0.0.0/24 or 2001:db8::/64)"))
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such endpoint")
}

async fn method_not_allowed() -> Response {
    error(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
}
