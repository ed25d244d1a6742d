//! The UDP sockets: several bound to one address with `SO_REUSEPORT`, so
//! the kernel spreads clients over them (by their address and port) and
//! each is read by its own task, on its own core. The kernel groups only
//! sockets of the same user, so no other user's process can join.

use std::io;
use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;

fn one(addr: SocketAddr) -> io::Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    UdpSocket::from_std(s.into())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sockets_share_one_port_and_none_loses_a_datagram() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let socks = bind_udp("127.0.0.1:0".parse().unwrap(), 3).unwrap();
        let addr = socks[0].local_addr().unwrap();
        assert!(socks.iter().all(|s| s.local_addr().unwrap() == addr));
        let got = Arc::new(AtomicUsize::new(0));
        for s in socks {
            let got = got.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 8];
                while s.recv_from(&mut buf).await.is_ok() {
                    got.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // Clients on many ports: the kernel hashes them over the sockets;
        // every datagram arrives on one of them.
        for _ in 0..64 {
            let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"x", addr).unwrap();
        }
        let wait = async {
            while got.load(Ordering::SeqCst) < 64 {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), wait)
            .await
            .expect("every datagram received");
    }

    #[test]
    fn a_taken_port_of_another_kind_is_refused() {
        // A plain socket (no SO_REUSEPORT) holds the port: no group joins it.
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(bind_udp(plain.local_addr().unwrap(), 2).is_err());
    }
}
