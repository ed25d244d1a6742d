//! Serving: UDP (several sockets on one address, see [`crate::sockets`],
//! each read by a thread of its own) and TCP (on the Tokio runtime), each
//! query checked against its client's rate ([`Limiter`]) before it is
//! parsed, then handed to the [`Handler`].
//!
//! A UDP query that needs no upstream (the cluster domain, a cached name,
//! an error) is answered by the receiving thread itself, which then sleeps
//! in the kernel until the next datagram: no task, no wake-up of another
//! thread, no scheduler between the datagram and its answer (this is what
//! keeps the slowest answers close to the typical ones on a busy machine).
//! A query that must wait for an upstream goes on as a task on the
//! runtime, within `max_inflight` of them (shared by all sockets); past
//! that, new ones are dropped. TCP connections past `max_tcp` are closed.
//!
//! The time an answered UDP query spends on its receiving thread, from its
//! receipt to its answer's send, is a histogram per thread
//! (`tartan_dns_udp_answer_duration_seconds`): what the server itself adds
//! to a client's wait, apart from the time the datagram waits for the
//! thread to be scheduled.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle;
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use crate::handler::{Handler, Transport};
use crate::limit::Limiter;
use crate::metrics::UdpThread;
use crate::sockets::send_now;

/// How long an idle TCP connection is kept.
pub const TCP_IDLE: Duration = Duration::from_secs(10);

/// Queries of one TCP connection in hand at once.
pub const TCP_PIPELINE: usize = 32;

pub struct Server {
    pub handler: Arc<Handler>,
    pub limiter: Arc<Limiter>,
    pub max_inflight: usize,
    pub max_tcp: usize,
}

impl Server {
    /// Serve UDP on the `udp` sockets, a thread each, until `stop` is set
    /// (each thread looks at least every [`crate::sockets::STOP_POLL`]).
    /// Queries waiting for an upstream run on `rt`.
    pub fn start_udp(
        self: &Arc<Self>,
        udp: Vec<UdpSocket>,
        rt: Handle,
        stop: Arc<AtomicBool>,
    ) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
        let slots = Arc::new(Semaphore::new(self.max_inflight));
        udp.into_iter()
            .enumerate()
            .map(|(i, s)| {
                let (me, rt, stop, slots) = (self.clone(), rt.clone(), stop.clone(), slots.clone());
                std::thread::Builder::new()
                    .name(format!("dns-udp-{i}"))
                    .spawn(move || me.serve_udp(i, Arc::new(s), rt, slots, &stop))
            })
            .collect()
    }

    /// Receive in a loop until `stop`; see the module's comment.
    fn serve_udp(
        self: Arc<Self>,
        index: usize,
        sock: Arc<UdpSocket>,
        rt: Handle,
        slots: Arc<Semaphore>,
        stop: &AtomicBool,
    ) {
        // Upstream queries register their sockets and timers with `rt`
        // when first polled, here.
        let _rt = rt.enter();
        let mut buf = vec![0u8; 65535];
        let took = self
            .handler
            .metrics
            .udp_answer_seconds
            .get_or_create(&UdpThread {
                thread: u32::try_from(index).unwrap_or(u32::MAX),
            })
            .clone();
        while !stop.load(Ordering::Relaxed) {
            let (n, from) = match sock.recv_from(&mut buf) {
                Ok(x) => x,
                Err(e) => {
                    // The receive timeout (to look at `stop`), or ICMP
                    // errors of earlier sends; go on.
                    debug!(error = %e, "udp receive");
                    continue;
                }
            };
            let t0 = Instant::now();
            if !self.limiter.allow(from.ip(), t0) {
                self.handler.metrics.rate_limited.inc();
                continue;
            }
            let me = self.clone();
            let req = buf[..n].to_vec();
            let mut reply = Box::pin(async move { me.handler.handle(&req, Transport::Udp).await });
            match (&mut reply).now_or_never() {
                Some(Some(out)) => {
                    if let Err(e) = sock.send_to(&out, from) {
                        debug!(client = %from, error = %e, "udp send");
                    }
                    took.observe(t0.elapsed().as_secs_f64());
                }
                Some(None) => {}
                None => {
                    let Ok(permit) = slots.clone().try_acquire_owned() else {
                        self.handler.metrics.rate_limited.inc();
                        continue;
                    };
                    let sock = sock.clone();
                    rt.spawn(async move {
                        if let Some(out) = reply.await
                            && let Err(e) = send_now(&sock, &out, from)
                        {
                            debug!(client = %from, error = %e, "udp send");
                        }
                        drop(permit);
                    });
                }
            }
        }
    }

    /// Serve TCP on `listener` until dropped.
    pub async fn serve_tcp(self: Arc<Self>, listener: TcpListener) {
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

    /// Length-prefixed queries on one connection, each answered as soon
    /// as its answer is ready (RFC 7766 6.2.1.1: a query waiting on an
    /// upstream does not hold up the ones behind it; the client matches
    /// answers by ID). At most [`TCP_PIPELINE`] are in hand at once; past
    /// that the connection is not read until one is answered. A client
    /// silent for [`TCP_IDLE`] (or gone) is read no more, and the answers
    /// still owed to it are written before the close.
    async fn serve_conn(&self, s: TcpStream, from: SocketAddr) {
        let (mut rd, mut wr) = s.into_split();
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(TCP_PIPELINE);
        let writer = tokio::spawn(async move {
            while let Some(framed) = rx.recv().await {
                if wr.write_all(&framed).await.is_err() {
                    return;
                }
            }
        });
        let slots = Arc::new(Semaphore::new(TCP_PIPELINE));
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            let mut len = [0u8; 2];
            match tokio::time::timeout(TCP_IDLE, rd.read_exact(&mut len)).await {
                Ok(Ok(_)) => {}
                _ => break,
            }
            let mut req = vec![0u8; usize::from(u16::from_be_bytes(len))];
            match tokio::time::timeout(TCP_IDLE, rd.read_exact(&mut req)).await {
                Ok(Ok(_)) => {}
                _ => break,
            }
            if !self.limiter.allow(from.ip(), Instant::now()) {
                self.handler.metrics.rate_limited.inc();
                continue;
            }
            let handler = self.handler.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let Some(out) = handler.handle(&req, Transport::Tcp).await else {
                    return;
                };
                let Ok(n) = u16::try_from(out.len()) else {
                    return;
                };
                let mut framed = Vec::with_capacity(out.len() + 2);
                framed.extend_from_slice(&n.to_be_bytes());
                framed.extend_from_slice(&out);
                let _ = tx.send(framed).await;
            });
        }
        // The writer ends once every answer in hand has been sent.
        drop(tx);
        let _ = writer.await;
    }
}
