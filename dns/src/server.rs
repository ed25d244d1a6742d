//! Serving: UDP (several sockets on one address, see
//! [`crate::sockets`]) and TCP, each query checked against its client's
//! rate ([`Limiter`]) before it is parsed, then handed to the [`Handler`].
//! Answers that need no upstream are sent from the receive loop itself;
//! queries waiting for an upstream are bounded: past `max_inflight` of
//! them (UDP) and `max_tcp` connections, new ones are dropped or closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::handler::{Handler, Transport};
use crate::limit::Limiter;

/// How long an idle TCP connection is kept.
pub const TCP_IDLE: Duration = Duration::from_secs(10);

pub struct Server {
    pub handler: Arc<Handler>,
    pub limiter: Arc<Limiter>,
    pub max_inflight: usize,
    pub max_tcp: usize,
}

impl Server {
    /// Serve UDP on the `udp` sockets (one task each) and TCP on `tcp`
    /// until dropped.
    pub async fn run(self: Arc<Self>, udp: Vec<UdpSocket>, tcp: TcpListener) {
        let slots = Arc::new(Semaphore::new(self.max_inflight));
        let mut tasks: Vec<_> = udp
            .into_iter()
            .map(|s| tokio::spawn(self.clone().serve_udp(Arc::new(s), slots.clone())))
            .collect();
        tasks.push(tokio::spawn(self.serve_tcp(tcp)));
        futures::future::join_all(tasks).await;
    }

    /// Receive in a loop. A query answered without waiting (the cluster
    /// domain, a cached name, an error) is answered right here, without a
    /// task; one that must wait for an upstream goes on in a task of its
    /// own, within the `max_inflight` bound shared by all sockets.
    async fn serve_udp(self: Arc<Self>, sock: Arc<UdpSocket>, slots: Arc<Semaphore>) {
        let mut buf = vec![0u8; 65535];
        loop {
            let (n, from) = match sock.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    // ICMP errors of earlier sends surface here; go on.
                    debug!(error = %e, "udp receive");
                    continue;
                }
            };
            if !self.limiter.allow(from.ip(), Instant::now()) {
                self.handler.metrics.rate_limited.inc();
                continue;
            }
            let me = self.clone();
            let req = buf[..n].to_vec();
            let mut reply = Box::pin(async move { me.handler.handle(&req, Transport::Udp).await });
            match (&mut reply).now_or_never() {
                Some(Some(out)) => send(&sock, &out, from).await,
                Some(None) => {}
                None => {
                    let Ok(permit) = slots.clone().try_acquire_owned() else {
                        self.handler.metrics.rate_limited.inc();
                        continue;
                    };
                    let sock = sock.clone();
                    tokio::spawn(async move {
                        if let Some(out) = reply.await {
                            send(&sock, &out, from).await;
                        }
                        drop(permit);
                    });
                }
            }
        }
    }

    async fn serve_tcp(self: Arc<Self>, listener: TcpListener) {
        let slots = Arc::new(Semaphore::new(self.max_tcp));
        loop {
            let (stream, from) = match listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    warn!(error = %e, "tcp accept");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                self.handler.metrics.rate_limited.inc();
                continue;
            };
            let me = self.clone();
            tokio::spawn(async move {
                me.serve_conn(stream, from).await;
                drop(permit);
            });
        }
    }

    /// Length-prefixed queries on one connection, answered in order.
    async fn serve_conn(&self, mut s: TcpStream, from: SocketAddr) {
        loop {
            let mut len = [0u8; 2];
            match tokio::time::timeout(TCP_IDLE, s.read_exact(&mut len)).await {
                Ok(Ok(_)) => {}
                _ => return,
            }
            let mut req = vec![0u8; usize::from(u16::from_be_bytes(len))];
            match tokio::time::timeout(TCP_IDLE, s.read_exact(&mut req)).await {
                Ok(Ok(_)) => {}
                _ => return,
            }
            if !self.limiter.allow(from.ip(), Instant::now()) {
                self.handler.metrics.rate_limited.inc();
                continue;
            }
            let Some(out) = self.handler.handle(&req, Transport::Tcp).await else {
                continue;
            };
            let Ok(n) = u16::try_from(out.len()) else {
                continue;
            };
            let mut framed = Vec::with_capacity(out.len() + 2);
            framed.extend_from_slice(&n.to_be_bytes());
            framed.extend_from_slice(&out);
            if s.write_all(&framed).await.is_err() {
                return;
            }
        }
    }
}

/// Send a datagram: at once if the socket has room, else when it has.
async fn send(sock: &UdpSocket, out: &[u8], to: SocketAddr) {
    let r = match sock.try_send_to(out, to) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => sock.send_to(out, to).await,
        r => r,
    };
    if let Err(e) = r {
        debug!(client = %to, error = %e, "udp send");
    }
}
