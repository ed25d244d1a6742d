//! Traffic for Service tests: servers in pods that answer with the pod's
//! name and the client address they see (so a test knows which endpoint
//! it reached, and whether the client's address survived); clients that
//! ask through a Service from any namespace, one at a time or many at
//! once; a long TCP stream; a host outside the cluster on a lab's
//! underlay. Sockets are made by threads that enter the namespace; every
//! thread and namespace goes with its guard.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use ipnet::Ipv4Net;
use socket2::{Domain, Socket, Type};

use super::state::LabState;
use crate::netns::{Netns, ip, unique_name};
use crate::netpol::probe::enter_netns;

/// How often a serving thread looks at its stop flag.
const TICK: Duration = Duration::from_millis(100);

/// TCP or UDP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Udp,
}

/// Servers in one pod; dropping the guard stops and joins every thread.
pub struct NameServers {
    stop: Arc<AtomicBool>,
    threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Runs `f` on a thread inside `netns`, for making sockets there.
fn in_netns<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let name = netns.to_string();
    std::thread::spawn(move || {
        enter_netns(&name)?;
        f()
    })
    .join()
    .map_err(|_| anyhow!("a thread in {netns} panicked"))?
}

/// A socket bound to `any` (IPv6 ones for IPv6 alone, so that an IPv4
/// socket on the same port stays apart).
fn bound(any: IpAddr, port: u16, ty: Type) -> Result<Socket> {
    let domain = if any.is_ipv6() {
        Domain::IPV6
    } else {
        Domain::IPV4
    };
    let s = Socket::new(domain, ty, None)?;
    if any.is_ipv6() {
        s.set_only_v6(true)?;
    }
    if ty == Type::STREAM {
        s.set_reuse_address(true)?;
    }
    let what = if ty == Type::STREAM { "TCP" } else { "UDP" };
    s.bind(&SocketAddr::from((any, port)).into())
        .with_context(|| format!("bind {what} {any} {port}"))?;
    Ok(s)
}

impl NameServers {
    /// Listens on `0.0.0.0` in `netns`: TCP `tcp` ports answer each
    /// connection with `"<name> <client address>\n"` and then echo what
    /// they get until the client closes; UDP `udp` ports answer each
    /// datagram with `"<name> <client address>"`.
    pub fn start(netns: &str, name: &str, tcp: &[u16], udp: &[u16]) -> Result<NameServers> {
        NameServers::start_on(netns, name, tcp, udp, &[Ipv4Addr::UNSPECIFIED.into()])
    }

    /// [`NameServers::start`] on `0.0.0.0` and `::` alike (a dual-stack
    /// pod's servers).
    pub fn start_dual(netns: &str, name: &str, tcp: &[u16], udp: &[u16]) -> Result<NameServers> {
        let any = [Ipv4Addr::UNSPECIFIED.into(), Ipv6Addr::UNSPECIFIED.into()];
        NameServers::start_on(netns, name, tcp, udp, &any)
    }

    fn start_on(
        netns: &str,
        name: &str,
        tcp: &[u16],
        udp: &[u16],
        any: &[IpAddr],
    ) -> Result<NameServers> {
        let (tcp_ports, udp_ports, any) = (tcp.to_vec(), udp.to_vec(), any.to_vec());
        let (listeners, sockets) = in_netns(netns, move || {
            let mut ls = vec![];
            let mut us = vec![];
            for a in any {
                for p in &tcp_ports {
                    let s = bound(a, *p, Type::STREAM)?;
                    s.listen(128)?;
                    s.set_read_timeout(Some(TICK))?;
                    ls.push(s);
                }
                for p in &udp_ports {
                    let s: UdpSocket = bound(a, *p, Type::DGRAM)?.into();
                    s.set_read_timeout(Some(TICK))?;
                    us.push(s);
                }
            }
            Ok((ls, us))
        })
        .with_context(|| format!("servers in {netns}"))?;
        let servers = NameServers {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Arc::new(Mutex::new(vec![])),
        };
        for l in listeners {
            let (stop, threads, name) = (
                servers.stop.clone(),
                servers.threads.clone(),
                name.to_string(),
            );
            let t = std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((conn, peer)) = l.accept() else {
                        continue;
                    };
                    let (stop, name) = (stop.clone(), name.clone());
                    let client = peer.as_socket().map(|a| a.ip());
                    let h =
                        std::thread::spawn(move || serve_stream(conn.into(), client, &name, &stop));
                    if let Ok(mut v) = threads.lock() {
                        v.push(h);
                    }
                }
            });
            servers.push(t);
        }
        for u in sockets {
            let (stop, name) = (servers.stop.clone(), name.to_string());
            let t = std::thread::spawn(move || {
                let mut buf = [0u8; 1500];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((_, from)) = u.recv_from(&mut buf) {
                        let _ = u.send_to(format!("{name} {}", from.ip()).as_bytes(), from);
                    }
                }
            });
            servers.push(t);
        }
        Ok(servers)
    }

    fn push(&self, t: JoinHandle<()>) {
        if let Ok(mut v) = self.threads.lock() {
            v.push(t);
        }
    }
}

