//! The OPEN exchange on one connection: OpenSent → OpenConfirm → ready
//! for Established (RFC 4271 8.2.2).
use super::PeerCounters;
use super::framed::{FramedReader, ReadError};
use super::fsm::{LocalParams, Negotiated, State, negotiate};
use crate::wire::{self, DecodeOptions, Message, Notification, Open};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// RFC 4271 8.2.2 suggests a large hold time (4 minutes) until OPEN arrives.
const OPEN_WAIT: Duration = Duration::from_secs(240);

pub struct Connection {
    pub reader: FramedReader<OwnedReadHalf>,
    pub writer: OwnedWriteHalf,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

pub struct Opened {
    pub conn: Connection,
    pub open: Open,
    pub negotiated: Negotiated,
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

impl SessionError {
    /// A failure of the transport, not a protocol decision: with graceful
    /// restart negotiated the peer's routes are kept (RFC 4724 4.2).
    pub fn is_transport_failure(&self) -> bool {
        matches!(
            self,
            SessionError::Read(ReadError::Closed | ReadError::Io(_)) | SessionError::Write(_)
        )
    }
}

impl Connection {
    pub fn new(stream: TcpStream) -> std::io::Result<Connection> {
        let local = stream.local_addr()?;
        let remote = stream.peer_addr()?;
        stream.set_nodelay(true)?;
        let (r, w) = stream.into_split();
        Ok(Connection {
            reader: FramedReader::new(r),
            writer: w,
            local,
            remote,
        })
    }

    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), SessionError> {
        self.writer
            .write_all(bytes)
            .await
            .map_err(SessionError::Write)
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
}

async fn read_one(
    conn: &mut Connection,
    wait: Duration,
    counters: &PeerCounters,
) -> Result<Message, SessionError> {
    let wait = if wait.is_zero() { OPEN_WAIT } else { wait };
    let bytes = match tokio::time::timeout(wait, conn.reader.next()).await {
        Err(_) => {
            return Err(conn
                .notify_and_close(Notification::hold_timer_expired(), counters)
                .await);
        }
        Ok(Err(ReadError::Framing(n))) => return Err(conn.notify_and_close(n, counters).await),
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(b)) => b,
    };
    match wire::decode(bytes, &DecodeOptions::default()) {
        Ok(m) => {
            counters.received(bytes[18]);
            Ok(m)
        }
        Err(n) => Err(conn.notify_and_close(n, counters).await),
    }
}

/// Runs the OPEN exchange. On any error the connection has been closed
/// (with a NOTIFICATION where the RFC asks for one).
pub async fn handshake(
    mut conn: Connection,
    local: &LocalParams,
    counters: &PeerCounters,
) -> Result<Opened, SessionError> {
    conn.send(&local.open().encode()).await?;
    counters.sent(wire::msg_type::OPEN);
    counters.set_state(State::OpenSent);
    let open = match read_one(&mut conn, OPEN_WAIT, counters).await? {
        Message::Open(open) => open,
        Message::Notification(n) => return Err(SessionError::PeerNotification(n)),
        // RFC 6608: unexpected message in OpenSent.
        _ => {
            return Err(conn
                .notify_and_close(Notification::unexpected_in_open_sent(), counters)
                .await);
        }
    };
    let negotiated = match negotiate(local, &open) {
        Ok(n) => n,
        Err(n) => return Err(conn.notify_and_close(n, counters).await),
    };
    let mut ka = Vec::with_capacity(19);
    wire::encode_keepalive(&mut ka);
    conn.send(&ka).await?;
    counters.sent(wire::msg_type::KEEPALIVE);
    counters.set_state(State::OpenConfirm);
    match read_one(&mut conn, negotiated.hold_time, counters).await? {
        Message::Keepalive => {}
        Message::Notification(n) => return Err(SessionError::PeerNotification(n)),
        // RFC 6608: unexpected message in OpenConfirm.
        _ => {
            return Err(conn
                .notify_and_close(Notification::unexpected_in_open_confirm(), counters)
                .await);
        }
    }
    Ok(Opened {
        conn,
        open,
        negotiated,
    })
}
