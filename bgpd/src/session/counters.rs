//! What a neighbor's task shares with the readers of its status: the
//! session state, the message counts (in the peer's Prometheus series), the
//! last error and the negotiated parameters while Established.
use super::fsm::{Negotiated, State};
use crate::control::{MessageType, PeerMetrics};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};
use tartan_api::bgp::MessageCounts;

/// Per-neighbor state shared between the task and the status readers.
/// Message counts live in the peer's Prometheus series, so they are
/// counted once and read by both the metrics endpoint and the control API.
#[derive(Debug)]
pub struct PeerCounters {
    state: AtomicU8,
    /// A session attempt has finished (either way) at least once: what
    /// `/readyz` waits for.
    attempted: AtomicBool,
    metrics: PeerMetrics,
    last_error: Mutex<Option<String>>,
    established_at: Mutex<Option<Instant>>,
    negotiated: Mutex<Option<Negotiated>>,
}

impl PeerCounters {
    pub fn new(metrics: PeerMetrics) -> Self {
        PeerCounters {
            state: AtomicU8::new(State::Idle as u8),
            attempted: AtomicBool::new(false),
            metrics,
            last_error: Mutex::default(),
            established_at: Mutex::default(),
            negotiated: Mutex::default(),
        }
    }
    pub fn metrics(&self) -> &PeerMetrics {
        &self.metrics
    }
    pub fn received(&self, msg_type: u8) {
        if let Some(t) = MessageType::from_code(msg_type) {
            self.metrics.inc_received(t);
        }
    }
    pub fn sent(&self, msg_type: u8) {
        self.sent_n(msg_type, 1);
    }
    pub fn sent_n(&self, msg_type: u8, n: u64) {
        if let Some(t) = MessageType::from_code(msg_type) {
            for _ in 0..n {
                self.metrics.inc_sent(t);
            }
        }
    }
    pub fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Relaxed);
        self.metrics.set_state(s.into());
    }
    pub fn state(&self) -> State {
        match self.state.load(Ordering::Relaxed) {
            2 => State::Connect,
            3 => State::Active,
            4 => State::OpenSent,
            5 => State::OpenConfirm,
            6 => State::Established,
            _ => State::Idle,
        }
    }
    /// A dial or an accepted connection has run its course (or the
    /// neighbor is passive and bgpd listens for it).
    pub fn mark_attempted(&self) {
        self.attempted.store(true, Ordering::Relaxed);
    }
    pub fn attempted(&self) -> bool {
        self.attempted.load(Ordering::Relaxed)
    }
    pub fn set_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    pub fn message_counts(&self) -> MessageCounts {
        self.metrics.message_counts()
    }
    pub fn uptime(&self) -> Option<Duration> {
        self.established_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|t| t.elapsed())
    }
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.negotiated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    pub(super) fn set_established(&self, n: Option<&Negotiated>) {
        *self
            .established_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = n.map(|_| Instant::now());
        *self.negotiated.lock().unwrap_or_else(|p| p.into_inner()) = n.cloned();
    }
}
