//! The task that owns one neighbor: it dials (unless passive), takes the
//! connections the listener hands it, resolves collisions, and while
//! Established reads, writes and keeps the timers.
use super::framed::ReadError;
use super::fsm::{LocalParams, Negotiated, State, keep_incoming};
use super::handshake::{Connection, Opened, SessionError, handshake};
use crate::config::Neighbor;
use crate::control::{MessageType, PeerMetrics};
use crate::model::Family;
use crate::net::{TtlPolicy, dial};
use crate::wire::{self, DecodeOptions, Message, Notification};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tartan_api::bgp::MessageCounts;
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc, oneshot};
use tracing::{debug, info, warn};

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
    /// Our graceful restart is over: later OPENs clear the R bit (RFC 4724 3).
    RestartDone,
}

/// Per-neighbor state shared between the task and the status readers.
/// Message counts live in the peer's Prometheus series, so they are
/// counted once and read by both the metrics endpoint and the control API.
#[derive(Debug)]
pub struct PeerCounters {
    state: AtomicU8,
    metrics: PeerMetrics,
    last_error: Mutex<Option<String>>,
    established_at: Mutex<Option<Instant>>,
    negotiated: Mutex<Option<Negotiated>>,
}

impl PeerCounters {
    pub fn new(metrics: PeerMetrics) -> Self {
        PeerCounters {
            state: AtomicU8::new(State::Idle as u8),
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
    fn set_established(&self, n: Option<&Negotiated>) {
        *self
            .established_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = n.map(|_| Instant::now());
        *self.negotiated.lock().unwrap_or_else(|p| p.into_inner()) = n.cloned();
    }
}

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
    local: LocalParams,
    connect_retry: Duration,
    events: mpsc::Sender<PeerEvent>,
    commands: mpsc::Receiver<PeerCommand>,
    incoming: mpsc::Receiver<TcpStream>,
    counters: Arc<PeerCounters>,
    session: u64,
}

pub fn spawn_peer(
    id: PeerId,
    neighbor: Arc<Neighbor>,
    local: LocalParams,
    connect_retry: Duration,
    events: mpsc::Sender<PeerEvent>,
    metrics: PeerMetrics,
) -> PeerLink {
    let (cmd_tx, cmd_rx) = mpsc::channel(16);
    let (in_tx, in_rx) = mpsc::channel(4);
    let counters = Arc::new(PeerCounters::new(metrics));
    let task = PeerTask {
        id,
        neighbor,
        local,
        connect_retry,
        events,
        commands: cmd_rx,
        incoming: in_rx,
        counters: counters.clone(),
        session: 0,
    };
    PeerLink {
        commands: cmd_tx,
        incoming: in_tx,
        counters,
        task: tokio::spawn(task.run()),
    }
}

type Attempt = Pin<Box<dyn Future<Output = (bool, Result<Opened, SessionError>)> + Send>>;

enum Ended {
    /// Go back to Idle and try again after the retry time.
    Retry,
    /// A new connection from the peer replaced the session (the peer restarted).
    Replaced(TcpStream),
    Stopped,
}

impl PeerTask {
    async fn run(mut self) {
        let mut replacement: Option<TcpStream> = None;
        loop {
            let opened = match replacement.take() {
                Some(stream) => match self.accept_now(stream).await {
                    Some(o) => Some(o),
                    None => continue,
                },
                None => self.establish().await,
            };
            let Some(opened) = opened else { break };
            match self.established(opened).await {
                Ended::Stopped => break,
                Ended::Replaced(s) => replacement = Some(s),
                Ended::Retry => {
                    self.counters.set_state(State::Idle);
                    // Idle until the retry time passes, but a connection
                    // from the peer or a stop ends the wait early.
                    tokio::select! {
                        _ = tokio::time::sleep(self.connect_retry) => {}
                        s = self.incoming.recv() => replacement = s,
                        c = self.commands.recv() => match c {
                            None | Some(PeerCommand::Stop(_)) => break,
                            Some(PeerCommand::RestartDone) => self.local.restarting = false,
                            Some(_) => {}
                        },
                    }
                }
            }
        }
        self.counters.set_state(State::Idle);
        debug!(peer = %self.neighbor.address, "peer task ended");
    }

    async fn accept_now(&mut self, stream: TcpStream) -> Option<Opened> {
        let conn = Connection::new(stream).ok()?;
        match handshake(conn, &self.local, &self.counters).await {
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

    fn dial_attempt(&self, tcp_up: Arc<AtomicBool>) -> Attempt {
        let n = self.neighbor.clone();
        let local = self.local.clone();
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
            tcp_up.store(true, Ordering::Relaxed);
            let conn = match Connection::new(stream) {
                Ok(c) => c,
                Err(e) => return (false, Err(SessionError::Write(e))),
            };
            (false, handshake(conn, &local, &counters).await)
        })
    }

