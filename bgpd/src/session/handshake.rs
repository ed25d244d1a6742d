//! The OPEN exchange on one connection, driven by the connection's copy of
//! the state machine: OpenSent → OpenConfirm → ready for Established
//! (RFC 4271 8.2.2), with collision detection against the neighbor's other
//! connections (`collision`). Also the connection itself: a framed reader
//! and a writer.
use super::collision::Seat;
use super::counters::PeerCounters;
use super::framed::{FramedReader, ReadError};
use super::fsm::{Negotiated, State};
use super::machine::{Action, Cause, Event, Fsm, OPEN_WAIT, Outgoing, Timer};
use crate::wire::{self, DecodeOptions, Notification, OpenExpect};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::Instant;

pub struct Connection {
    pub reader: FramedReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// A second descriptor of the socket, for closing it gently (`Drop`).
    linger: Option<OwnedFd>,
}

/// How long a closed connection is read (and what arrives thrown away)
/// while waiting for the peer to close its side.
const LINGER: Duration = Duration::from_secs(10);

/// At most this many sockets linger at once; past it they close at once.
const MAX_LINGERING: usize = 256;

static LINGERING: AtomicUsize = AtomicUsize::new(0);

/// Closing a socket whose received bytes were not all read makes the
/// kernel send a RST and drop what it has not yet sent: a NOTIFICATION
/// written just before could be lost with it, and where the RST is lost
/// too (a lossy path) the peer keeps a session that no longer exists
/// until its next KEEPALIVE draws a RST, refusing new connections as
/// collisions meanwhile. So the write side is shut (FIN after what was
/// written) and the socket kept open, read and discarded, until the peer
/// closes its side or `LINGER` passes; the kernel meanwhile retransmits
/// what the peer has not acknowledged.
impl Drop for Connection {
    fn drop(&mut self) {
        let Some(fd) = self.linger.take() else { return };
        let socket = std::net::TcpStream::from(fd);
        let _ = socket.shutdown(std::net::Shutdown::Write);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if LINGERING.fetch_add(1, Ordering::Relaxed) >= MAX_LINGERING {
            LINGERING.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        rt.spawn(async move {
            drain(socket).await;
            LINGERING.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Reads and discards until the peer closes, the socket fails, or `LINGER`.
async fn drain(socket: std::net::TcpStream) {
    // The descriptor shares the original's non-blocking file description.
    let Ok(stream) = TcpStream::from_std(socket) else {
        return;
    };
    let mut buf = [0u8; 4096];
    let _ = tokio::time::timeout(LINGER, async {
        loop {
            match stream.readable().await {
                Err(_) => return,
                Ok(()) => match stream.try_read(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                },
            }
        }
    })
    .await;
}

/// A connection whose machine has reached Established.
pub struct Opened {
    pub conn: Connection,
    pub fsm: Fsm,
    pub negotiated: Negotiated,
    /// The machine's actions after `Established` (the session's timers).
    pub pending: Vec<Action>,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    Read(#[from] ReadError),
    #[error("write failed: {0}")]
    Write(std::io::Error),
    #[error("peer sent NOTIFICATION {0}")]
    PeerNotification(Notification),
    #[error("sent NOTIFICATION {0}")]
    SentNotification(Notification),
}

impl Connection {
    pub fn new(stream: TcpStream) -> std::io::Result<Connection> {
        let local = stream.local_addr()?;
        let remote = stream.peer_addr()?;
        stream.set_nodelay(true)?;
        let linger = stream.as_fd().try_clone_to_owned().ok();
        let (r, w) = stream.into_split();
        Ok(Connection {
            reader: FramedReader::new(r),
            writer: w,
            local,
            remote,
            linger,
        })
    }

    async fn send(&mut self, o: &Outgoing, counters: &PeerCounters) -> Result<(), SessionError> {
        let bytes = o.encode();
        self.writer
            .write_all(&bytes)
            .await
            .map_err(SessionError::Write)?;
        counters.sent(bytes[18]);
        Ok(())
    }

    /// Sends a NOTIFICATION and closes our side; the error to report.
    pub async fn notify_and_close(
        &mut self,
        n: Notification,
        counters: &PeerCounters,
    ) -> SessionError {
        let _ =
            tokio::time::timeout(Duration::from_secs(2), self.writer.write_all(&n.encode())).await;
        let _ = self.writer.shutdown().await;
        counters.sent(wire::msg_type::NOTIFICATION);
        SessionError::SentNotification(n)
    }

    /// The next event on the connection: a message, a bad one, or the hold
    /// timer expiring at `hold`; an OPEN is checked against `expect`.
    /// `Err`: the transport failed.
    async fn next_event(
        &mut self,
        hold: Instant,
        expect: &OpenExpect,
        counters: &PeerCounters,
    ) -> Result<Event, ReadError> {
        let bytes = match tokio::time::timeout_at(hold, self.reader.next()).await {
            Err(_) => return Ok(Event::HoldTimerExpires),
            Ok(Err(ReadError::Framing(n))) => return Ok(Event::BadMessage(n)),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(b)) => b,
        };
        Ok(
            match wire::decode_expecting(bytes, &DecodeOptions::default(), expect) {
                Ok(m) => {
                    counters.received(bytes[18]);
                    Event::Message(m)
                }
                Err(n) => Event::BadMessage(n),
            },
        )
    }
}

/// Sleeps until `t`; forever without one.
async fn sleep_until_opt(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Runs the OPEN exchange on a new connection with `fsm`, the neighbor's
/// machine copied for it, and `seat`, its place among the neighbor's
/// connections. On any error the connection has been closed (with a
/// NOTIFICATION where the RFC asks for one).
pub async fn handshake(
    mut conn: Connection,
    mut fsm: Fsm,
    counters: &PeerCounters,
    seat: Seat,
) -> Result<Opened, SessionError> {
    if let Some(n) = seat.stopped_with() {
        // RFC 4271 8.2.2: a ManualStop before our OPEN only drops the
        // connection.
        fsm.handle(Event::ManualStop(n));
        return Err(ReadError::Closed.into());
    }
    if seat.is_lost() {
        // Another connection is the session already (RFC 4271 6.8).
        let n = Notification::connection_collision();
        return Err(conn.notify_and_close(n, counters).await);
    }
    let expect = fsm.local().expect();
    let mut actions = fsm.handle(Event::TcpConnectionConfirmed);
    let mut hold = Instant::now() + OPEN_WAIT;
    let mut keepalive: Option<Instant> = None;
    loop {
        let mut it = actions.into_iter();
        while let Some(action) = it.next() {
            match action {
                Action::Send(o) => conn.send(&o, counters).await?,
                Action::SetTimer(Timer::Hold, d) => hold = Instant::now() + d,
                Action::SetTimer(Timer::Keepalive, d) => keepalive = Some(Instant::now() + d),
                Action::StopTimer(Timer::Keepalive) => keepalive = None,
                Action::Established(negotiated) => {
                    if !seat.claim() {
                        // Lost to another connection while this one read
                        // the KEEPALIVE (RFC 4271 6.8).
                        let n = Notification::connection_collision();
                        return Err(conn.notify_and_close(n, counters).await);
                    }
                    return Ok(Opened {
                        conn,
                        fsm,
                        negotiated: *negotiated,
                        pending: it.collect(),
                    });
                }
                Action::Close { cause, .. } => {
                    return Err(match cause {
                        Cause::Sent(n) => conn.notify_and_close(n, counters).await,
                        Cause::Received(n) => SessionError::PeerNotification(n),
                        Cause::Transport(_) | Cause::Replaced => ReadError::Closed.into(),
                    });
                }
                _ => {}
            }
        }
        // A connection that lost to the session, or runs behind it, must
        // not overwrite its state.
        if seat.shows_state() {
            counters.set_state(fsm.state());
        }
        let event = tokio::select! {
            // A loss goes first: it must not wait behind a buffered
            // KEEPALIVE that would take this connection to Established.
            biased;
            () = seat.lost() => Event::CollisionLost,
            // RFC 4271 8.2.2: ManualStop in OpenSent or OpenConfirm sends
            // the Cease.
            n = seat.stopped() => Event::ManualStop(n),
            () = sleep_until_opt(keepalive) => Event::KeepaliveTimerExpires,
            r = conn.next_event(hold, &expect, counters) => match r {
                Ok(event) => event,
                Err(e) => {
                    fsm.handle(Event::TcpConnectionFails(e.to_string()));
                    return Err(e.into());
                }
            },
        };
        actions = handle(&mut fsm, &seat, event);
    }
}

/// Runs `event`; when it accepts the peer's OPEN, collision detection
/// (RFC 4271 6.8) decides whether this connection goes on.
fn handle(fsm: &mut Fsm, seat: &Seat, event: Event) -> Vec<Action> {
    if seat.is_lost() {
        return fsm.handle(Event::CollisionLost);
    }
    let before = fsm.state();
    let actions = fsm.handle(event);
    let Some(peer) = fsm.negotiated().filter(|_| before == State::OpenSent) else {
        return actions;
    };
    if seat.open_accepted(fsm.local(), peer.peer_router_id, peer.peer_asn) {
        // Closed with a Cease instead of confirming the OPEN.
        return fsm.handle(Event::CollisionLost);
    }
    actions
}