fn serve_stream(mut conn: TcpStream, client: Option<IpAddr>, name: &str, stop: &AtomicBool) {
    let _ = conn.set_read_timeout(Some(TICK));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    let client = client.map(|c| c.to_string()).unwrap_or_default();
    if conn
        .write_all(format!("{name} {client}\n").as_bytes())
        .is_err()
    {
        return;
    }
    let mut buf = [0u8; 16 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

impl Drop for NameServers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Connection threads may be added while the acceptors stop: join
        // until none is left.
        loop {
            let batch: Vec<JoinHandle<()>> = match self.threads.lock() {
                Ok(mut v) => v.drain(..).collect(),
                Err(_) => return,
            };
            if batch.is_empty() {
                return;
            }
            for t in batch {
                let _ = t.join();
            }
        }
    }
}

/// What one request through a Service got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Served by `server`, which saw the client as `client`.
    Answer { server: String, client: String },
    /// Connection refused (TCP reset, or ICMP port unreachable for UDP).
    Refused,
    /// No answer in time.
    TimedOut,
    /// Anything else (unreachable, a harness fault).
    Failed(String),
}

impl Outcome {
    /// The server that answered, if one did.
    pub fn server(&self) -> Option<&str> {
        match self {
            Outcome::Answer { server, .. } => Some(server),
            _ => None,
        }
    }
}

fn answer(text: &str) -> Outcome {
    let mut parts = text.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some(s), Some(c)) => Outcome::Answer {
            server: s.into(),
            client: c.into(),
        },
        _ => Outcome::Failed(format!("unexpected answer {text:?}")),
    }
}

fn io_outcome(e: &std::io::Error) -> Outcome {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => Outcome::Refused,
        K::TimedOut | K::WouldBlock => Outcome::TimedOut,
        _ => Outcome::Failed(e.to_string()),
    }
}

/// One request from the calling thread's namespace, to an IPv4 or IPv6
/// address.
pub fn attempt(to: impl Into<IpAddr>, port: u16, proto: Proto, timeout: Duration) -> Outcome {
    let addr = SocketAddr::from((to.into(), port));
    match proto {
        Proto::Tcp => {
            let mut s = match TcpStream::connect_timeout(&addr, timeout) {
                Ok(s) => s,
                Err(e) => return io_outcome(&e),
            };
            let _ = s.set_read_timeout(Some(timeout));
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while line.len() < 200 {
                match s.read(&mut b) {
                    Ok(1) if b[0] == b'\n' => break,
                    Ok(1) => line.push(b[0]),
                    Ok(_) => break,
                    Err(e) => return io_outcome(&e),
                }
            }
            answer(&String::from_utf8_lossy(&line))
        }
        Proto::Udp => {
            let any: IpAddr = if addr.is_ipv6() {
                Ipv6Addr::UNSPECIFIED.into()
            } else {
                Ipv4Addr::UNSPECIFIED.into()
            };
            let s = match UdpSocket::bind((any, 0)) {
                Ok(s) => s,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            let _ = s.set_read_timeout(Some(timeout));
            if let Err(e) = s.connect(addr).and_then(|()| s.send(b"?").map(|_| ())) {
                return io_outcome(&e);
            }
            let mut b = [0u8; 200];
            match s.recv(&mut b) {
                Ok(n) => answer(&String::from_utf8_lossy(&b[..n])),
                Err(e) => io_outcome(&e),
            }
        }
    }
}

/// One request from `netns`, and how long it took.
pub fn ask(
    netns: &str,
    to: impl Into<IpAddr>,
    port: u16,
    proto: Proto,
    timeout: Duration,
) -> (Outcome, Duration) {
    let name = netns.to_string();
    let to: IpAddr = to.into();
    std::thread::spawn(move || {
        if let Err(e) = enter_netns(&name) {
            return (Outcome::Failed(format!("{e:#}")), Duration::ZERO);
        }
        let t0 = Instant::now();
        let o = attempt(to, port, proto, timeout);
        (o, t0.elapsed())
    })
    .join()
    .unwrap_or((Outcome::Failed("thread panicked".into()), Duration::ZERO))
}

/// `count` requests from each namespace in `from`, all at once; the
/// outcomes per namespace, in the order given.
pub fn ask_many(
    from: &[String],
    count: usize,
    to: impl Into<IpAddr>,
    port: u16,
    proto: Proto,
    timeout: Duration,
) -> Vec<Vec<Outcome>> {
    let to: IpAddr = to.into();
    std::thread::scope(|s| {
        let handles: Vec<Vec<_>> = from
            .iter()
            .map(|ns| {
                (0..count)
                    .map(|_| {
                        s.spawn(move || match enter_netns(ns) {
                            Ok(()) => attempt(to, port, proto, timeout),
                            Err(e) => Outcome::Failed(format!("{e:#}")),
                        })
                    })
                    .collect()
            })
            .collect();
        handles
            .into_iter()
            .map(|hs| {
                hs.into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Outcome::Failed("thread panicked".into()))
                    })
                    .collect()
            })
            .collect()
    })
}

