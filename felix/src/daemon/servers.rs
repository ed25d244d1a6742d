//! The metrics wiring: felix's /livez, /readyz and /metrics, and the
//! Service proxy's /healthz, served beside the loop and ended with it.

use std::net::SocketAddr;
use std::sync::Arc;

use tracing::{error, warn};

use crate::health::Health;

/// Aborts the task when dropped (the health server ends with the loop).
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The health servers that run; dropping this stops them.
pub(super) struct Servers {
    _health: Option<AbortOnDrop>,
    _proxy: Option<AbortOnDrop>,
}

/// Serve `health` at `health_addr` and the proxy's health at `proxy_addr`
/// (each only when given).
pub(super) fn spawn(
    health_addr: Option<SocketAddr>,
    proxy_addr: Option<SocketAddr>,
    health: &Arc<Health>,
) -> Servers {
    let _health = health_addr.map(|addr| {
        let h = health.clone();
        AbortOnDrop(crate::serving::spawn(async move {
            if let Err(e) = crate::health::serve(addr, h).await {
                warn!(%addr, error = %e, "health endpoint failed");
            }
        }))
    });
    let _proxy = proxy_addr.map(|addr| {
        let h = health.clone();
        AbortOnDrop(crate::serving::spawn(async move {
            if let Err(e) = crate::health::serve_proxy(addr, h).await {
                error!(%addr, error = %e, "service proxy health endpoint failed; load balancers cannot probe this node");
            }
        }))
    });
    Servers { _health, _proxy }
}
