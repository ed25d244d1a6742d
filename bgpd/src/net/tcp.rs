use super::sockopt::{set_md5, set_min_ttl, set_ttl};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// How a session's packets are sent and which are accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlPolicy {
    /// TTL of outgoing packets.
    pub ttl: u8,
    /// RFC 5082: the lowest TTL accepted, when TTL security is on.
    pub min_ttl: Option<u8>,
}

impl TtlPolicy {
    /// `hops` is how far the peer may be (1: directly connected).
    pub fn new(hops: u8, ttl_security: bool) -> TtlPolicy {
        if ttl_security {
            TtlPolicy {
                ttl: 255,
                min_ttl: Some(255u8.saturating_sub(hops.saturating_sub(1))),
            }
        } else {
            TtlPolicy {
                ttl: hops,
                min_ttl: None,
            }
        }
    }

    pub fn apply(&self, fd: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
        set_ttl(fd, self.ttl)?;
        if let Some(min) = self.min_ttl {
            set_min_ttl(fd, min)?;
        }
        Ok(())
    }
}

/// Dials a peer with the key and TTL set before the SYN leaves.
pub async fn dial(
    peer: SocketAddr,
    local: Option<IpAddr>,
    md5: Option<&str>,
    ttl: TtlPolicy,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let socket = if peer.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(key) = md5 {
        set_md5(socket.as_fd(), peer.ip(), Some(key.as_bytes()))?;
    }
    ttl.apply(socket.as_fd())?;
    if let Some(local) = local {
        socket.bind(SocketAddr::new(local, 0))?;
    }
    let stream = tokio::time::timeout(timeout, socket.connect(peer))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Binds a listening socket. An IPv6 wildcard listens dual-stack, so one
/// socket serves IPv4 peers too.
pub fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let domain = if addr.is_ipv4() {
        socket2::Domain::IPV4
    } else {
        socket2::Domain::IPV6
    };
    let s = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    if addr.is_ipv6() {
        s.set_only_v6(false)?;
    }
    s.set_reuse_address(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(128)?;
    TcpListener::from_std(s.into())
}
