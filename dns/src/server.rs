//! The sockets: UDP and TCP on one address, each query checked against
//! its client's rate ([`Limiter`]) before it is parsed, then handed to the
//! [`Handler`]. Work in flight is bounded: past `max_inflight` UDP queries
//! and `max_tcp` connections, new ones are dropped or closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Serve UDP on `udp` and TCP on `tcp` until dropped.
    pub async fn run(self: Arc<Self>, udp: UdpSocket, tcp: TcpListener) {
        let udp_task = tokio::spawn(self.clone().serve_udp(Arc::new(udp)));
        let tcp_task = tokio::spawn(self.serve_tcp(tcp));
        let _ = tokio::join!(udp_task, tcp_task);
    }

    async fn serve_udp(self: Arc<Self>, sock: Arc<UdpSocket>) {
        let slots = Arc::new(Semaphore::new(self.max_inflight));
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
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                self.handler.metrics.rate_limited.inc();
                continue;
            };
            let req = buf[..n].to_vec();
            let me = self.clone();
            let sock = sock.clone();
            tokio::spawn(async move {
                if let Some(out) = me.handler.handle(&req, Transport::Udp).await
                    && let Err(e) = sock.send_to(&out, from).await
                {
                    debug!(client = %from, error = %e, "udp send");
                }
                drop(permit);
            });
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
