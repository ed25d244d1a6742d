//! What BFD clients (BGP neighbors) hold: a handle on the runtime to ask for
//! sessions, and per session a client whose status follows the session and
//! which removes its interest when dropped.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::hops::Hops;
use super::packet::{Diag, State};
use super::queue::QueueSender;
use super::session::{Session, SessionConfig};

/// A session as its clients, the control API and metrics see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfdStatus {
    pub state: State,
    pub diag: Diag,
    /// The diagnostic the peer last sent: why its side went down.
    pub remote_diag: Diag,
    /// State changes since the session was made.
    pub transitions: u64,
    pub local_discr: u32,
    pub remote_discr: u32,
    /// The negotiated transmit interval (without jitter), once known.
    pub tx_interval: Option<Duration>,
    /// The detection time in force, once the remote has been heard.
    pub detection_time: Option<Duration>,
    pub config: SessionConfig,
    /// Down because the remote signalled AdminDown (diag 3 with the remote
    /// AdminDown, or Down all along and the remote AdminDown): RFC 5882
    /// section 3.2, the session says nothing of the path then.
    pub remote_admin_down: bool,
    /// A multihop session (RFC 5883, port 4784) rather than single hop.
    pub multihop: bool,
}

impl BfdStatus {
    /// Whether a BGP session it guards may run: BFD is Up, or the remote
    /// took BFD down administratively, which RFC 5882 section 3.2 says is
    /// no path failure (BGP's own hold timer watches the path then).
    pub fn allows_session(&self) -> bool {
        self.state == State::Up || self.remote_admin_down
    }

    pub(crate) fn of(session: &Session, transitions: u64, multihop: bool) -> BfdStatus {
        BfdStatus {
            state: session.state(),
            remote_admin_down: session.remote_admin_down(),
            diag: session.local_diag(),
            remote_diag: session.remote_diag(),
            transitions,
            local_discr: session.local_discr(),
            remote_discr: session.remote_discr(),
            tx_interval: session.transmit_interval(),
            detection_time: session.detection_time(),
            config: session.config(),
            multihop,
        }
    }
}

pub(super) enum Command {
    Add {
        client: u64,
        peer: IpAddr,
        local: Option<IpAddr>,
        hops: Hops,
        config: SessionConfig,
        status: watch::Sender<BfdStatus>,
    },
    Remove {
        client: u64,
    },
    /// New timers for the client's session, applied with a Poll sequence
    /// (RFC 5880 section 6.8.3) without taking the session down.
    SetConfig {
        client: u64,
        config: SessionConfig,
    },
}

/// The runtime's handle; cheap to clone.
#[derive(Clone)]
pub struct BfdHandle {
    pub(super) commands: QueueSender<Command>,
    pub(super) next_client: Arc<AtomicU64>,
}

impl BfdHandle {
    /// A session towards `peer` (shared with other clients of the same
    /// peer and mode), single-hop or multihop as `hops` says, sending from
    /// `local` or the address the kernel picks.
    pub fn add(
        &self,
        peer: IpAddr,
        local: Option<IpAddr>,
        hops: Hops,
        config: SessionConfig,
    ) -> BfdClient {
        let client = self.next_client.fetch_add(1, Ordering::Relaxed);
        let initial = BfdStatus {
            state: State::Down,
            diag: Diag::None,
            remote_diag: Diag::None,
            transitions: 0,
            local_discr: 0,
            remote_discr: 0,
            tx_interval: None,
            detection_time: None,
            config,
            remote_admin_down: false,
            multihop: hops.is_multihop(),
        };
        let (tx, rx) = watch::channel(initial);
        self.commands.send(Command::Add {
            client,
            peer: peer.to_canonical(),
            local,
            hops,
            config,
            status: tx,
        });
        BfdClient {
            status: rx,
            client,
            commands: self.commands.clone(),
            _detached: None,
        }
    }
}

/// One client's interest in a session.
pub struct BfdClient {
    pub status: watch::Receiver<BfdStatus>,
    client: u64,
    commands: QueueSender<Command>,
    _detached: Option<watch::Sender<BfdStatus>>,
}

impl BfdClient {
    /// A client of no runtime: its session is Down for good.
    pub fn detached(config: SessionConfig) -> BfdClient {
        let (tx, rx) = watch::channel(BfdStatus {
            state: State::Down,
            diag: Diag::None,
            remote_diag: Diag::None,
            transitions: 0,
            local_discr: 0,
            remote_discr: 0,
            tx_interval: None,
            detection_time: None,
            config,
            remote_admin_down: false,
            multihop: false,
        });
        let commands = QueueSender::detached();
        BfdClient {
            status: rx,
            client: 0,
            commands,
            // Kept so that waiting tasks do not see a closed channel.
            _detached: Some(tx),
        }
    }

    pub fn state(&self) -> State {
        self.status.borrow().state
    }

    /// Change the session's timers in place (a Poll sequence; the session
    /// stays Up, so the BGP session it guards is not touched).
    pub fn set_config(&self, config: SessionConfig) {
        self.commands.send(Command::SetConfig {
            client: self.client,
            config,
        });
    }

    /// A receiver of the session's status for another task.
    pub fn subscribe(&self) -> watch::Receiver<BfdStatus> {
        self.status.clone()
    }
}

impl Drop for BfdClient {
    fn drop(&mut self) {
        self.commands.send(Command::Remove {
            client: self.client,
        });
    }
}
