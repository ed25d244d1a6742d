//! The Established session on one connection, as a shell around the state
//! machine: the reader turns messages and the hold timer into events, the
//! writer sends the instance's UPDATEs and the keepalives, and the loop
//! turns commands and new connections into events. What the machine
//! answers becomes writes, events for the instance and the end of the
//! session. A new connection from a peer with graceful restart runs its
//! OPEN exchange here too, behind the session, until its OPEN is accepted
//! (the session then ends, and the task carries the connection on) or it
//! fails (the session goes on).
use super::attempt::{self, Attempts};
use super::collision::Collisions;
use super::counters::PeerCounters;
use super::events::{PeerCommand, PeerEvent, PeerId};
use super::framed::{FramedReader, ReadError};
use super::fsm::State;
use super::handshake::{Connection, Opened, SessionError};
use super::machine::{Action, Cause, Event, Fsm, Outgoing, Then, Timer};
use crate::bfd::{BfdStatus, State as BfdState};
use crate::net::TtlPolicy;
use crate::wire::{self, DecodeOptions, Notification};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tracing::{info, warn};

/// New connections from a restarting peer that may run their OPEN exchange
/// beside the session at once; each that stays silent holds its place for
/// the open wait (240 s), so without a bound a peer's address could pile
/// them up. Past it, a new connection is refused as without graceful
/// restart (Cease 6/7).
pub const MAX_NEW_CONNECTIONS: usize = 8;

/// How a session ended, for the neighbor's task.
pub enum Ended {
    /// Go back to Idle and try again after the retry time; with the peer's
    /// new connections still in their OPEN exchange (one of them may have
    /// ended the session), which go on at once.
    Retry(Option<Attempts>),
    Stopped,
}

/// What the neighbor's task lends the session.
pub struct SessionIo<'a> {
    pub id: PeerId,
    pub session: u64,
    pub address: IpAddr,
    /// For the peer's new connections.
    pub ttl: TtlPolicy,
    pub events: &'a mpsc::Sender<PeerEvent>,
    pub commands: &'a mut mpsc::Receiver<PeerCommand>,
    pub incoming: &'a mut mpsc::Receiver<TcpStream>,
    pub counters: &'a Arc<PeerCounters>,
    /// The neighbor's BFD session, when BFD is configured.
    pub bfd: Option<&'a mut watch::Receiver<BfdStatus>>,
}

fn lock(fsm: &Mutex<Fsm>) -> MutexGuard<'_, Fsm> {
    fsm.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether these actions end the session.
fn ends(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::Close { .. }))
}

/// The instance is gone: end the session as a shutdown would.
fn instance_gone(fsm: &Mutex<Fsm>) -> Vec<Action> {
    lock(fsm).handle(Event::AutomaticStop(Notification::administrative_shutdown()))
}

