//! The task that owns one neighbor: it dials (unless passive) and takes the
//! connections the listener hands it while the neighbor's state machine is
//! in Connect or Active; each connection runs the OPEN exchange with its
//! own copy of the machine (collisions are detected there, `collision.rs`),
//! and the first one that is ready runs the Established session
//! (`established.rs`) while the others are closed with a Cease.
use super::collision::Collisions;
use super::counters::PeerCounters;
use super::established::{self, Ended, SessionIo};
use super::events::{PeerCommand, PeerEvent, PeerId};
use super::fsm::{LocalParams, State};
use super::handshake::{Connection, Opened, SessionError, close_gently, handshake};
use super::machine::{Action, Event, Fsm, Timer};
use crate::bfd::BfdStatus;
use crate::config::Neighbor;
use crate::control::PeerMetrics;
use crate::net::{TtlPolicy, dial};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info};

/// The instance's handle on a peer task.
pub struct PeerLink {
    pub commands: mpsc::Sender<PeerCommand>,
    pub incoming: mpsc::Sender<TcpStream>,
    pub counters: Arc<PeerCounters>,
    pub task: tokio::task::JoinHandle<()>,
}

pub struct PeerTask {
    id: PeerId,
    neighbor: Arc<Neighbor>,
    fsm: Fsm,
    connect_retry: Duration,
    events: mpsc::Sender<PeerEvent>,
    commands: mpsc::Receiver<PeerCommand>,
    incoming: mpsc::Receiver<TcpStream>,
    counters: Arc<PeerCounters>,
    session: u64,
    bfd: Option<watch::Receiver<BfdStatus>>,
}

pub fn spawn_peer(
    id: PeerId,
    neighbor: Arc<Neighbor>,
    local: LocalParams,
    connect_retry: Duration,
    events: mpsc::Sender<PeerEvent>,
    metrics: PeerMetrics,
    bfd: Option<watch::Receiver<BfdStatus>>,
) -> PeerLink {
    let (cmd_tx, cmd_rx) = mpsc::channel(16);
    let (in_tx, in_rx) = mpsc::channel(4);
    let counters = Arc::new(PeerCounters::new(metrics));
    if neighbor.passive {
        // bgpd never dials it: listening is the attempt.
        counters.mark_attempted();
    }
    let task = PeerTask {
        id,
        fsm: Fsm::new(local, neighbor.passive, connect_retry),
        neighbor,
        connect_retry,
        events,
        commands: cmd_rx,
        incoming: in_rx,
        counters: counters.clone(),
        session: 0,
        bfd,
    };
    PeerLink {
        commands: cmd_tx,
        incoming: in_tx,
        counters,
        task: tokio::spawn(task.run()),
    }
}

type Attempt = Pin<Box<dyn Future<Output = (bool, Result<Opened, SessionError>)> + Send>>;

impl PeerTask {
    async fn run(mut self) {
        let mut replacement: Option<TcpStream> = None;
        let mut start = Vec::new();
        loop {
            let opened = match replacement.take() {
                Some(stream) => match self.accept_now(stream).await {
                    Some(o) => Some(o),
                    None => continue,
                },
                None => {
                    if !self.wait_for_bfd().await {
                        break;
                    }
                    if self.fsm.state() == State::Idle {
                        start = self.fsm.handle(Event::ManualStart);
                    }
                    self.establish(std::mem::take(&mut start)).await
                }
            };
            let Some(opened) = opened else { break };
            self.session += 1;
            let io = SessionIo {
                id: self.id,
                session: self.session,
                address: self.neighbor.address,
                events: &self.events,
                commands: &mut self.commands,
                incoming: &mut self.incoming,
                counters: &self.counters,
                bfd: self.bfd.as_mut(),
            };
            let (fsm, ended) = established::run(io, opened).await;
            self.fsm = fsm;
            match ended {
                Ended::Stopped => break,
                Ended::Replaced(s) => replacement = Some(s),
                Ended::Retry => {
                    self.counters.set_state(State::Idle);
                    // Idle until the retry time passes, but a connection
                    // from the peer or a stop ends the wait early.
                    tokio::select! {
                        _ = tokio::time::sleep(self.connect_retry) => {
                            start = self.fsm.handle(Event::ConnectRetryTimerExpires);
                        }
                        s = self.incoming.recv() => replacement = s,
                        c = self.commands.recv() => match c {
                            None => break,
                            Some(PeerCommand::Stop(n)) => {
                                self.fsm.handle(Event::ManualStop(n));
                                break;
                            }
                            Some(PeerCommand::RestartDone) => {
                                self.fsm.handle(Event::RestartDone);
                            }
                            Some(_) => {}
                        },
                    }
                }
            }
        }
        self.counters.set_state(State::Idle);
        debug!(peer = %self.neighbor.address, "peer task ended");
    }

    /// RFC 5882 3.2 (Tartan's choice): with BFD configured, the session is
    /// neither dialled nor accepted until BFD is Up, unless the remote has
    /// BFD administratively down (no failure, so no gate). Connections from the
    /// peer meanwhile are closed, gently: a reset lost on a lossy path
    /// would leave the peer waiting in OpenSent on a connection that is
    /// gone. False: the task is to stop.
    async fn wait_for_bfd(&mut self) -> bool {
        let Some(rx) = self.bfd.as_mut() else {
            return true;
        };
        // Up, or the remote took BFD down administratively: no failure
        // (RFC 5882 section 3.2), BGP may run on its own hold timer.
        if rx.borrow().allows_session() {
            return true;
        }
        info!(peer = %self.neighbor.address, "waiting for BFD to come up before opening the session");
        self.counters.set_error("waiting for BFD".into());
        loop {
            tokio::select! {
                () = established::bfd_up(Some(&mut *rx)) => return true,
                s = self.incoming.recv() => match s {
                    Some(stream) => close_gently(stream),
                    None => return false,
                },
                c = self.commands.recv() => match c {
                    None => return false,
                    Some(PeerCommand::Stop(n)) => {
                        self.fsm.handle(Event::ManualStop(n));
                        return false;
                    }
                    Some(PeerCommand::RestartDone) => {
                        self.fsm.handle(Event::RestartDone);
                    }
                    Some(_) => {}
                },
            }
        }
    }

