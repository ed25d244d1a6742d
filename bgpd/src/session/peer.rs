//! The task that owns one neighbor: it dials (unless passive) and takes the
//! connections the listener hands it; each connection runs the OPEN
//! exchange with its own copy of the machine (collisions are detected
//! there, `collision.rs`), and the first one that is ready runs the
//! Established session (`established.rs`, which takes the connections that
//! come meanwhile) while the others are closed with a Cease. Dialling,
//! the peer's other connections and the operator's commands go on while
//! any one connection waits for the peer's OPEN.
use super::attempt::{self, Attempt, Attempts, ttl_policy};
use super::collision::Collisions;
use super::counters::PeerCounters;
use super::established::{self, Ended, SessionIo};
use super::events::{PeerCommand, PeerEvent, PeerId};
use super::fsm::{LocalParams, State};
use super::handshake::{Opened, SessionError};
use super::machine::{Action, Event, Fsm, Timer};
use crate::bfd::BfdStatus;
use crate::config::Neighbor;
use crate::control::PeerMetrics;
use crate::wire::Notification;
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

impl PeerTask {
    async fn run(mut self) {
        // The peer's connections whose OPEN exchange is under way when a
        // session ends: they go on at once, and dialling waits for the
        // retry time.
        let mut carried: Option<Attempts> = None;
        let mut start = Vec::new();
        loop {
            if !self.wait_for_bfd(&mut carried).await {
                break;
            }
            if self.fsm.state() == State::Idle && carried.is_none() {
                start = self.fsm.handle(Event::ManualStart);
            }
            let opened = self.establish(std::mem::take(&mut start), carried.take());
            let Some(opened) = opened.await else { break };
            self.session += 1;
            let io = SessionIo {
                id: self.id,
                session: self.session,
                address: self.neighbor.address,
                ttl: ttl_policy(&self.neighbor),
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
                Ended::Retry(Some(attempts)) => {
                    carried = Some(attempts);
                    start = vec![Action::SetTimer(Timer::ConnectRetry, self.connect_retry)];
                }
                Ended::Retry(None) => match self.idle().await {
                    Some((actions, attempts)) => (start, carried) = (actions, attempts),
                    None => break,
                },
            }
        }
        self.counters.set_state(State::Idle);
        debug!(peer = %self.neighbor.address, "peer task ended");
    }

