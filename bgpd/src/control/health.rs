//! `GET /livez` and `GET /readyz` over TCP, for the kubelet's probes.
//!
//! Live: the instance task answers a question within [`LIVENESS_TIMEOUT`]
//! (before the first configuration, while bgpd waits on the datastore, the
//! process itself answering is enough). Ready: the configuration is built
//! and every configured session has been attempted at least once (a dial
//! finished, either way, or a connection from the peer was handled; a
//! passive neighbor counts as attempted once bgpd listens for it).
use super::{ControlError, SourceUnavailable};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;

/// How long the instance may take to answer before `/livez` fails.
pub const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

/// What the health endpoints ask of the running daemon.
pub trait HealthSource: Send + Sync + 'static {
    /// The configured neighbors that have not been attempted yet (empty:
    /// ready). Answered by the instance task, so an answer also proves
    /// that task is alive.
    fn unattempted(&self) -> impl Future<Output = Result<Vec<IpAddr>, SourceUnavailable>> + Send;
}

/// The daemon, once its configuration is built. The health server starts
/// before that (bgpd may wait on the datastore) and is handed the source
/// when it exists.
pub struct Health<S> {
    source: OnceLock<S>,
}

impl<S: HealthSource> Health<S> {
    pub fn new() -> Arc<Self> {
        Arc::new(Health {
            source: OnceLock::new(),
        })
    }

    /// The configuration is built: from now on the daemon answers.
    pub fn set_source(&self, s: S) {
        let _ = self.source.set(s);
    }
}

/// One probe's verdict: the HTTP status and a line for a human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    pub reason: String,
}

/// Readiness from the neighbors still unattempted.
pub fn readiness(configured: bool, unattempted: &[IpAddr]) -> Verdict {
    if !configured {
        return Verdict {
            ok: false,
            reason: "no configuration yet".into(),
        };
    }
    if unattempted.is_empty() {
        return Verdict {
            ok: true,
            reason: "ok".into(),
        };
    }
    let list: Vec<String> = unattempted.iter().map(ToString::to_string).collect();
    Verdict {
        ok: false,
        reason: format!("sessions not attempted yet: {}", list.join(", ")),
    }
}

pub fn health_router<S: HealthSource>(health: Arc<Health<S>>) -> Router {
    Router::new()
        .route("/livez", get(livez::<S>))
        .route("/readyz", get(readyz::<S>))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "no such endpoint; try /livez or /readyz\n",
            )
        })
        .with_state(health)
}

/// Binds `addr` and serves the probes until `shutdown` completes.
pub async fn serve_health<S: HealthSource>(
    addr: SocketAddr,
    health: Arc<Health<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ControlError::BindTcp { addr, source })?;
    serve_health_on(listener, health, shutdown).await
}

/// Serves the probes on an already bound listener (port 0 in tests).
pub async fn serve_health_on<S: HealthSource>(
    listener: TcpListener,
    health: Arc<Health<S>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlError> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "health endpoints listening");
    }
    axum::serve(listener, health_router(health))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ControlError::Serve)
}

fn answer(v: Verdict) -> Response {
    let code = if v.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, format!("{}\n", v.reason)).into_response()
}

/// Asks the instance, within the liveness timeout.
async fn ask<S: HealthSource>(s: &S) -> Result<Vec<IpAddr>, String> {
    match tokio::time::timeout(LIVENESS_TIMEOUT, s.unattempted()).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "the instance did not answer within {LIVENESS_TIMEOUT:?}"
        )),
    }
}

async fn livez<S: HealthSource>(State(h): State<Arc<Health<S>>>) -> Response {
    let Some(s) = h.source.get() else {
        return answer(Verdict {
            ok: true,
            reason: "ok (waiting for the configuration)".into(),
        });
    };
    answer(match ask(s).await {
        Ok(_) => Verdict {
            ok: true,
            reason: "ok".into(),
        },
        Err(reason) => Verdict { ok: false, reason },
    })
}

async fn readyz<S: HealthSource>(State(h): State<Arc<Health<S>>>) -> Response {
    let Some(s) = h.source.get() else {
        return answer(readiness(false, &[]));
    };
    answer(match ask(s).await {
        Ok(pending) => readiness(true, &pending),
        Err(reason) => Verdict { ok: false, reason },
    })
}