/// Runs the session until it ends; returns the machine (now Idle, unless
/// the instance was gone from the start) and what the task does next.
pub async fn run(io: SessionIo<'_>, opened: Opened) -> (Fsm, Ended) {
    let Opened {
        mut conn,
        fsm,
        negotiated,
        pending,
    } = opened;
    let SessionIo {
        id,
        session,
        address,
        ttl,
        events,
        commands,
        incoming,
        counters,
        bfd,
    } = io;
    let output = Arc::new(Notify::new());
    counters.set_state(State::Established);
    counters.set_established(Some(&negotiated));
    info!(
        peer = %address, asn = negotiated.peer_asn, router_id = %negotiated.peer_router_id,
        hold = negotiated.hold_time.as_secs(), families = ?negotiated.families,
        "session established"
    );
    let up = PeerEvent::Up {
        id,
        session,
        negotiated: negotiated.clone(),
        local: conn.local,
        remote: conn.remote,
        output: output.clone(),
    };
    if events.send(up).await.is_err() {
        return (fsm, Ended::Stopped);
    }
    // The peer's new connections (RFC 4724 4.2), behind this session.
    let board = Collisions::behind_session();
    let mut newer = Attempts::new(board.clone());
    let mut hold = None;
    let mut keepalive = None;
    for a in pending {
        match a {
            Action::SetTimer(Timer::Hold, d) => hold = Some(d),
            Action::SetTimer(Timer::Keepalive, d) => keepalive = Some(d),
            _ => {}
        }
    }
    let local_asn = fsm.local().asn;
    let local_ip = conn.local.ip().to_canonical();
    let fsm = Mutex::new(fsm);
    // The peer's OPEN was accepted on a new connection: the actions that
    // end this session, if they do.
    let new_connection_opened = || {
        let actions = lock(&fsm).handle(Event::NewConnectionOpened);
        ends(&actions).then_some(actions)
    };
    let (raw_tx, raw_rx) = mpsc::channel::<Vec<u8>>(4);
    let end: Vec<Action> = {
        let Connection { reader, writer, .. } = &mut conn;
        let side = Side {
            id,
            session,
            fsm: &fsm,
            events,
            counters,
        };
        let opts = DecodeOptions {
            four_octet_as: negotiated.four_octet_as,
            external: negotiated.peer_asn != local_asn,
            local: Some(local_ip),
        };
        let rfut = side.read(reader, hold, opts);
        let wfut = side.write(writer, keepalive, &output, raw_rx);
        tokio::pin!(rfut);
        tokio::pin!(wfut);
        // One future for the whole session: it remembers whether BFD is on
        // its way back from a remote AdminDown.
        let bfd_failed = bfd_down(bfd);
        tokio::pin!(bfd_failed);
        loop {
            // Biased, commands first: a neighbor removed by a reload has
            // its Stop queued as the channel of connections from the peer
            // closes, and the Stop must win (its Cease goes out).
            tokio::select! {
                biased;
                c = commands.recv() => {
                    let event = match c {
                        None => Event::ManualStop(Notification::administrative_shutdown()),
                        Some(PeerCommand::Stop(n)) => Event::ManualStop(n),
                        Some(PeerCommand::Reset(n)) => Event::AutomaticStop(n),
                        Some(PeerCommand::RouteRefresh(f)) => Event::RefreshRequest(f),
                    };
                    let actions = lock(&fsm).handle(event);
                    if ends(&actions) {
                        break actions;
                    }
                    for a in actions {
                        if let Action::Send(o) = a {
                            let _ = raw_tx.send(o.encode()).await;
                        }
                    }
                }
                a = &mut rfut => break a,
                a = &mut wfut => break a,
                // RFC 5882 4.3: BFD Down ends the session at once, and
                // its routes go (AutomaticStop is never graceful).
                () = &mut bfd_failed => {
                    warn!(peer = %address, "BFD session down: closing the BGP session");
                    break lock(&fsm).handle(Event::AutomaticStop(Notification::bfd_down()));
                }
                s = incoming.recv() => match s {
                    Some(stream) => {
                        let actions = lock(&fsm).handle(Event::TcpConnectionConfirmed);
                        if actions.contains(&Action::TryNewConnection) {
                            if newer.len() >= MAX_NEW_CONNECTIONS {
                                warn!(
                                    peer = %address,
                                    "{MAX_NEW_CONNECTIONS} new connections from the peer are already in their OPEN exchange: refusing another with a Cease"
                                );
                                reject(stream, ttl, counters).await;
                            } else {
                                let fresh = lock(&fsm).fresh_connection();
                                let c = counters.clone();
                                newer.push(attempt::incoming(stream, ttl, fresh, c, &board));
                            }
                        } else if actions.contains(&Action::RejectConnection) {
                            reject(stream, ttl, counters).await;
                        }
                    }
                    None => {
                        // The instance dropped the neighbor: a Stop it
                        // queued first still says why.
                        let n = super::peer::pending_stop(commands)
                            .unwrap_or_else(Notification::administrative_shutdown);
                        break lock(&fsm).handle(Event::ManualStop(n));
                    }
                },
                () = board.opened() => {
                    info!(peer = %address, "the peer's OPEN accepted on a new connection: it restarted");
                    if let Some(end) = new_connection_opened() {
                        break end;
                    }
                }
                (from_peer, r) = newer.next() => match r {
                    // Its KEEPALIVE came right after the OPEN: it is the
                    // session once this one has ended.
                    Ok(opened) => {
                        newer.push_opened(from_peer, opened);
                        if let Some(end) = new_connection_opened() {
                            break end;
                        }
                    }
                    Err(e) => {
                        info!(peer = %address, error = %e, "the peer's new connection failed; the session goes on");
                    }
                },
            }
        }
    };
    counters.set_established(None);
    let mut graceful = false;
    let mut close = None;
    for a in end {
        match a {
            Action::Down { graceful: g } => graceful = g,
            Action::Close { cause, then } => close = Some((cause, then)),
            _ => {}
        }
    }
    let (cause, then) = close.unwrap_or((Cause::Transport("session ended".into()), Then::Retry));
    if let Cause::Sent(n) = &cause {
        conn.notify_and_close(n.clone(), counters).await;
    }
    let reason = cause.to_string();
    warn!(peer = %address, %reason, graceful, "session down");
    counters.set_error(reason.clone());
    let _ = events
        .send(PeerEvent::Down {
            id,
            session,
            graceful,
            reason,
        })
        .await;
    let ended = match then {
        Then::Stop => {
            // The peer's new connections still in their OPEN exchange get
            // the same Cease (RFC 4271 8.2.2).
            if let Cause::Sent(n) = cause {
                newer.stop(n, counters);
            }
            Ended::Stopped
        }
        Then::Retry => Ended::Retry((!newer.is_empty()).then_some(newer)),
    };
    (fsm.into_inner().unwrap_or_else(|p| p.into_inner()), ended)
}