    fn incoming_attempt(&self, stream: TcpStream) -> Attempt {
        let n = self.neighbor.clone();
        let local = self.local.clone();
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
            (true, handshake(conn, &local, &counters).await)
        })
    }

    /// Connect/Active/OpenSent/OpenConfirm until one connection is ready.
    async fn establish(&mut self) -> Option<Opened> {
        let passive = self.neighbor.passive;
        let mut attempts: FuturesUnordered<Attempt> = FuturesUnordered::new();
        // Attempts whose TCP connection is up, by direction; a collision
        // only exists between connections that both reached OpenSent.
        let mut dial_tcp_up = Arc::new(AtomicBool::new(false));
        let mut dialing = false;
        let mut incoming_count = 0usize;
        let mut next_dial = tokio::time::Instant::now();
        self.counters.set_state(if passive {
            State::Active
        } else {
            State::Connect
        });
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next_dial), if !passive && !dialing => {
                    dial_tcp_up = Arc::new(AtomicBool::new(false));
                    attempts.push(self.dial_attempt(dial_tcp_up.clone()));
                    dialing = true;
                }
                s = self.incoming.recv() => match s {
                    Some(stream) => {
                        incoming_count += 1;
                        attempts.push(self.incoming_attempt(stream));
                    }
                    None => return None,
                },
                Some((incoming, result)) = attempts.next(), if !attempts.is_empty() => {
                    if incoming {
                        incoming_count -= 1;
                    } else {
                        dialing = false;
                        next_dial = tokio::time::Instant::now() + self.connect_retry;
                    }
                    let mut opened = match result {
                        Ok(o) => o,
                        Err(e) => {
                            self.note_error(&e);
                            if attempts.is_empty() {
                                self.counters.set_state(if passive { State::Active } else { State::Connect });
                            }
                            continue;
                        }
                    };
                    let other_up = if incoming { dialing && dial_tcp_up.load(Ordering::Relaxed) } else { incoming_count > 0 };
                    if !other_up {
                        return Some(opened);
                    }
                    // Collision (RFC 4271 6.8).
                    let keep_in = keep_incoming(self.local.router_id, opened.negotiated.peer_router_id);
                    if keep_in == incoming {
                        info!(peer = %self.neighbor.address, kept = if incoming { "incoming" } else { "outgoing" }, "connection collision resolved");
                        return Some(opened);
                    }
                    let e = opened.conn.notify_and_close(Notification::connection_collision(), &self.counters).await;
                    debug!(peer = %self.neighbor.address, "collision: closed one connection: {e}");
                }
                c = self.commands.recv() => match c {
                    None | Some(PeerCommand::Stop(_)) => return None,
                    Some(PeerCommand::RestartDone) => self.local.restarting = false,
                    Some(_) => {}
                },
            }
        }
    }

    async fn established(&mut self, opened: Opened) -> Ended {
        let Opened {
            mut conn,
            negotiated,
            open,
        } = opened;
        self.session += 1;
        let session = self.session;
        let id = self.id;
        let output = Arc::new(Notify::new());
        self.counters.set_state(State::Established);
        self.counters.set_established(Some(&negotiated));
        info!(
            peer = %self.neighbor.address, asn = open.asn, router_id = %open.router_id,
            hold = negotiated.hold_time.as_secs(), families = ?negotiated.families,
            "session established"
        );
        let gr = negotiated.peer_graceful_restart.is_some();
        let up = PeerEvent::Up {
            id,
            session,
            negotiated: negotiated.clone(),
            local: conn.local,
            remote: conn.remote,
            output: output.clone(),
        };
        if self.events.send(up).await.is_err() {
            return Ended::Stopped;
        }
        let (raw_tx, raw_rx) = mpsc::channel::<Vec<u8>>(4);
        let mut stop = false;
        let ended: Result<Ended, SessionError> = {
            let Connection { reader, writer, .. } = &mut conn;
            let rfut = read_loop(
                reader,
                id,
                session,
                &negotiated,
                &self.events,
                &self.counters,
            );
            let wfut = write_loop(
                writer,
                id,
                session,
                &negotiated,
                &self.events,
                &output,
                raw_rx,
                &self.counters,
            );
            tokio::pin!(rfut);
            tokio::pin!(wfut);
            loop {
                tokio::select! {
                    e = &mut rfut => break Err(e),
                    e = &mut wfut => break Err(e),
                    c = self.commands.recv() => match c {
                        None => break Ok(Ended::Stopped),
                        Some(PeerCommand::Stop(n)) => {
                            stop = true;
                            break Err(SessionError::SentNotification(n));
                        }
                        Some(PeerCommand::Reset(n)) => break Err(SessionError::SentNotification(n)),
                        Some(PeerCommand::RestartDone) => self.local.restarting = false,
                        Some(PeerCommand::RouteRefresh(f)) => {
                            let mut b = Vec::new();
                            wire::encode_route_refresh(f, &mut b);
                            let _ = raw_tx.send(b).await;
                        }
                    },
                    s = self.incoming.recv() => match s {
                        Some(stream) if gr => break Ok(Ended::Replaced(stream)),
                        Some(stream) => {
                            // RFC 4271 6.8: a new connection while Established is closed.
                            reject(stream, &self.counters).await;
                        }
                        None => break Ok(Ended::Stopped),
                    },
                }
            }
        };
        self.counters.set_established(None);
        let (graceful, reason, ended) = match ended {
            Ok(Ended::Replaced(s)) => (
                true,
                "peer opened a new connection (restart)".to_string(),
                Ended::Replaced(s),
            ),
            Ok(other) => {
                let n = Notification::administrative_shutdown();
                let e = conn.notify_and_close(n, &self.counters).await;
                (false, e.to_string(), other)
            }
            Err(SessionError::SentNotification(n)) => {
                let e = conn.notify_and_close(n, &self.counters).await;
                (
                    false,
                    e.to_string(),
                    if stop { Ended::Stopped } else { Ended::Retry },
                )
            }
            Err(e) => {
                let graceful = gr && e.is_transport_failure();
                (graceful, e.to_string(), Ended::Retry)
            }
        };
        warn!(peer = %self.neighbor.address, %reason, graceful, "session down");
        self.counters.set_error(reason.clone());
        let _ = self
            .events
            .send(PeerEvent::Down {
                id,
                session,
                graceful,
                reason,
            })
            .await;
        ended
    }
}

