//! The UDP sockets: several bound to one address with `SO_REUSEPORT`, so
//! the kernel spreads clients over them (by their address and port) and
//! each is read by its own thread, on its own core. The kernel groups only
//! sockets of the same user, so no other user's process can join.
//!
//! The sockets are blocking (each has a thread of its own, which sleeps in
//! the kernel until a datagram comes, as dnsmasq's loop does), with a
//! receive timeout so that the thread notices when it is told to stop.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// How often a receiving thread looks whether it should stop.
pub const STOP_POLL: Duration = Duration::from_millis(200);

fn one(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_read_timeout(Some(STOP_POLL))?;
    s.bind(&addr.into())?;
    Ok(s.into())
}

/// `count` (at least one) UDP sockets on `addr`; a port of 0 is chosen by
/// the kernel for the first and shared by the rest.
pub fn bind_udp(addr: SocketAddr, count: usize) -> io::Result<Vec<UdpSocket>> {
    let first = one(addr)?;
    let bound = first.local_addr()?;
    let mut out = vec![first];
    for _ in 1..count.max(1) {
        out.push(one(bound)?);
    }
    Ok(out)
}

/// Send a datagram without waiting: from a task that must not block, a
/// reply that finds the socket's buffer full is dropped (the client asks
/// again).
pub fn send_now(sock: &UdpSocket, out: &[u8], to: SocketAddr) -> io::Result<usize> {
    SockRef::from(sock).send_to_with_flags(out, &to.into(), libc::MSG_DONTWAIT)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use super::*;

    #[test]
    fn sockets_share_one_port_and_none_loses_a_datagram() {
        let socks = bind_udp("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let addr = socks[0].local_addr().unwrap();
        assert!(socks.iter().all(|s| s.local_addr().unwrap() == addr));
        let got = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = socks
            .into_iter()
            .map(|s| {
                let got = got.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 8];
                    let end = Instant::now() + Duration::from_secs(10);
                    while got.load(Ordering::SeqCst) < 64 && Instant::now() < end {
                        if s.recv_from(&mut buf).is_ok() {
                            got.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        // Clients on many ports: the kernel hashes them over the sockets;
        // every datagram arrives on one of them.
        for _ in 0..64 {
            let c = UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"x", addr).unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(got.load(Ordering::SeqCst), 64, "every datagram received");
    }

    #[test]
    fn a_taken_port_of_another_kind_is_refused() {
        // A plain socket (no SO_REUSEPORT) holds the port: no group joins it.
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(bind_udp(plain.local_addr().unwrap(), 2).is_err());
    }

    #[test]
    fn a_receive_wakes_up_to_look_for_the_stop() {
        let s = bind_udp("127.0.0.1:0".parse().unwrap(), 1).unwrap();
        let mut buf = [0u8; 8];
        let e = s[0].recv_from(&mut buf).unwrap_err();
        assert!(matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(send_now(&c, b"hi", s[0].local_addr().unwrap()).unwrap(), 2);
        assert_eq!(s[0].recv_from(&mut buf).unwrap().0, 2);
    }
}
