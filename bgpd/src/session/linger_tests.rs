//! A connection closed while bytes from the peer are still unread: the
//! peer must read what was sent (a NOTIFICATION, or nothing) and then an
//! orderly end of stream, never a reset, which would lose the
//! NOTIFICATION on a path that drops packets and, lost itself, leave the
//! peer holding a connection that is gone.
use super::attempt::turn_away;
use super::counters::PeerCounters;
use super::handshake::Connection;
use crate::net::TtlPolicy;
use crate::wire::Notification;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// What the peer saw: its read to the end, the bytes read, and its writes
/// after that.
type Seen = (
    Result<usize, ErrorKind>,
    Vec<u8>,
    Vec<Result<(), ErrorKind>>,
);

/// The peer: a blocking socket on its own thread that sends 300 bytes,
/// reads to the end, then sends five more times, 20 ms apart.
fn peer(addr: SocketAddr) -> JoinHandle<Seen> {
    std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(&[0xaa; 300]).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let r = s.read_to_end(&mut got).map_err(|e| e.kind());
        // Our side still reads: what the peer sends before it learns of
        // the close is taken, not answered with a reset.
        let later = (0..5)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(20));
                s.write_all(&[0xbb; 100]).map_err(|e| e.kind())
            })
            .collect();
        (r, got, later)
    })
}

/// The accepted end, once the peer's 300 bytes have arrived (left unread).
async fn accepted_with_unread(listener: &TcpListener) -> TcpStream {
    let (stream, _) = listener.accept().await.unwrap();
    let mut probe = [0u8; 300];
    while stream.peek(&mut probe).await.unwrap() < 300 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    stream
}

async fn seen(peer: JoinHandle<Seen>) -> Seen {
    tokio::task::spawn_blocking(move || peer.join().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_notification_sent_over_unread_bytes_ends_in_an_orderly_close() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = peer(addr);
    let stream = accepted_with_unread(&listener).await;
    let counters = PeerCounters::new(crate::control::Metrics::new().peer(addr.ip()));
    let mut conn = Connection::new(stream).unwrap();
    let n = Notification::connection_collision();
    conn.notify_and_close(n.clone(), &counters).await;
    drop(conn);
    let (result, got, later) = seen(peer).await;
    assert_eq!(
        result,
        Ok(got.len()),
        "the peer saw a reset, not an orderly close"
    );
    assert_eq!(got, n.encode(), "the peer read exactly the NOTIFICATION");
    assert!(later.iter().all(Result::is_ok), "{later:?}");
}

#[tokio::test]
async fn a_connection_turned_away_unread_ends_in_an_orderly_close() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let peer = peer(listener.local_addr().unwrap());
    turn_away(
        accepted_with_unread(&listener).await,
        TtlPolicy::new(64, false),
    );
    let (result, got, later) = seen(peer).await;
    assert_eq!(result, Ok(0), "the peer saw a reset, not an orderly close");
    assert!(got.is_empty());
    assert!(later.iter().all(Result::is_ok), "{later:?}");
}