/// A TCP connection through a Service to a [`NameServers`] server, which
/// echoes.
pub struct Stream {
    sock: TcpStream,
    /// The server's greeting: its name and the client address it saw.
    pub server: String,
    pub client: String,
}

impl Stream {
    pub fn open(netns: &str, to: impl Into<IpAddr>, port: u16) -> Result<Stream> {
        let to: IpAddr = to.into();
        let sock = in_netns(netns, move || {
            Ok(TcpStream::connect_timeout(
                &SocketAddr::from((to, port)),
                Duration::from_secs(2),
            )?)
        })
        .with_context(|| format!("connect to {to}:{port} from {netns}"))?;
        sock.set_read_timeout(Some(Duration::from_secs(2)))?;
        sock.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while (&sock).read(&mut b)? == 1 && b[0] != b'\n' {
            line.push(b[0]);
        }
        match answer(&String::from_utf8_lossy(&line)) {
            Outcome::Answer { server, client } => Ok(Stream {
                sock,
                server,
                client,
            }),
            other => bail!("no greeting from {to}:{port}: {other:?}"),
        }
    }

    /// Sends `data` and reads it back.
    pub fn echo(&mut self, data: &[u8]) -> Result<()> {
        self.sock.write_all(data).context("send")?;
        let mut back = vec![0u8; data.len()];
        self.sock.read_exact(&mut back).context("read the echo")?;
        if back != data {
            bail!("the echo differs from what was sent");
        }
        Ok(())
    }
}

/// A host outside the cluster on the lab's underlay: its own namespace
/// with an address on the lab's bridge. Removed with the guard.
pub struct OutsideHost {
    pub netns: Netns,
    pub address: Ipv4Addr,
}

impl OutsideHost {
    /// Attaches a host at the underlay's address `.<host>` (pick one the
    /// nodes do not use: they count up from .2, the ToR takes the last).
    pub fn attach(st: &LabState, host: u32) -> Result<OutsideHost> {
        let subnet: Ipv4Net = st.subnet.parse()?;
        let address = Ipv4Addr::from(u32::from(subnet.network()) + host);
        if !subnet.contains(&address) || st.nodes.iter().any(|n| n.address == address) {
            bail!("{address} is not a free address of the underlay {subnet}");
        }
        let netns = Netns::new("svcout")?;
        let outside = unique_name("svo");
        crate::netns::veth_eth0(None, &outside, netns.name())?;
        let attached = ip(&["link", "set", &outside, "master", &st.bridge, "up"]);
        if let Err(e) = attached {
            let _ = ip(&["link", "del", &outside]);
            return Err(e);
        }
        netns.ip(&[
            "addr",
            "add",
            &format!("{address}/{}", subnet.prefix_len()),
            "dev",
            "eth0",
        ])?;
        netns.ip(&["link", "set", "eth0", "up"])?;
        Ok(OutsideHost { netns, address })
    }

    pub fn name(&self) -> &str {
        self.netns.name()
    }
}

/// `nft list table ip tartan-svc` in a node's namespace.
pub fn svc_table(st: &LabState, node: &str) -> Result<String> {
    svc_table_of(st, node, "ip")
}

/// `nft list table <family> tartan-svc` in a node's namespace (`ip`, or
/// `ip6` for the IPv6 Services).
pub fn svc_table_of(st: &LabState, node: &str, family: &str) -> Result<String> {
    let n = st.node(node)?;
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &n.netns,
            "nft",
            "list",
            "table",
            family,
            "tartan-svc",
        ])
        .output()?;
    if !out.status.success() {
        bail!(
            "nft list table {family} tartan-svc in {node}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Polls `f` every 100 ms until it is `Some` or `timeout` passes.
pub fn poll<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
