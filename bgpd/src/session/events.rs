//! The messages between a neighbor's task and the instance: what the
//! session hands on (up, routes, refresh requests, down) and the operator's
//! commands coming back.
use super::fsm::Negotiated;
use crate::model::Family;
use crate::wire::{self, Notification};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{Notify, oneshot};

pub type PeerId = u32;

/// What a peer task tells the instance.
#[derive(Debug)]
pub enum PeerEvent {
    Up {
        id: PeerId,
        session: u64,
        negotiated: Negotiated,
        local: SocketAddr,
        remote: SocketAddr,
        /// Notified by the instance when this peer has routes to send.
        output: Arc<Notify>,
    },
    Update {
        id: PeerId,
        session: u64,
        update: wire::Update,
    },
    RouteRefresh {
        id: PeerId,
        session: u64,
        family: Family,
    },
    /// The writer asks for the next bytes to send; None when there are none.
    Pull {
        id: PeerId,
        session: u64,
        reply: oneshot::Sender<Option<Vec<u8>>>,
    },
    Down {
        id: PeerId,
        session: u64,
        /// Keep the peer's routes as stale (RFC 4724) instead of removing them.
        graceful: bool,
        reason: String,
    },
}

/// What the instance tells a peer task.
#[derive(Debug)]
pub enum PeerCommand {
    /// Send this NOTIFICATION, close, and end the task.
    Stop(Notification),
    /// Send this NOTIFICATION, close, and start over after the retry time.
    Reset(Notification),
    /// Ask the peer to send its routes of this family again (RFC 2918).
    RouteRefresh(Family),
}
