//! The control API's channel into the instance task: requests, and the
//! handle that sends them. The instance answers them (`status.rs`).

use ipnet::IpNet;
use std::net::IpAddr;
use tartan_api::bgp::{PeerStatus, RouteEntry, SpeakerStatus};
use tokio::sync::{mpsc, oneshot};

use crate::control::{ControlSource, HealthSource, SourceUnavailable};
use crate::model::Family;

/// One question to the instance, with where to send the answer.
pub enum ControlRequest {
    Peers(oneshot::Sender<Vec<PeerStatus>>),
    Routes(
        Option<Family>,
        Option<IpNet>,
        oneshot::Sender<Vec<RouteEntry>>,
    ),
    Status(oneshot::Sender<SpeakerStatus>),
    /// Start a drain (`Some(wait)`) or only report on it.
    Drain(
        Option<std::time::Duration>,
        oneshot::Sender<tartan_api::bgp::DrainStatus>,
    ),
    /// The configured neighbors not yet attempted (for `/readyz`).
    Unattempted(oneshot::Sender<Vec<IpAddr>>),
}

/// Cheap to clone; what `control::serve_unix` is given.
#[derive(Clone)]
pub struct ControlHandle {
    tx: mpsc::Sender<ControlRequest>,
}

impl ControlHandle {
    pub(super) fn new(tx: mpsc::Sender<ControlRequest>) -> Self {
        ControlHandle { tx }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ControlRequest,
    ) -> Result<T, SourceUnavailable> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(make(tx))
            .await
            .map_err(|_| SourceUnavailable("tartan-bgpd is shutting down".into()))?;
        rx.await
            .map_err(|_| SourceUnavailable("tartan-bgpd is shutting down".into()))
    }
}

impl ControlSource for ControlHandle {
    async fn peers(&self) -> Result<Vec<PeerStatus>, SourceUnavailable> {
        self.ask(ControlRequest::Peers).await
    }
    async fn routes(
        &self,
        family: Option<Family>,
        prefix: Option<IpNet>,
    ) -> Result<Vec<RouteEntry>, SourceUnavailable> {
        self.ask(|tx| ControlRequest::Routes(family, prefix, tx))
            .await
    }
    async fn status(&self) -> Result<SpeakerStatus, SourceUnavailable> {
        self.ask(ControlRequest::Status).await
    }
    async fn drain(
        &self,
        wait: Option<std::time::Duration>,
    ) -> Result<tartan_api::bgp::DrainStatus, SourceUnavailable> {
        self.ask(|tx| ControlRequest::Drain(wait, tx)).await
    }
}

impl HealthSource for ControlHandle {
    async fn unattempted(&self) -> Result<Vec<IpAddr>, SourceUnavailable> {
        self.ask(ControlRequest::Unattempted).await
    }
}
