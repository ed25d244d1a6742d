//! The UDP sockets of BFD: one receiving socket per address family on port
//! 3784 for single hop (RFC 5881) and one on 4784 for multihop (RFC 5883),
//! each reporting a packet's TTL (hop limit) and destination address, and
//! one sending socket per session from a source port in 49152–65535 with
//! TTL 255; and the runtime's wait for any of its descriptors.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, SockaddrStorage, sockopt};
use socket2::{Domain, Protocol, Socket, Type};

/// The single-hop Control packet port (RFC 5881 section 4).
pub const CONTROL_PORT: u16 = 3784;
/// The multihop Control packet port (RFC 5883 section 5).
pub const MULTIHOP_CONTROL_PORT: u16 = 4784;
/// The TTL (hop limit) sent and required on receipt (RFC 5881 section 5).
pub const GTSM_TTL: u8 = 255;
const SOURCE_PORTS: std::ops::RangeInclusive<u16> = 49152..=65535;

/// The receiving socket of one address family, bound to a Control port,
/// reporting the TTL and the destination address of each packet.
pub fn bind_receiver(v6: bool, port: u16) -> io::Result<UdpSocket> {
    let (domain, addr) = if v6 {
        (
            Domain::IPV6,
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port),
        )
    } else {
        (
            Domain::IPV4,
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port),
        )
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if v6 {
        s.set_only_v6(true)?;
        socket::setsockopt(&s, sockopt::Ipv6RecvHopLimit, &true).map_err(io::Error::from)?;
        socket::setsockopt(&s, sockopt::Ipv6RecvPacketInfo, &true).map_err(io::Error::from)?;
    } else {
        socket::setsockopt(&s, sockopt::Ipv4RecvTtl, &true).map_err(io::Error::from)?;
        socket::setsockopt(&s, sockopt::Ipv4PacketInfo, &true).map_err(io::Error::from)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// One received datagram: payload length, source, TTL (None when the
/// kernel did not report it, which fails the GTSM check) and the address
/// it was sent to (None when not reported).
pub struct Received {
    pub len: usize,
    pub from: SocketAddr,
    pub ttl: Option<u8>,
    pub to: Option<IpAddr>,
}

/// Receive one datagram without blocking (`WouldBlock` when there is none).
pub fn recv(sock: &impl AsFd, buf: &mut [u8]) -> io::Result<Received> {
    let mut iov = [io::IoSliceMut::new(buf)];
    let mut cmsg = nix::cmsg_space!(libc::c_int, libc::in6_pktinfo);
    let msg = socket::recvmsg::<SockaddrStorage>(
        sock.as_fd().as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_DONTWAIT,
    )
    .map_err(io::Error::from)?;
    let mut ttl = None;
    let mut to = None;
    for c in msg.cmsgs().map_err(io::Error::from)? {
        match c {
            ControlMessageOwned::Ipv4Ttl(t) => ttl = u8::try_from(t).ok(),
            ControlMessageOwned::Ipv6HopLimit(t) => ttl = u8::try_from(t).ok(),
            ControlMessageOwned::Ipv4PacketInfo(i) => {
                to = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(i.ipi_addr.s_addr))));
            }
            ControlMessageOwned::Ipv6PacketInfo(i) => {
                to = Some(IpAddr::V6(Ipv6Addr::from(i.ipi6_addr.s6_addr)).to_canonical());
            }
            _ => {}
        }
    }
    let from = msg
        .address
        .and_then(|a: SockaddrStorage| {
            if let Some(v4) = a.as_sockaddr_in() {
                Some(SocketAddr::from(std::net::SocketAddrV4::from(*v4)))
            } else {
                a.as_sockaddr_in6()
                    .map(|v6| SocketAddr::from(std::net::SocketAddrV6::from(*v6)))
            }
        })
        .ok_or_else(|| io::Error::other("datagram without a source address"))?;
    Ok(Received {
        len: msg.bytes,
        from,
        ttl,
        to,
    })
}

/// A session's sending socket: TTL 255, bound to `local` (or the address
/// the kernel picks) and a free source port of 49152–65535 tried from
/// `start`, connected to the peer's Control port.
pub fn bind_sender(
    peer: IpAddr,
    local: Option<IpAddr>,
    start: u16,
    port: u16,
) -> io::Result<UdpSocket> {
    let domain = if peer.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    crate::net::set_ttl(s.as_fd(), GTSM_TTL)?;
    let local = local.unwrap_or(match peer {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    let span = u32::from(SOURCE_PORTS.end() - SOURCE_PORTS.start()) + 1;
    let mut last = io::Error::other("no source port free");
    for i in 0..64u32 {
        let offset = (u32::from(start) + i * 7919) % span;
        let sport = SOURCE_PORTS.start() + offset as u16;
        match s.bind(&SocketAddr::new(local, sport).into()) {
            Ok(()) => {
                s.set_nonblocking(true)?;
                s.connect(&SocketAddr::new(peer, port).into())?;
                return Ok(s.into());
            }
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Sleep until one of `fds` is readable (or hung up) or `timeout` passes
/// (rounded up to the millisecond, so the wakeup is never early; None:
/// no timeout). An interrupted wait returns as a wakeup.
pub fn wait(fds: &[BorrowedFd<'_>], timeout: Option<Duration>) -> io::Result<()> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let timeout = match timeout {
        None => PollTimeout::NONE,
        Some(t) => {
            let ms = t.as_micros().div_ceil(1000);
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
        }
    };
    match poll(&mut polled, timeout) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
