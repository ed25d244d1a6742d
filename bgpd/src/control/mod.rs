//! The control plane's window: an HTTP + JSON API on a Unix socket (peers,
//! routes, status), a Prometheus metrics endpoint and the health probes
//! (`/livez`, `/readyz`) on TCP.
//!
//! The daemon owns its state in one task; this module never reaches into it.
//! The daemon implements [`ControlSource`] (typically by sending a request
//! over a channel to its task) and updates [`Metrics`] as things happen.
mod durations;
mod error;
mod health;
mod metrics;
mod metrics_server;
mod server;
mod socket;
mod view;

#[cfg(test)]
mod tests;

pub use durations::Durations;
pub use error::{ControlError, SourceUnavailable};
pub use health::{
    Health, HealthSource, LIVENESS_TIMEOUT, Verdict, health_router, readiness, serve_health,
    serve_health_on,
};
pub use metrics::{BfdMetrics, Direction, MessageType, Metrics, PeerMetrics};
pub use metrics_server::{metrics_router, serve_metrics, serve_metrics_on};
pub use server::{router, serve_unix};
pub use view::{PathFlags, origin_name, path_view};

use crate::model::Family;
use ipnet::IpNet;
use std::future::Future;
use tartan_api::bgp::{DrainStatus, PeerStatus, RouteEntry, SpeakerStatus};

/// What the control API asks of the daemon. Each call is a snapshot; an
/// implementation answers from its own task and returns
/// [`SourceUnavailable`] when that task is gone (e.g. shutting down), which
/// the server turns into a 503.
pub trait ControlSource: Send + Sync + 'static {
    /// Every configured and dynamic peer.
    fn peers(&self) -> impl Future<Output = Result<Vec<PeerStatus>, SourceUnavailable>> + Send;

    /// Loc-RIB entries, optionally only one family and/or exactly one prefix
    /// (already normalized: host bits cleared).
    fn routes(
        &self,
        family: Option<Family>,
        prefix: Option<IpNet>,
    ) -> impl Future<Output = Result<Vec<RouteEntry>, SourceUnavailable>> + Send;

    /// The speaker as a whole.
    fn status(&self) -> impl Future<Output = Result<SpeakerStatus, SourceUnavailable>> + Send;

    /// RFC 8326 graceful shutdown: start (with `Some(wait)`, the time
    /// before the sessions close) or only look (`None`).
    fn drain(
        &self,
        wait: Option<std::time::Duration>,
    ) -> impl Future<Output = Result<DrainStatus, SourceUnavailable>> + Send;
}
