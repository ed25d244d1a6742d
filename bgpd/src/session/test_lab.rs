//! For tests over loopback TCP: the peer's end of a connection, written
//! by hand (`Raw`), and a neighbor task that dials a test listener and is
//! handed connections "from the peer" as the listener would (`Lab`).
use super::events::PeerEvent;
use super::fsm::LocalParams;
use super::peer::{PeerLink, spawn_peer};
use crate::model::{AsPath, AsSegment, Family, NextHop, Origin, PathAttrs};
use crate::wire::{self, Capabilities, DecodeOptions, GracefulRestartCap, Message, Notification};
use crate::wire::{EncodeOptions, Open};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

pub const LOCAL_AS: u32 = 65000;
pub const PEER_AS: u32 = 65001;
pub const PEER_ID: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
/// Long enough for any message over loopback.
pub const WAIT: Duration = Duration::from_secs(5);

// Test-only and short-lived: boxing the message would only clutter every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Got {
    Message(Message),
    Closed,
    TimedOut,
}

/// The peer's end of one connection.
pub struct Raw {
    pub stream: TcpStream,
    buf: Vec<u8>,
    /// The peer's OPEN has the graceful restart capability (IPv4, F bit).
    pub graceful_restart: bool,
    /// With it, the Restart State bit (the peer restarted).
    pub restarting: bool,
    /// The peer's AS (in its OPEN and its routes' AS_PATH).
    pub asn: u32,
    pub router_id: Ipv4Addr,
}

impl Raw {
    pub fn new(stream: TcpStream, graceful_restart: bool) -> Raw {
        Raw {
            stream,
            buf: Vec::new(),
            graceful_restart,
            restarting: true,
            asn: PEER_AS,
            router_id: PEER_ID,
        }
    }

    pub async fn recv(&mut self, timeout: Duration) -> Got {
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

    pub async fn expect(&mut self, what: &str, ok: impl Fn(&Message) -> bool) -> Message {
        match self.recv(WAIT).await {
            Got::Message(m) if ok(&m) => m,
            other => panic!("expected {what}, got {other:?}"),
        }
    }

    pub async fn send_open(&mut self, hold_time: u16) {
        let open = self.open_message(hold_time);
        self.stream.write_all(&open.encode()).await.unwrap();
    }

    /// The peer's OPEN: IPv4 unicast, 4-octet AS, and graceful restart
    /// when the peer has it.
    pub fn open_message(&self, hold_time: u16) -> Open {
        let graceful_restart = self.graceful_restart.then(|| GracefulRestartCap {
            restarting: self.restarting,
            notification: false,
            restart_time: 120,
            families: vec![(Family::Ipv4Unicast, true)],
        });
        Open {
            version: 4,
            asn: self.asn,
            my_as_field: self.asn as u16,
            hold_time,
            router_id: self.router_id,
            caps: Capabilities {
                families: vec![Family::Ipv4Unicast],
                four_octet_as: Some(self.asn),
                graceful_restart,
                ..Default::default()
            },
        }
    }

    pub async fn send_keepalive(&mut self) {
        let mut ka = Vec::new();
        wire::encode_keepalive(&mut ka);
        self.stream.write_all(&ka).await.unwrap();
    }

    /// An UPDATE announcing `prefix` (IPv4) from the peer's AS.
    pub async fn send_route(&mut self, prefix: &str) {
        let attrs = PathAttrs {
            origin: Origin::Igp,
            as_path: AsPath {
                segments: vec![AsSegment::Sequence(vec![self.asn])],
            },
            next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 254)),
            ..PathAttrs::default()
        };
        let mut out = Vec::new();
        let prefixes = [prefix.parse().unwrap()];
        let opts = EncodeOptions::default();
        wire::encode_announce(&attrs, Family::Ipv4Unicast, &prefixes, &opts, &mut out).unwrap();
        self.stream.write_all(&out).await.unwrap();
    }

    pub async fn send_end_of_rib(&mut self) {
        let mut out = Vec::new();
        wire::encode_end_of_rib(Family::Ipv4Unicast, &mut out);
        self.stream.write_all(&out).await.unwrap();
    }

    /// The peer's OPEN out, bgpd's OPEN in.
    pub async fn open(&mut self, hold_time: u16) {
        self.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
        self.send_open(hold_time).await;
    }

    /// The whole OPEN exchange, up to Established.
    pub async fn establish(&mut self, hold_time: u16) {
        self.open(hold_time).await;
        self.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
        self.send_keepalive().await;
    }

    /// A Cease / Connection Collision Resolution, then the end of the stream.
    pub async fn expect_collision_cease(&mut self) {
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

/// How the neighbor is set up.
pub struct LabOptions {
    pub router_id: Ipv4Addr,
    pub hold_time: u16,
    /// Graceful restart on both sides.
    pub graceful_restart: bool,
    /// RFC 5082 for the neighbor (`ttl_security`, `multihop`).
    pub ttl_security: bool,
    pub multihop: u8,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            router_id: Ipv4Addr::new(10, 0, 0, 1),
            hold_time: 90,
            graceful_restart: false,
            ttl_security: false,
            multihop: 1,
        }
    }
}

