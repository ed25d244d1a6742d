//! Where a drain (RFC 8326 graceful shutdown, see `drain.rs`) stands: the
//! daemon keeps it, the drain steps change it.
use std::time::Instant;

/// Where a drain stands.
#[derive(Debug, Default)]
pub(super) struct DrainState {
    /// When the sessions close; set while draining.
    pub close_at: Option<Instant>,
    /// The sessions have been closed.
    pub closed: bool,
    /// Stop the daemon once closed (the SIGTERM mode).
    pub exit_when_closed: bool,
}