async fn reject(stream: TcpStream, counters: &PeerCounters) {
    if let Ok(mut c) = Connection::new(stream) {
        let _ = c
            .notify_and_close(Notification::connection_collision(), counters)
            .await;
    }
}

/// Reads until the session must end; returns why.
async fn read_loop(
    reader: &mut super::framed::FramedReader<tokio::net::tcp::OwnedReadHalf>,
    id: PeerId,
    session: u64,
    negotiated: &Negotiated,
    events: &mpsc::Sender<PeerEvent>,
    counters: &PeerCounters,
) -> SessionError {
    let opts = DecodeOptions {
        four_octet_as: negotiated.four_octet_as,
    };
    let hold = negotiated.hold_time;
    loop {
        let next = if hold.is_zero() {
            reader.next().await
        } else {
            match tokio::time::timeout(hold, reader.next()).await {
                Ok(r) => r,
                Err(_) => return SessionError::SentNotification(Notification::hold_timer_expired()),
            }
        };
        let bytes = match next {
            Ok(b) => b,
            Err(ReadError::Framing(n)) => return SessionError::SentNotification(n),
            Err(e) => return e.into(),
        };
        counters.received(bytes[18]);
        let msg = match wire::decode(bytes, &opts) {
            Ok(m) => m,
            Err(n) => return SessionError::SentNotification(n),
        };
        let event = match msg {
            Message::Keepalive => continue,
            Message::Update(update) => PeerEvent::Update {
                id,
                session,
                update,
            },
            Message::RouteRefresh {
                family: Some(family),
                ..
            } if negotiated.families.contains(&family) => PeerEvent::RouteRefresh {
                id,
                session,
                family,
            },
            // RFC 2918 5: ignore a refresh for a family not negotiated.
            Message::RouteRefresh { .. } => continue,
            Message::Notification(n) => return SessionError::PeerNotification(n),
            // RFC 6608: OPEN while Established.
            Message::Open(_) => {
                return SessionError::SentNotification(Notification::unexpected_in_established());
            }
        };
        if events.send(event).await.is_err() {
            return SessionError::SentNotification(Notification::administrative_shutdown());
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn write_loop(
    writer: &mut tokio::net::tcp::OwnedWriteHalf,
    id: PeerId,
    session: u64,
    negotiated: &Negotiated,
    events: &mpsc::Sender<PeerEvent>,
    output: &Notify,
    mut raw: mpsc::Receiver<Vec<u8>>,
    counters: &PeerCounters,
) -> SessionError {
    use tokio::io::AsyncWriteExt;
    let keepalive = negotiated.keepalive;
    let mut ticker = tokio::time::interval(if keepalive.is_zero() {
        Duration::from_secs(3600 * 24 * 365)
    } else {
        keepalive
    });
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ka = Vec::new();
    wire::encode_keepalive(&mut ka);
    // The initial table goes out without waiting for a notification.
    let mut pending_pull = true;
    loop {
        if pending_pull {
            pending_pull = false;
            loop {
                let (tx, rx) = oneshot::channel();
                if events
                    .send(PeerEvent::Pull {
                        id,
                        session,
                        reply: tx,
                    })
                    .await
                    .is_err()
                {
                    return SessionError::SentNotification(Notification::administrative_shutdown());
                }
                match rx.await {
                    Ok(Some(bytes)) => {
                        if let Err(e) = writer.write_all(&bytes).await {
                            return SessionError::Write(e);
                        }
                        // Anything sent restarts the peer's hold timer.
                        ticker.reset();
                    }
                    _ => break,
                }
            }
        }
        tokio::select! {
            _ = ticker.tick() => {
                if keepalive.is_zero() { continue; }
                if let Err(e) = writer.write_all(&ka).await {
                    return SessionError::Write(e);
                }
                counters.sent(wire::msg_type::KEEPALIVE);
            }
            _ = output.notified() => pending_pull = true,
            b = raw.recv() => if let Some(b) = b {
                if let Err(e) = writer.write_all(&b).await {
                    return SessionError::Write(e);
                }
                counters.sent(b.get(18).copied().unwrap_or(0));
            },
        }
    }
}