    /// Idle after a session, until the retry time passes (the machine's
    /// actions then), or a connection from the peer comes (its attempt,
    /// and the retry time left). None: the task is to stop.
    async fn idle(&mut self) -> Option<(Vec<Action>, Option<Attempts>)> {
        self.counters.set_state(State::Idle);
        let retry_at = tokio::time::Instant::now() + self.connect_retry;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(retry_at) => {
                    return Some((self.fsm.handle(Event::ConnectRetryTimerExpires), None));
                }
                s = self.incoming.recv() => {
                    let mut a = Attempts::default();
                    a.push(self.incoming_attempt(s?, &a.board));
                    let left = retry_at.saturating_duration_since(tokio::time::Instant::now());
                    return Some((vec![Action::SetTimer(Timer::ConnectRetry, left)], Some(a)));
                }
                c = self.commands.recv() => {
                    if let PeerCommand::Stop(n) = c? {
                        self.fsm.handle(Event::ManualStop(n));
                        return None;
                    }
                }
            }
        }
    }

    /// RFC 5882 3.2 (Tartan's choice): with BFD configured, the session is
    /// neither dialled nor accepted until BFD is Up, unless the remote has
    /// BFD administratively down (no failure, so no gate). Connections from the
    /// peer meanwhile are closed, gently, also those `carried` from the
    /// last session: a reset lost on a lossy path would leave the peer
    /// waiting in OpenSent on a connection that is gone. False: the task
    /// is to stop.
    async fn wait_for_bfd(&mut self, carried: &mut Option<Attempts>) -> bool {
        let Some(rx) = self.bfd.as_mut() else {
            return true;
        };
        // Up, or the remote took BFD down administratively: no failure
        // (RFC 5882 section 3.2), BGP may run on its own hold timer.
        if rx.borrow().allows_session() {
            return true;
        }
        *carried = None;
        info!(peer = %self.neighbor.address, "waiting for BFD to come up before opening the session");
        self.counters.set_error("waiting for BFD".into());
        loop {
            tokio::select! {
                () = established::bfd_up(Some(&mut *rx)) => return true,
                s = self.incoming.recv() => match s {
                    Some(stream) => attempt::turn_away(stream, ttl_policy(&self.neighbor)),
                    None => return false,
                },
                c = self.commands.recv() => match c {
                    None => return false,
                    Some(PeerCommand::Stop(n)) => {
                        self.fsm.handle(Event::ManualStop(n));
                        return false;
                    }
                    Some(_) => {}
                },
            }
        }
    }

    fn note_error(&self, e: &SessionError) {
        info!(peer = %self.neighbor.address, error = %e, "session attempt failed");
        self.counters.set_error(e.to_string());
    }

    fn dial_attempt(&self, board: &Collisions) -> Attempt {
        let timeout = self.connect_retry.max(Duration::from_secs(5));
        let (fsm, counters) = (self.fsm.connection(), self.counters.clone());
        attempt::dialled(self.neighbor.clone(), fsm, counters, timeout, board)
    }

    fn incoming_attempt(&self, stream: TcpStream, board: &Collisions) -> Attempt {
        let (fsm, counters) = (self.fsm.connection(), self.counters.clone());
        attempt::incoming(stream, ttl_policy(&self.neighbor), fsm, counters, board)
    }

    /// ManualStop with `n`: connections in their OPEN exchange get the
    /// Cease (RFC 4271 8.2.2).
    fn stop_attempts(&mut self, attempts: Attempts, n: Notification) {
        self.fsm.handle(Event::ManualStop(n.clone()));
        attempts.stop(n, &self.counters);
    }

    /// Connect/Active (with OpenSent/OpenConfirm on each connection) until
    /// one connection is ready. `pending`: the machine's actions on
    /// entering Connect or Active; `carried`: connections from the peer
    /// already under way.
    async fn establish(
        &mut self,
        mut pending: Vec<Action>,
        carried: Option<Attempts>,
    ) -> Option<Opened> {
        let mut attempts = carried.unwrap_or_default();
        attempts.board.bring_forward();
        let mut dialing = false;
        let mut next_dial: Option<tokio::time::Instant> = None;
        self.counters.set_state(self.fsm.state());
        loop {
            for a in pending.drain(..) {
                match a {
                    Action::Dial if !dialing => {
                        attempts.push(self.dial_attempt(&attempts.board));
                        dialing = true;
                    }
                    Action::SetTimer(Timer::ConnectRetry, d) => {
                        next_dial = Some(tokio::time::Instant::now() + d);
                    }
                    Action::StopTimer(Timer::ConnectRetry) => next_dial = None,
                    _ => {}
                }
            }
            // Biased, commands first: a neighbor removed by a reload has
            // its Stop queued as the channel of connections from the peer
            // closes, and the Stop must win (its Cease goes out).
            tokio::select! {
                biased;
                c = self.commands.recv() => match c {
                    None => return None,
                    Some(PeerCommand::Stop(n)) => {
                        self.stop_attempts(attempts, n);
                        return None;
                    }
                    Some(_) => {}
                },
                _ = sleep_until_opt(next_dial), if !dialing => {
                    next_dial = None;
                    pending = self.fsm.handle(Event::ConnectRetryTimerExpires);
                }
                s = self.incoming.recv() => match s {
                    Some(stream) => {
                        let a = self.incoming_attempt(stream, &attempts.board);
                        attempts.push(a);
                    }
                    None => {
                        // The instance dropped the neighbor: a Stop it
                        // queued first still sends its Cease.
                        if let Some(n) = pending_stop(&mut self.commands) {
                            self.stop_attempts(attempts, n);
                        }
                        return None;
                    }
                },
                (incoming, result) = attempts.next() => {
                    self.counters.mark_attempted();
                    if !incoming {
                        dialing = false;
                    }
                    match result {
                        Ok(opened) => {
                            attempts.close_the_others();
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
            }
        }
    }
}

/// A Stop the instance queued before dropping the neighbor's channels,
/// if there is one: what it sends. Other commands queued with it no longer
/// matter.
pub(super) fn pending_stop(commands: &mut mpsc::Receiver<PeerCommand>) -> Option<Notification> {
    while let Ok(c) = commands.try_recv() {
        if let PeerCommand::Stop(n) = c {
            return Some(n);
        }
    }
    None
}

async fn sleep_until_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
