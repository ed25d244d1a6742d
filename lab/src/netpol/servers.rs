//! Servers in a pod: TCP and UDP (and SCTP where the kernel has it) on
//! the given ports, as threads of the test process. The sockets are made
//! in the pod's network namespace by a thread that enters it; the threads
//! that serve them run anywhere (a socket stays in the namespace it was
//! made in). Stream servers write one byte to each connection and close
//! it; UDP servers echo each datagram. Everything stops when the guard is
//! dropped.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use socket2::Socket;

use super::probe::{Protocol, enter_netns, new_socket};

/// How often a serving thread looks at the stop flag.
const TICK: Duration = Duration::from_millis(100);

/// The servers of one pod; dropping the guard stops and joins them.
#[derive(Debug)]
pub struct Servers {
    netns: String,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    /// Listens on every port in `ports` with every protocol in `protos`
    /// inside the namespace `netns`.
    pub fn start(netns: &str, ports: &[u16], protos: &[Protocol]) -> Result<Servers> {
        let name = netns.to_string();
        let wanted: Vec<(u16, Protocol)> = ports
            .iter()
            .flat_map(|p| protos.iter().map(move |q| (*p, *q)))
            .collect();
        let sockets = std::thread::spawn(move || -> Result<Vec<(u16, Protocol, Socket)>> {
            enter_netns(&name)?;
            wanted
                .into_iter()
                .map(|(port, proto)| Ok((port, proto, listen(port, proto)?)))
                .collect()
        })
        .join()
        .map_err(|_| anyhow!("the thread opening the servers of {netns} panicked"))?
        .with_context(|| format!("servers in {netns}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut servers = Servers {
            netns: netns.to_string(),
            stop: stop.clone(),
            threads: vec![],
        };
        for (port, proto, sock) in sockets {
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                // `<netns>:<port><t|u|s>`: unique in the process, at most 15
                // characters for the names the lab's namespaces have.
                .name(format!("{netns}:{port}{}", &proto.lower()[..1]))
                .spawn(move || match proto {
                    Protocol::Udp => echo(sock, &stop),
                    Protocol::Tcp | Protocol::Sctp => accept_loop(sock, &stop),
                })
                .context("spawn a server thread")?;
            servers.threads.push(t);
        }
        Ok(servers)
    }

    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// Stops every serving thread and waits for it (at most a tick).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A socket bound to `0.0.0.0:port`, listening for streams; its reads (and
/// accepts) time out after a tick so that the thread sees the stop flag.
fn listen(port: u16, proto: Protocol) -> Result<Socket> {
    let s = new_socket(proto).with_context(|| format!("{proto} socket"))?;
    s.set_reuse_address(true)?;
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
    s.bind(&addr.into())
        .with_context(|| format!("bind {proto} port {port}"))?;
    if proto != Protocol::Udp {
        s.listen(128)
            .with_context(|| format!("listen on {proto} port {port}"))?;
    }
    // SO_RCVTIMEO also bounds accept() on Linux.
    s.set_read_timeout(Some(TICK))?;
    Ok(s)
}

fn accept_loop(sock: Socket, stop: &AtomicBool) {
    use std::io::Write;
    while !stop.load(Ordering::Relaxed) {
        if let Ok((conn, _)) = sock.accept() {
            let _ = conn.set_write_timeout(Some(TICK));
            let _ = (&conn).write_all(b"1");
        }
    }
}

fn echo(sock: Socket, stop: &AtomicBool) {
    let sock: std::net::UdpSocket = sock.into();
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(&buf[..n], from);
        }
    }
}