/// Resolves once the BFD session fails: it leaves Up, or is not Up at the
/// start, for any reason but the remote's AdminDown. RFC 5882 section 3.2:
/// a remote AdminDown is no path failure, so it does not end the session;
/// nor does the way back from it (Down, Init) until BFD has been Up again.
/// Never resolves without BFD, nor once the BFD runtime is gone (the daemon
/// is stopping).
pub async fn bfd_down(bfd: Option<&mut watch::Receiver<BfdStatus>>) {
    let Some(rx) = bfd else {
        return std::future::pending().await;
    };
    // Whether leaving Up now would be a failure: not while BFD is on its
    // way back from a remote AdminDown.
    let mut armed = true;
    loop {
        {
            let s = rx.borrow_and_update();
            if s.state == BfdState::Up {
                armed = true;
            } else if s.remote_admin_down {
                armed = false;
            } else if armed {
                return;
            }
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Resolves once the BFD session lets a BGP session run
/// ([`BfdStatus::allows_session`]: Up, or the remote AdminDown); at once
/// without BFD.
pub async fn bfd_up(bfd: Option<&mut watch::Receiver<BfdStatus>>) {
    let Some(rx) = bfd else { return };
    loop {
        if rx.borrow_and_update().allows_session() {
            return;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// RFC 4271 6.8: a new connection while Established is closed.
async fn reject(stream: TcpStream, ttl: TtlPolicy, counters: &PeerCounters) {
    if let Ok(mut c) = attempt::accepted(stream, ttl) {
        let _ = c
            .notify_and_close(Notification::connection_collision(), counters)
            .await;
    }
}

/// What the reader and the writer share.
struct Side<'a> {
    id: PeerId,
    session: u64,
    fsm: &'a Mutex<Fsm>,
    events: &'a mpsc::Sender<PeerEvent>,
    counters: &'a PeerCounters,
}

impl Side<'_> {
    /// Reads until the session must end; returns the machine's actions
    /// for the end.
    async fn read(
        &self,
        reader: &mut FramedReader<OwnedReadHalf>,
        mut hold: Option<Duration>,
        opts: DecodeOptions,
    ) -> Vec<Action> {
        let (id, session) = (self.id, self.session);
        loop {
            let next = match hold {
                None => reader.next().await,
                Some(h) => match tokio::time::timeout(h, reader.next()).await {
                    Ok(r) => r,
                    Err(_) => return lock(self.fsm).handle(Event::HoldTimerExpires),
                },
            };
            let event = match next {
                Ok(bytes) => {
                    self.counters.received(bytes[18]);
                    match wire::decode(bytes, &opts) {
                        Ok(m) => Event::Message(m),
                        Err(n) => Event::BadMessage(n),
                    }
                }
                Err(ReadError::Framing(n)) => Event::BadMessage(n),
                Err(e) => Event::TcpConnectionFails(SessionError::from(e).to_string()),
            };
            let actions = lock(self.fsm).handle(event);
            if ends(&actions) {
                return actions;
            }
            for a in actions {
                let event = match a {
                    Action::SetTimer(Timer::Hold, d) => {
                        hold = Some(d);
                        continue;
                    }
                    Action::StopTimer(Timer::Hold) => {
                        hold = None;
                        continue;
                    }
                    Action::Routes(update) => PeerEvent::Update {
                        id,
                        session,
                        update: *update,
                    },
                    Action::RefreshRoutes(family) => PeerEvent::RouteRefresh {
                        id,
                        session,
                        family,
                    },
                    _ => continue,
                };
                if self.events.send(event).await.is_err() {
                    return instance_gone(self.fsm);
                }
            }
        }
    }

    /// Sends the instance's output whenever it has some, the keepalives,
    /// and the messages of `raw`, until a write fails.
    async fn write(
        &self,
        writer: &mut OwnedWriteHalf,
        keepalive: Option<Duration>,
        output: &Notify,
        mut raw: mpsc::Receiver<Vec<u8>>,
    ) -> Vec<Action> {
        let (id, session) = (self.id, self.session);
        let failed = |e: std::io::Error| {
            lock(self.fsm).handle(Event::TcpConnectionFails(
                SessionError::Write(e).to_string(),
            ))
        };
        let mut ticker = keepalive.map(|k| {
            let mut t = tokio::time::interval(k);
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            t
        });
        // The initial table goes out without waiting for a notification.
        let mut pending_pull = true;
        loop {
            if pending_pull {
                pending_pull = false;
                loop {
                    let (tx, rx) = oneshot::channel();
                    let pull = PeerEvent::Pull {
                        id,
                        session,
                        reply: tx,
                    };
                    if self.events.send(pull).await.is_err() {
                        return instance_gone(self.fsm);
                    }
                    match rx.await {
                        Ok(Some(bytes)) => {
                            if let Err(e) = writer.write_all(&bytes).await {
                                return failed(e);
                            }
                            // Anything sent restarts the peer's hold timer.
                            let actions = lock(self.fsm).handle(Event::UpdatesSent);
                            if let Some(t) = ticker.as_mut()
                                && actions
                                    .iter()
                                    .any(|a| matches!(a, Action::SetTimer(Timer::Keepalive, _)))
                            {
                                t.reset();
                            }
                        }
                        _ => break,
                    }
                }
            }
            tokio::select! {
                _ = async {
                    match ticker.as_mut() {
                        Some(t) => {
                            t.tick().await;
                        }
                        None => std::future::pending().await,
                    }
                } => {
                    let actions = lock(self.fsm).handle(Event::KeepaliveTimerExpires);
                    for a in actions {
                        if let Action::Send(o @ Outgoing::Keepalive) = a {
                            if let Err(e) = writer.write_all(&o.encode()).await {
                                return failed(e);
                            }
                            self.counters.sent(wire::msg_type::KEEPALIVE);
                        }
                    }
                }
                _ = output.notified() => pending_pull = true,
                b = raw.recv() => if let Some(b) = b {
                    if let Err(e) = writer.write_all(&b).await {
                        return failed(e);
                    }
                    self.counters.sent(b.get(18).copied().unwrap_or(0));
                },
            }
        }
    }
}
