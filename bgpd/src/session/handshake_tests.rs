//! The OPEN exchange over loopback TCP, with a neighbor task that dials a
//! test listener and is handed a second connection "from the peer": the
//! KeepaliveTimer in OpenConfirm (RFC 4271 8.2.2) and connection
//! collisions (6.8), as the peer sees them on the wire.
use super::events::PeerEvent;
use super::fsm::LocalParams;
use super::peer::{PeerLink, spawn_peer};
use crate::model::Family;
use crate::wire::{self, Capabilities, DecodeOptions, Message, Notification, Open};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const LOCAL_AS: u32 = 65000;
const PEER_AS: u32 = 65001;
const PEER_ID: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
/// Long enough for any message over loopback.
const WAIT: Duration = Duration::from_secs(5);

// Test-only and short-lived: boxing the message would only clutter every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Got {
    Message(Message),
    Closed,
    TimedOut,
}

/// The peer's end of one connection.
struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Raw {
    async fn recv(&mut self, timeout: Duration) -> Got {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(len)) = wire::frame(&self.buf) {
                let msg: Vec<u8> = self.buf.drain(..len).collect();
                let m = wire::decode(&msg, &DecodeOptions::default()).expect("bgpd's message");
                return Got::Message(m);
            }
            let mut chunk = [0u8; 4096];
            match tokio::time::timeout_at(deadline, self.stream.read(&mut chunk)).await {
                Err(_) => return Got::TimedOut,
                Ok(Ok(0) | Err(_)) => return Got::Closed,
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    async fn expect(&mut self, what: &str, ok: impl Fn(&Message) -> bool) -> Message {
        match self.recv(WAIT).await {
            Got::Message(m) if ok(&m) => m,
            other => panic!("expected {what}, got {other:?}"),
        }
    }

    async fn send_open(&mut self, hold_time: u16) {
        let open = Open {
            version: 4,
            asn: PEER_AS,
            my_as_field: PEER_AS as u16,
            hold_time,
            router_id: PEER_ID,
            caps: Capabilities {
                families: vec![Family::Ipv4Unicast],
                four_octet_as: Some(PEER_AS),
                ..Default::default()
            },
        };
        self.stream.write_all(&open.encode()).await.unwrap();
    }

    async fn send_keepalive(&mut self) {
        let mut ka = Vec::new();
        wire::encode_keepalive(&mut ka);
        self.stream.write_all(&ka).await.unwrap();
    }

    /// The peer's OPEN out, bgpd's OPEN in.
    async fn open(&mut self, hold_time: u16) {
        self.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
        self.send_open(hold_time).await;
    }

    /// A Cease / Connection Collision Resolution, then the end of the stream.
    async fn expect_collision_cease(&mut self) {
        let n = self
            .expect("NOTIFICATION 6/7", |m| {
                matches!(m, Message::Notification(_))
            })
            .await;
        assert_eq!(
            n,
            Message::Notification(Notification::connection_collision())
        );
        assert!(matches!(self.recv(WAIT).await, Got::Closed));
    }
}

/// A neighbor task (dialing a test listener) and the peer's side of it.
struct Lab {
    link: PeerLink,
    events: mpsc::Receiver<PeerEvent>,
    listener: TcpListener,
}

impl Lab {
    /// Our identifier `router_id`; our hold time `hold_time`.
    async fn new(router_id: Ipv4Addr, hold_time: u16) -> Lab {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let text = format!(
            "router_id = \"{router_id}\"\nasn = {LOCAL_AS}\n[[neighbor]]\n\
             address = \"127.0.0.1\"\nasn = {PEER_AS}\nport = {port}\n"
        );
        let config = crate::config::parse("t", &text).unwrap();
        let neighbor = Arc::new(config.neighbors[0].clone());
        let local = LocalParams {
            asn: LOCAL_AS,
            router_id,
            hold_time,
            families: vec![Family::Ipv4Unicast],
            peer_asn: PEER_AS,
            graceful_restart: None,
            restarting: false,
            forwarding_preserved: false,
        };
        let (tx, events) = mpsc::channel(16);
        let metrics = crate::control::Metrics::new().peer(neighbor.address);
        let retry = Duration::from_secs(60);
        let link = spawn_peer(1, neighbor, local, retry, tx, metrics, None);
        Lab {
            link,
            events,
            listener,
        }
    }

    /// The connection the neighbor task dialed.
    async fn dialed(&self) -> Raw {
        let (stream, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .expect("bgpd dials")
            .unwrap();
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    /// A connection from the peer, handed to the task as the listener would.
    async fn peer_connects(&self) -> Raw {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (ours, _) = l.accept().await.unwrap();
        self.link.incoming.send(ours).await.unwrap();
        Raw {
            stream,
            buf: Vec::new(),
        }
    }

    /// The session came up on the connection whose peer end is `raw`.
    async fn expect_up_on(&mut self, raw: &Raw) {
        let e = tokio::time::timeout(WAIT, self.events.recv()).await;
        let Ok(Some(PeerEvent::Up { remote, .. })) = e else {
            panic!("expected the session up, got {e:?}");
        };
        let peer_end: SocketAddr = raw.stream.local_addr().unwrap();
        assert_eq!(remote, peer_end, "the session is on the other connection");
    }
}

#[tokio::test]
async fn open_confirm_sends_keepalives_on_the_keepalive_timer() {
    // Hold time 3 s: a KEEPALIVE every second, also in OpenConfirm.
    let lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 3).await;
    let mut peer = lab.dialed().await;
    peer.open(3).await;
    peer.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    // The peer holds back its KEEPALIVE: bgpd's hold timer runs (3 s), and
    // a second KEEPALIVE must come before it would expire.
    match peer.recv(Duration::from_millis(2500)).await {
        Got::Message(Message::Keepalive) => {}
        other => panic!("expected a second KEEPALIVE in OpenConfirm, got {other:?}"),
    }
}

/// A neighbor with our identifier `router_id`, both connections up:
/// the one it dialed in OpenConfirm (the peer's OPEN answered with a
/// KEEPALIVE), the one the peer made in OpenSent.
async fn colliding(router_id: Ipv4Addr) -> (Lab, Raw, Raw) {
    let lab = Lab::new(router_id, 90).await;
    let mut dialed = lab.dialed().await;
    let accepted = lab.peer_connects().await;
    dialed.open(90).await;
    dialed
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    (lab, dialed, accepted)
}

#[tokio::test]
async fn the_connection_in_open_confirm_loses_when_the_peers_open_arrives() {
    // The peer's identifier is the higher: its connection stays.
    let (mut lab, mut dialed, mut accepted) = colliding(Ipv4Addr::new(10, 0, 0, 1)).await;
    // The second OPEN decides at once (RFC 4271 6.8), with no KEEPALIVE
    // from the peer on either connection.
    accepted.open(90).await;
    dialed.expect_collision_cease().await;
    accepted
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    accepted.send_keepalive().await;
    lab.expect_up_on(&accepted).await;
}

#[tokio::test]
async fn the_connection_whose_open_comes_second_loses() {
    // Our identifier is the higher: the connection we dialed stays.
    let (mut lab, mut dialed, mut accepted) = colliding(Ipv4Addr::new(10, 0, 0, 9)).await;
    accepted.open(90).await;
    // No KEEPALIVE on the loser: the Cease comes instead.
    accepted.expect_collision_cease().await;
    dialed.send_keepalive().await;
    lab.expect_up_on(&dialed).await;
}

#[tokio::test]
async fn a_connection_still_in_open_sent_gets_a_cease_when_another_is_established() {
    let mut lab = Lab::new(Ipv4Addr::new(10, 0, 0, 9), 90).await;
    let mut dialed = lab.dialed().await;
    let mut accepted = lab.peer_connects().await;
    // bgpd's OPEN on the connection from the peer, which says nothing yet.
    accepted
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    dialed.open(90).await;
    dialed
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    dialed.send_keepalive().await;
    lab.expect_up_on(&dialed).await;
    // The other connection is closed with a Cease, not just closed.
    accepted.expect_collision_cease().await;
}

#[tokio::test]
async fn an_open_from_the_wrong_as_with_a_zero_identifier_is_bad_peer_as() {
    // RFC 4271 6.2: My Autonomous System is checked before the identifier.
    let lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 90).await;
    let mut peer = lab.dialed().await;
    peer.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    let open = Open {
        version: 4,
        asn: 65009,
        my_as_field: 65009,
        hold_time: 90,
        router_id: Ipv4Addr::UNSPECIFIED,
        caps: Capabilities::default(),
    };
    peer.stream.write_all(&open.encode()).await.unwrap();
    let n = peer
        .expect("NOTIFICATION", |m| matches!(m, Message::Notification(_)))
        .await;
    assert_eq!(n, Message::Notification(Notification::bad_peer_as(65009)));
}