    async fn accept_now(&mut self, stream: TcpStream) -> Option<Opened> {
        let conn = Connection::new(stream).ok()?;
        let seat = Collisions::default().join(true);
        let r = handshake(conn, self.fsm.connection(), &self.counters, seat).await;
        self.counters.mark_attempted();
        match r {
            Ok(o) => Some(o),
            Err(e) => {
                self.note_error(&e);
                None
            }
        }
    }

    fn note_error(&self, e: &SessionError) {
        info!(peer = %self.neighbor.address, error = %e, "session attempt failed");
        self.counters.set_error(e.to_string());
    }

    fn dial_attempt(&self, board: Collisions) -> Attempt {
        let n = self.neighbor.clone();
        let fsm = self.fsm.connection();
        let counters = self.counters.clone();
        let timeout = self.connect_retry.max(Duration::from_secs(5));
        Box::pin(async move {
            let peer = SocketAddr::new(n.address, n.port);
            let ttl = TtlPolicy::new(n.multihop, n.ttl_security);
            let stream =
                match dial(peer, n.local_address, n.password.as_deref(), ttl, timeout).await {
                    Ok(s) => s,
                    Err(e) => return (false, Err(SessionError::Write(e))),
                };
            let conn = match Connection::new(stream) {
                Ok(c) => c,
                Err(e) => return (false, Err(SessionError::Write(e))),
            };
            (
                false,
                handshake(conn, fsm, &counters, board.join(false)).await,
            )
        })
    }

    fn incoming_attempt(&self, stream: TcpStream, board: Collisions) -> Attempt {
        let n = self.neighbor.clone();
        let fsm = self.fsm.connection();
        let counters = self.counters.clone();
        Box::pin(async move {
            // The listener is shared: the per-peer TTL rules go on the
            // accepted socket (RFC 5082 checks every later segment).
            let ttl = TtlPolicy::new(n.multihop, n.ttl_security);
            if let Err(e) = ttl.apply(stream.as_fd()) {
                return (true, Err(SessionError::Write(e)));
            }
            let conn = match Connection::new(stream) {
                Ok(c) => c,
                Err(e) => return (true, Err(SessionError::Write(e))),
            };
            (
                true,
                handshake(conn, fsm, &counters, board.join(true)).await,
            )
        })
    }

    /// Connect/Active (with OpenSent/OpenConfirm on each connection) until
    /// one connection is ready. `pending`: the machine's actions on
    /// entering Connect or Active.
    async fn establish(&mut self, mut pending: Vec<Action>) -> Option<Opened> {
        let mut attempts: FuturesUnordered<Attempt> = FuturesUnordered::new();
        let board = Collisions::default();
        let mut dialing = false;
        let mut next_dial: Option<tokio::time::Instant> = None;
        self.counters.set_state(self.fsm.state());
        loop {
            for a in pending.drain(..) {
                match a {
                    Action::Dial if !dialing => {
                        attempts.push(self.dial_attempt(board.clone()));
                        dialing = true;
                    }
                    Action::SetTimer(Timer::ConnectRetry, d) => {
                        next_dial = Some(tokio::time::Instant::now() + d);
                    }
                    Action::StopTimer(Timer::ConnectRetry) => next_dial = None,
                    _ => {}
                }
            }
            tokio::select! {
                _ = sleep_until_opt(next_dial), if !dialing => {
                    next_dial = None;
                    pending = self.fsm.handle(Event::ConnectRetryTimerExpires);
                }
                s = self.incoming.recv() => match s {
                    Some(stream) => attempts.push(self.incoming_attempt(stream, board.clone())),
                    None => return None,
                },
                Some((incoming, result)) = attempts.next(), if !attempts.is_empty() => {
                    self.counters.mark_attempted();
                    if !incoming {
                        dialing = false;
                    }
                    match result {
                        Ok(opened) => {
                            close_the_others(&board, attempts);
                            return Some(opened);
                        }
                        Err(e) => {
                            self.note_error(&e);
                            if !incoming {
                                pending = self.fsm.handle(Event::TcpConnectionFails(e.to_string()));
                            }
                            if attempts.is_empty() {
                                self.counters.set_state(self.fsm.state());
                            }
                        }
                    }
                }
                c = self.commands.recv() => match c {
                    None => return None,
                    Some(PeerCommand::Stop(n)) => {
                        self.fsm.handle(Event::ManualStop(n));
                        return None;
                    }
                    Some(PeerCommand::RestartDone) => {
                        self.fsm.handle(Event::RestartDone);
                    }
                    Some(_) => {}
                },
            }
        }
    }
}

/// RFC 4271 6.8: with one connection Established, the others are closed
/// with a Cease; they finish that on their own.
fn close_the_others(board: &Collisions, attempts: FuturesUnordered<Attempt>) {
    board.settle();
    if !attempts.is_empty() {
        tokio::spawn(attempts.for_each(|_| async {}));
    }
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
