//! RFC 8326 graceful shutdown of the whole speaker (`tartanctl node
//! drain`, or SIGTERM with `--shutdown-drain`): every route goes out again
//! with the GRACEFUL_SHUTDOWN community (LOCAL_PREF 0 to internal peers)
//! so that peers move their traffic to other paths, and after the wait
//! every session is closed with a Cease, Administrative Shutdown. Closed
//! sessions stay down until bgpd restarts.
use super::instance::Daemon;
use crate::session::PeerCommand;
use crate::wire::{Notification, cease};
use std::time::{Duration, Instant};
use tartan_api::bgp::DrainStatus;
use tracing::info;

/// The shutdown communication (RFC 9003) the peers' logs show.
const MESSAGE: &str = "graceful shutdown (RFC 8326): node drained";

impl Daemon {
    /// Starts a drain that closes the sessions after `wait` (an earlier
    /// close already set stays). Nothing once the sessions are closed.
    pub(super) fn start_drain(&mut self, wait: Duration) {
        if self.drain.closed {
            return;
        }
        // Held output would keep the GRACEFUL_SHUTDOWN routes from the
        // peers until the sessions close: the drain ends the deferral of
        // what we send (RFC 4724 4.1) under way.
        self.release_for_drain();
        let c = self.rib.set_draining(true);
        self.apply(c);
        let at = Instant::now() + wait;
        let close_at = self.drain.close_at.map_or(at, |t| t.min(at));
        self.drain.close_at = Some(close_at);
        info!(
            wait_seconds = close_at.saturating_duration_since(Instant::now()).as_secs(),
            peers = self.peers.len(),
            "draining: routes re-advertised with GRACEFUL_SHUTDOWN; sessions close after the wait"
        );
    }

    pub(super) fn drain_status(&self) -> DrainStatus {
        DrainStatus {
            draining: self.rib.draining(),
            close_in_seconds: self
                .drain
                .close_at
                .map(|t| t.saturating_duration_since(Instant::now()).as_secs()),
            closed: self.drain.closed,
        }
    }

    /// Closes every session if the drain's wait is over.
    pub(super) fn close_if_drained(&mut self, now: Instant) {
        if self.drain.close_at.is_none_or(|t| t > now) {
            return;
        }
        self.drain.close_at = None;
        self.drain.closed = true;
        for p in self.peers.values() {
            let n = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, MESSAGE);
            let _ = p.link.commands.try_send(PeerCommand::Stop(n));
        }
        info!(
            peers = self.peers.len(),
            "drained: every session closed (Cease, Administrative Shutdown)"
        );
    }
}

#[cfg(test)]
#[path = "drain_tests.rs"]
mod tests;