/// A neighbor task (dialing a test listener) and the peer's side of it.
pub struct Lab {
    pub link: PeerLink,
    /// What the task tells the instance, but the writer's pulls (answered
    /// with nothing to send).
    pub events: mpsc::Receiver<PeerEvent>,
    pub listener: TcpListener,
    graceful_restart: bool,
}

impl Lab {
    /// Our identifier `router_id`; our hold time `hold_time`.
    pub async fn new(router_id: Ipv4Addr, hold_time: u16) -> Lab {
        Lab::with(LabOptions {
            router_id,
            hold_time,
            ..LabOptions::default()
        })
        .await
    }

    pub async fn with(o: LabOptions) -> Lab {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        // What the peer sends passes TTL security (RFC 5082) when it is on.
        listener.set_ttl(255).unwrap();
        let port = listener.local_addr().unwrap().port();
        let text = format!(
            "router_id = \"{}\"\nasn = {LOCAL_AS}\n[[neighbor]]\n\
             address = \"127.0.0.1\"\nasn = {PEER_AS}\nport = {port}\n\
             ttl_security = {}\nmultihop = {}\n",
            o.router_id, o.ttl_security, o.multihop
        );
        let config = crate::config::parse("t", &text).unwrap();
        let neighbor = Arc::new(config.neighbors[0].clone());
        let local = LocalParams {
            asn: LOCAL_AS,
            router_id: o.router_id,
            hold_time: o.hold_time,
            families: vec![Family::Ipv4Unicast],
            peer_asn: PEER_AS,
            graceful_restart: o.graceful_restart.then_some(120),
            restarting: Default::default(),
            forwarding_preserved: false,
            installs_routes: false,
        };
        let (tx, mut from_task) = mpsc::channel(16);
        let metrics = crate::control::Metrics::new().peer(neighbor.address);
        let retry = Duration::from_secs(60);
        let link = spawn_peer(1, neighbor, local, retry, tx, metrics, None);
        let (events_tx, events) = mpsc::channel(64);
        tokio::spawn(async move {
            while let Some(e) = from_task.recv().await {
                match e {
                    PeerEvent::Pull { reply, .. } => {
                        let _ = reply.send(None);
                    }
                    e => {
                        if events_tx.send(e).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Lab {
            link,
            events,
            listener,
            graceful_restart: o.graceful_restart,
        }
    }

    /// The connection the neighbor task dialed.
    pub async fn dialed(&self) -> Raw {
        let (stream, _) = tokio::time::timeout(WAIT, self.listener.accept())
            .await
            .expect("bgpd dials")
            .unwrap();
        Raw::new(stream, self.graceful_restart)
    }

    /// A connection from the peer, handed to the task as the listener
    /// would; the peer sends with TTL 255. Also a second descriptor of
    /// the task's end, to look at its socket options.
    pub async fn peer_connects_watched(&self) -> (Raw, OwnedFd) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        stream.set_ttl(255).unwrap();
        let (ours, _) = l.accept().await.unwrap();
        let watch = ours.as_fd().try_clone_to_owned().unwrap();
        self.link.incoming.send(ours).await.unwrap();
        (Raw::new(stream, self.graceful_restart), watch)
    }

    /// A connection from the peer, handed to the task as the listener would.
    pub async fn peer_connects(&self) -> Raw {
        self.peer_connects_watched().await.0
    }

    /// The next event, within `WAIT`.
    pub async fn event(&mut self) -> PeerEvent {
        match tokio::time::timeout(WAIT, self.events.recv()).await {
            Ok(Some(e)) => e,
            other => panic!("expected an event from the neighbor task, got {other:?}"),
        }
    }

    /// The session came up on the connection whose peer end is `raw`.
    pub async fn expect_up_on(&mut self, raw: &Raw) {
        let e = self.event().await;
        let PeerEvent::Up { remote, .. } = e else {
            panic!("expected the session up, got {e:?}");
        };
        let peer_end: SocketAddr = raw.stream.local_addr().unwrap();
        assert_eq!(remote, peer_end, "the session is on the other connection");
    }

    /// An Established session on the connection the task dialed, with
    /// the peer's hold time `hold_time`.
    pub async fn established(&mut self, hold_time: u16) -> Raw {
        let mut peer = self.dialed().await;
        peer.establish(hold_time).await;
        self.expect_up_on(&peer).await;
        peer
    }
}
