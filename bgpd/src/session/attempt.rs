//! A neighbor's attempts at a session: each is a TCP connection (dialled,
//! or accepted from the peer) with its OPEN exchange, as a future the
//! neighbor's task polls among the others; and the set of them with their
//! collision board, which a session can hand on to the task when it ends.
use super::collision::Collisions;
use super::counters::PeerCounters;
use super::handshake::{Connection, Opened, SessionError, handshake};
use super::machine::Fsm;
use crate::config::Neighbor;
use crate::net::{TtlPolicy, dial};
use crate::wire::Notification;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Whether the peer opened the connection, and how its OPEN exchange ended.
pub type Outcome = (bool, Result<Opened, SessionError>);

pub type Attempt = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// Attempts under way, on one collision board.
#[derive(Default)]
pub struct Attempts {
    running: FuturesUnordered<Attempt>,
    pub board: Collisions,
}

impl Attempts {
    pub fn new(board: Collisions) -> Attempts {
        Attempts {
            running: FuturesUnordered::new(),
            board,
        }
    }

    pub fn push(&mut self, a: Attempt) {
        self.running.push(a);
    }

    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// How many connections are in their OPEN exchange.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// The next attempt to end; never resolves while there are none.
    pub async fn next(&mut self) -> Outcome {
        match self.running.next().await {
            Some(o) => o,
            None => std::future::pending().await,
        }
    }

    /// A connection that has already reached Established.
    pub fn push_opened(&mut self, incoming: bool, opened: Opened) {
        self.push(Box::pin(std::future::ready((incoming, Ok(opened)))));
    }

    /// RFC 4271 6.8: with one connection Established, the others are
    /// closed with a Cease; they finish that on their own.
    pub fn close_the_others(self) {
        self.board.settle();
        self.finish_alone();
    }

    /// RFC 4271 8.2.2: the neighbor is stopped (ManualStop); connections
    /// in OpenSent or OpenConfirm send `n`, a Cease, then close. They
    /// finish that on their own.
    /// One already Established (carried on from a session, or past its
    /// KEEPALIVE before it saw the stop) gets `n` too.
    pub fn stop(self, n: Notification, counters: &Arc<PeerCounters>) {
        self.board.stop(n.clone());
        if self.running.is_empty() {
            return;
        }
        let counters = counters.clone();
        tokio::spawn(self.running.for_each_concurrent(None, move |(_, r)| {
            let (n, counters) = (n.clone(), counters.clone());
            async move {
                if let Ok(mut opened) = r {
                    opened.conn.notify_and_close(n, &counters).await;
                }
            }
        }));
    }

    fn finish_alone(self) {
        if !self.running.is_empty() {
            tokio::spawn(self.running.for_each(|_| async {}));
        }
    }
}

/// A connection the peer opened, with the neighbor's TTL rules on it. The
/// listener is shared, so they cannot be set before the SYN; RFC 5082
/// checks every later segment. Every accepted socket goes through here.
pub fn accepted(stream: TcpStream, ttl: TtlPolicy) -> std::io::Result<Connection> {
    ttl.apply(stream.as_fd())?;
    Connection::new(stream)
}

/// Closes a connection from the peer that is not wanted now, gently (see
/// `Drop for Connection`), with the TTL rules on, so that a peer checking
/// them (RFC 5082) takes what we send.
pub fn turn_away(stream: TcpStream, ttl: TtlPolicy) {
    drop(accepted(stream, ttl));
}

/// The OPEN exchange on a connection the peer opened, with `fsm`, the
/// neighbor's machine copied for it.
pub fn incoming(
    stream: TcpStream,
    ttl: TtlPolicy,
    fsm: Fsm,
    counters: Arc<PeerCounters>,
    board: &Collisions,
) -> Attempt {
    let board = board.clone();
    Box::pin(async move {
        let conn = match accepted(stream, ttl) {
            Ok(c) => c,
            Err(e) => return (true, Err(SessionError::Write(e))),
        };
        (
            true,
            handshake(conn, fsm, &counters, board.join(true)).await,
        )
    })
}

/// Dials the neighbor, then runs the OPEN exchange on the connection.
pub fn dialled(
    n: Arc<Neighbor>,
    fsm: Fsm,
    counters: Arc<PeerCounters>,
    timeout: Duration,
    board: &Collisions,
) -> Attempt {
    let board = board.clone();
    Box::pin(async move {
        let peer = SocketAddr::new(n.address, n.port);
        let ttl = ttl_policy(&n);
        let stream = match dial(peer, n.local_address, n.password.as_deref(), ttl, timeout).await {
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

/// The neighbor's TTL rules (eBGP multihop, RFC 5082 TTL security).
pub fn ttl_policy(n: &Neighbor) -> TtlPolicy {
    TtlPolicy::new(n.multihop, n.ttl_security)
}
