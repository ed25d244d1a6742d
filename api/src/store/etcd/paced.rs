//! A connection for watches of kinds that change all the time without
//! mattering much: Nodes, whose status every kubelet posts every few
//! seconds (500 puts a second in a 5,000-node cluster). Each put reaches
//! every watching agent as its own small message, and what an agent spends
//! on it is mostly being woken and receiving it, not reading it. On this
//! connection, once the socket has been read empty, it is not read again
//! for [`PACE`]: what arrives meanwhile waits in the kernel and is read
//! together, so a watcher wakes about twice a pace instead of once a put.
//! A change reaches the agent at most [`PACE`] later.
//!
//! Each watch opens a connection of its own and closes it with the watch,
//! so a watch that ends on a failed member resumes on the next one.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tonic::transport::{Endpoint, Uri};

use crate::store::{Result, StoreError};

/// How long a read empty socket is left before it is read again.
pub(super) const PACE: Duration = Duration::from_millis(50);

/// A stream whose reads, once they have found the socket empty after
/// reading something, wait `pace` before reading again.
pub(super) struct Paced<S> {
    inner: S,
    pace: Duration,
    /// Something was read since the socket was last found empty.
    read_some: bool,
    hold: Option<Pin<Box<Sleep>>>,
}

impl<S> Paced<S> {
    pub(super) fn new(inner: S, pace: Duration) -> Self {
        Paced {
            inner,
            pace,
            read_some: false,
            hold: None,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Paced<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if let Some(hold) = me.hold.as_mut() {
            ready!(hold.as_mut().poll(cx));
            me.hold = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut me.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    me.read_some = true;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if me.read_some => {
                // Read empty after a batch: rest, woken by the timer (or
                // once by the socket, which then finds the rest still on).
                me.read_some = false;
                let mut hold = Box::pin(tokio::time::sleep(me.pace));
                if hold.as_mut().poll(cx).is_pending() {
                    me.hold = Some(hold);
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Paced<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Which endpoint the next paced connection tries first: each in turn, so
/// that a watch ended by one member's failure resumes on another.
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A client of its own over a paced connection to the first of `urls`
/// (plain `http://` ones; `None` when there is none) that answers, taking
/// them in turn from the one after the last used.
pub(super) async fn connect(
    urls: &[String],
    connect_timeout: Duration,
    keep_alive: (Duration, Duration),
    require_leader: bool,
) -> Option<Result<Client>> {
    let plain: Vec<&String> = urls.iter().filter(|u| u.starts_with("http://")).collect();
    if plain.is_empty() {
        return None;
    }
    let first = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut last = String::new();
    for i in 0..plain.len() {
        let url = plain[(first + i) % plain.len()];
        let endpoint = match Endpoint::from_shared(url.clone()) {
            Ok(e) => e,
            Err(e) => {
                last = format!("{url}: {e}");
                continue;
            }
        }
        .connect_timeout(connect_timeout)
        .http2_keep_alive_interval(keep_alive.0)
        .keep_alive_timeout(keep_alive.1)
        .keep_alive_while_idle(true);
        let connector = tower::service_fn(|uri: Uri| async move {
            let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
            let port = uri.port_u16().unwrap_or(2379);
            let tcp = TcpStream::connect((host, port)).await?;
            tcp.set_nodelay(true)?;
            Ok::<_, io::Error>(TokioIo::new(Paced::new(tcp, PACE)))
        });
        match endpoint.connect_with_connector(connector).await {
            Ok(channel) => {
                let opts = ConnectOptions::new().with_require_leader(require_leader);
                return Some(
                    Client::from_channel(etcd_client::Channel::Tonic(channel), Some(opts))
                        .await
                        .map_err(super::map_err),
                );
            }
            Err(e) => last = format!("{url}: {e}"),
        }
    }
    Some(Err(StoreError::Unavailable(format!(
        "no etcd endpoint answered: {last}"
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Writes arriving while the reader rests are read together after the
    /// pace; a write after a quiet spell is read at once.
    #[tokio::test(start_paused = true)]
    async fn reads_after_a_batch_wait_the_pace() {
        let (mut tx, rx) = tokio::io::duplex(1 << 16);
        let mut rx = Paced::new(rx, Duration::from_millis(50));
        let t0 = tokio::time::Instant::now();
        let writer = tokio::spawn(async move {
            for _ in 0..20 {
                tx.write_all(b"x").await.unwrap();
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            // A quiet spell, then one more.
            tokio::time::sleep(Duration::from_millis(500)).await;
            tx.write_all(b"y").await.unwrap();
            tx
        });
        let mut reads = Vec::new();
        let mut got = 0;
        let mut buf = [0u8; 64];
        while got < 21 {
            let n = rx.read(&mut buf).await.unwrap();
            got += n;
            reads.push((t0.elapsed(), n));
        }
        drop(writer.await.unwrap());
        // The first byte at once; the other 19 (40 ms of writes) in one
        // read after the pace; the late one as soon as it came.
        assert_eq!(reads[0], (Duration::ZERO, 1), "{reads:?}");
        assert_eq!(reads[1], (Duration::from_millis(50), 19), "{reads:?}");
        assert_eq!(reads.len(), 3, "{reads:?}");
        assert_eq!(reads[2].1, 1);
        assert!(
            reads[2].0 >= Duration::from_millis(538) && reads[2].0 < Duration::from_millis(545),
            "{reads:?}"
        );
    }

    /// Writing is never held.
    #[tokio::test(start_paused = true)]
    async fn writes_pass_at_once() {
        let (a, mut b) = tokio::io::duplex(1 << 16);
        let mut a = Paced::new(a, Duration::from_secs(10));
        let t0 = tokio::time::Instant::now();
        for _ in 0..3 {
            a.write_all(b"ab").await.unwrap();
            let mut two = [0u8; 2];
            b.read_exact(&mut two).await.unwrap();
        }
        assert_eq!(t0.elapsed(), Duration::ZERO);
    }
}
