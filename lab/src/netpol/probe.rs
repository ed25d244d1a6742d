//! Probes: one connection attempt from a client pod's network namespace to
//! a server pod's address, on a thread that enters the client's namespace
//! for the attempt and ends with it; a whole grid of them at once.

use std::fmt;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use anyhow::{Context, Result};
use socket2::{Domain, Protocol as SockProtocol, Socket, Type};

/// How long a TCP or SCTP connect, and the wait for the server's byte or
/// the UDP echo, may take before the probe counts as blocked.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// IPPROTO_SCTP.
const IPPROTO_SCTP: i32 = 132;

/// The transport a probe and a server use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

impl Protocol {
    /// The name Kubernetes uses (`TCP`, `UDP`, `SCTP`).
    pub fn k8s_name(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        }
    }

    /// Lower case, as in the named ports (`serve-80-tcp`).
    pub fn lower(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.k8s_name())
    }
}

/// Whether this kernel can make SCTP sockets; the reason when it cannot.
pub fn sctp_support() -> std::result::Result<(), String> {
    match Socket::new(
        Domain::IPV4,
        Type::STREAM,
        Some(SockProtocol::from(IPPROTO_SCTP)),
    ) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP) fails: {e} (the kernel has no SCTP)"
        )),
    }
}

/// A stream socket (TCP or SCTP) or a datagram socket (UDP) in the
/// calling thread's network namespace.
pub fn new_socket(proto: Protocol) -> std::io::Result<Socket> {
    match proto {
        Protocol::Tcp => Socket::new(Domain::IPV4, Type::STREAM, Some(SockProtocol::TCP)),
        Protocol::Sctp => Socket::new(
            Domain::IPV4,
            Type::STREAM,
            Some(SockProtocol::from(IPPROTO_SCTP)),
        ),
        Protocol::Udp => Socket::new(Domain::IPV4, Type::DGRAM, Some(SockProtocol::UDP)),
    }
}

/// Moves the calling thread into the named network namespace
/// (`/run/netns/NAME`). Only for threads that end afterwards.
pub fn enter_netns(name: &str) -> Result<()> {
    let f = std::fs::File::open(format!("/run/netns/{name}"))
        .with_context(|| format!("open namespace {name}"))?;
    nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)
        .with_context(|| format!("setns into {name}"))?;
    Ok(())
}

/// One attempt, from the calling thread's namespace: true when the server
/// answered (its byte for TCP and SCTP, the echo for UDP). Refusals,
/// timeouts and unreachable errors are `Ok(false)`; an error is a fault of
/// the harness (no socket could be made).
pub fn attempt(to: Ipv4Addr, port: u16, proto: Protocol) -> Result<bool> {
    let addr = SocketAddr::V4(SocketAddrV4::new(to, port));
    match proto {
        Protocol::Tcp | Protocol::Sctp => {
            let s = new_socket(proto).with_context(|| format!("{proto} socket"))?;
            if s.connect_timeout(&addr.into(), PROBE_TIMEOUT).is_err() {
                return Ok(false);
            }
            s.set_read_timeout(Some(PROBE_TIMEOUT))
                .context("set read timeout")?;
            let mut b = [0u8; 1];
            Ok(matches!((&s).read(&mut b), Ok(1)))
        }
        Protocol::Udp => {
            let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).context("UDP socket")?;
            s.set_read_timeout(Some(PROBE_TIMEOUT))
                .context("set read timeout")?;
            if s.connect(addr).is_err() {
                return Ok(false);
            }
            let msg = b"netpol-probe";
            if s.send(msg).is_err() {
                return Ok(false);
            }
            let mut b = [0u8; 64];
            Ok(matches!(s.recv(&mut b), Ok(n) if b[..n] == msg[..]))
        }
    }
}

/// One probe from the namespace `from_netns`, on a thread of its own.
pub fn probe(from_netns: &str, to: Ipv4Addr, port: u16, proto: Protocol) -> Result<bool> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(from_netns)?;
            attempt(to, port, proto)
        })
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("probe thread panicked")))
    })
}

/// Every (client namespace, server address) pair at once, a thread each;
/// the answers in the order given.
pub fn probe_all(pairs: &[(String, Ipv4Addr)], port: u16, proto: Protocol) -> Vec<Result<bool>> {
    std::thread::scope(|s| {
        let handles: Vec<_> = pairs
            .iter()
            .map(|(ns, to)| {
                s.spawn(move || {
                    enter_netns(ns)?;
                    attempt(*to, port, proto)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("probe thread panicked")))
            })
            .collect()
    })
}
