//! How a forwarded question reaches an upstream server and what comes
//! back, as bytes: [`Network`] (UDP and TCP sockets) in production, and
//! [`Scripted`] replies for tests and fuzzing, so that any bytes at all can
//! be the upstream's reply. Deciding which reply is the answer (ID,
//! question, TC) is the forwarder's job, not this one's.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Mutex;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, stream};
use hickory_proto::op::Message;
use hickory_proto::serialize::binary::BinEncodable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

pub trait Upstream: Send + Sync {
    /// `query` sent over UDP to `to`: every datagram that comes back, in
    /// order, for as long as the caller reads them.
    fn udp<'a>(&'a self, to: SocketAddr, query: &'a [u8])
    -> BoxStream<'a, Result<Vec<u8>, String>>;

    /// `query` sent over TCP to `to`: the message that comes back.
    fn tcp<'a>(&'a self, to: SocketAddr, query: &'a [u8])
    -> BoxFuture<'a, Result<Vec<u8>, String>>;
}

/// The real upstreams: a new UDP socket (a random port) per question, a
/// new TCP connection per retry.
pub struct Network;

impl Upstream for Network {
    fn udp<'a>(
        &'a self,
        to: SocketAddr,
        query: &'a [u8],
    ) -> BoxStream<'a, Result<Vec<u8>, String>> {
        let open = async move {
            let any: SocketAddr = if to.is_ipv4() {
                "0.0.0.0:0".parse().expect("address")
            } else {
                "[::]:0".parse().expect("address")
            };
            let sock = UdpSocket::bind(any).await?;
            // Connected: datagrams from other addresses are not read.
            sock.connect(to).await?;
            sock.send(query).await?;
            Ok::<_, std::io::Error>(sock)
        };
        stream::once(open)
            .flat_map(|opened| match opened {
                Err(e) => stream::iter([Err(e.to_string())]).boxed(),
                Ok(sock) => stream::unfold((sock, vec![0u8; 65535]), |(sock, mut buf)| async {
                    let r = match sock.recv(&mut buf).await {
                        Ok(n) => Ok(buf[..n].to_vec()),
                        Err(e) => Err(e.to_string()),
                    };
                    Some((r, (sock, buf)))
                })
                .boxed(),
            })
            .boxed()
    }

    fn tcp<'a>(
        &'a self,
        to: SocketAddr,
        query: &'a [u8],
    ) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        async move {
            let len = u16::try_from(query.len()).map_err(std::io::Error::other)?;
            let mut tcp = TcpStream::connect(to).await?;
            tcp.write_all(&len.to_be_bytes()).await?;
            tcp.write_all(query).await?;
            let mut lb = [0u8; 2];
            tcp.read_exact(&mut lb).await?;
            let mut body = vec![0u8; usize::from(u16::from_be_bytes(lb))];
            tcp.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(body)
        }
        .map(|r| r.map_err(|e| e.to_string()))
        .boxed()
    }
}

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct ScriptedReply {
    /// The reply, except that its ID (bytes 0 and 1) is XORed with the
    /// query's: a reply written with ID 0 answers whatever ID the
    /// forwarder chose (at random), any other is a wrong one.
    pub bytes: Vec<u8>,
    /// Whether the query's question is put after the reply's header
    /// (which should then count one question), as the upstream would copy
    /// it: so that a fuzzer need not guess it.
    pub question: bool,
}

/// What was sent and what was read back, for a test to check.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub tcp: bool,
    pub query: Vec<u8>,
    /// The reply as the forwarder read it (ID and question filled in).
    pub reply: Vec<u8>,
}

/// Replies in a queue, whatever was asked and how: each UDP datagram or
/// TCP message the forwarder reads is the next one. When none is left,
/// UDP goes quiet (as after a lost datagram: the stream ends) and TCP
/// fails.
#[derive(Default)]
pub struct Scripted {
    replies: Mutex<VecDeque<ScriptedReply>>,
    exchanges: Mutex<Vec<Exchange>>,
}

impl Scripted {
    pub fn new(replies: impl IntoIterator<Item = ScriptedReply>) -> Scripted {
        Scripted {
            replies: Mutex::new(replies.into_iter().collect()),
            exchanges: Mutex::new(Vec::new()),
        }
    }

    /// Every reply read so far, with the query it was read for.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn next(&self, query: &[u8], tcp: bool) -> Option<Vec<u8>> {
        let r = self
            .replies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()?;
        let mut bytes = r.bytes;
        for i in 0..2 {
            if let (Some(b), Some(q)) = (bytes.get_mut(i), query.get(i)) {
                *b ^= q;
            }
        }
        if r.question && bytes.len() >= 12 {
            let question = Message::from_vec(query)
                .ok()
                .and_then(|m| m.queries.first().and_then(|q| q.to_bytes().ok()));
            if let Some(q) = question {
                bytes.splice(12..12, q);
            }
        }
        self.exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Exchange {
                tcp,
                query: query.to_vec(),
                reply: bytes.clone(),
            });
        Some(bytes)
    }
}

impl Upstream for Scripted {
    fn udp<'a>(
        &'a self,
        _to: SocketAddr,
        query: &'a [u8],
    ) -> BoxStream<'a, Result<Vec<u8>, String>> {
        stream::iter(std::iter::from_fn(move || self.next(query, false)).map(Ok)).boxed()
    }

    fn tcp<'a>(
        &'a self,
        _to: SocketAddr,
        query: &'a [u8],
    ) -> BoxFuture<'a, Result<Vec<u8>, String>> {
        let r = self
            .next(query, true)
            .ok_or_else(|| "no scripted reply left".to_string());
        futures::future::ready(r).boxed()
    }
}
