//! The BFD runtime: one thread owns every session, both receiving sockets
//! and a deadline per session, and sleeps in poll(2) until the earliest
//! deadline, a packet or a command. Each wakeup serves everything at once:
//! every queued command, every datagram waiting (read until none is left),
//! every session whose deadline has come, and every periodic packet whose
//! early window has opened (a tenth of its interval before its deadline,
//! `timers::early_window`), so that the packets of many sessions leave in
//! one wakeup. While some deadline is closer than the receive hold (the
//! shortest early window, within [`RECEIVE_HOLD_MIN`] and
//! [`RECEIVE_HOLD_MAX`]) the sockets are not polled: a packet arriving
//! then waits for that wakeup. Many fast sessions thus cost a wakeup every
//! few milliseconds rather than one per packet. Packets are
//! matched to sessions by Your Discriminator, or by the source address while
//! the peer does not know ours yet (RFC 5880 section 6.8.6, RFC 5881
//! section 3), by the source and destination addresses for multihop
//! (RFC 5883 section 4). Single-hop sessions use port 3784, multihop ones
//! port 4784 (RFC 5883 section 5); a packet for one kind of session
//! arriving on the other's port is dropped.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::handle::{BfdHandle, BfdStatus, Command};
use super::hops::Hops;
use super::packet::{ControlPacket, State};
use super::queue::{QueueReceiver, queue};
use super::session::{Session, Transition};
use super::socket::{self, GTSM_TTL};
use crate::control::BfdMetrics;

/// Bounds of the receive hold, the longest a received packet waits for
/// the next deadline's wakeup instead of waking the thread itself: the
/// shortest early window of the sessions (5 ms at 50 ms intervals), at
/// least 2 ms, at most 10 ms. Packets are read before any timer is looked
/// at, so a held packet is never taken for a missing one; only a state
/// change or a Final it brings waits, against detection times of tens of
/// milliseconds and more.
pub const RECEIVE_HOLD_MIN: Duration = Duration::from_millis(2);
pub const RECEIVE_HOLD_MAX: Duration = Duration::from_millis(10);
/// The most datagrams read from one socket in one wakeup, so that a flood
/// cannot hold the timers back.
const RECEIVE_BATCH: usize = 256;

/// Where the runtime listens and sends; the ports differ from the RFC's
/// only in tests.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeOptions {
    /// Single hop (RFC 5881: 3784).
    pub port: u16,
    /// Multihop (RFC 5883: 4784).
    pub multihop_port: u16,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            port: socket::CONTROL_PORT,
            multihop_port: socket::MULTIHOP_CONTROL_PORT,
        }
    }
}

struct Entry {
    session: Session,
    peer: IpAddr,
    local: Option<IpAddr>,
    hops: Hops,
    socket: Option<UdpSocket>,
    clients: Vec<(u64, watch::Sender<BfdStatus>)>,
    transitions: u64,
    metrics: Option<BfdMetrics>,
    port: u16,
}

/// The key of a session while the peer does not know our discriminator:
/// its address, and whether it is multihop (one of each may exist).
type PeerKey = (IpAddr, bool);

struct Runtime {
    sessions: HashMap<u32, Entry>,
    by_peer: HashMap<PeerKey, u32>,
    seed: u64,
    options: RuntimeOptions,
    metrics: Option<Arc<crate::control::Metrics>>,
}

/// A receiving socket and whether it is the multihop one.
struct Receiver {
    socket: UdpSocket,
    multihop: bool,
}

/// Start the runtime: binds port 3784 for IPv4 (required) and IPv6 (when
/// the host has IPv6), port 4784 for multihop (when free: multihop
/// sessions stay Down without it), and starts its thread.
pub fn spawn(
    options: RuntimeOptions,
    metrics: Option<Arc<crate::control::Metrics>>,
) -> io::Result<BfdHandle> {
    let mut receivers = vec![Receiver {
        socket: socket::bind_receiver(false, options.port)?,
        multihop: false,
    }];
    match socket::bind_receiver(true, options.port) {
        Ok(s) => receivers.push(Receiver {
            socket: s,
            multihop: false,
        }),
        Err(e) => warn!(error = %e, "BFD over IPv6 unavailable"),
    }
    for v6 in [false, true] {
        match socket::bind_receiver(v6, options.multihop_port) {
            Ok(s) => receivers.push(Receiver {
                socket: s,
                multihop: true,
            }),
            Err(e) => {
                warn!(error = %e, v6, port = options.multihop_port, "multihop BFD unavailable")
            }
        }
    }
    let seed = random_seed();
    let (tx, rx) = queue()?;
    let rt = Runtime {
        sessions: HashMap::new(),
        by_peer: HashMap::new(),
        seed,
        options,
        metrics,
    };
    // Its own thread, blocking in poll(2): BGP work never delays a BFD
    // packet, and the many small wakeups of fast sessions cost no runtime.
    std::thread::Builder::new()
        .name("tartan-bfd".into())
        .spawn(move || rt.run(rx, receivers))?;
    Ok(BfdHandle {
        commands: tx,
        next_client: Arc::new(AtomicU64::new(1)),
    })
}

impl Runtime {
    fn run(mut self, commands: QueueReceiver<Command>, receivers: Vec<Receiver>) {
        let mut buf = [0u8; 512];
        loop {
            let now = Instant::now();
            let deadline = self
                .sessions
                .values()
                .filter_map(|e| e.session.next_deadline())
                .min();
            let hold = self
                .sessions
                .values()
                .map(|e| e.session.early_window())
                .filter(|w| !w.is_zero())
                .min()
                .map_or(RECEIVE_HOLD_MIN, |w| {
                    w.clamp(RECEIVE_HOLD_MIN, RECEIVE_HOLD_MAX)
                });
            let mut fds = vec![commands.fd()];
            if deadline.is_none_or(|d| d > now + hold) {
                fds.extend(receivers.iter().map(|r| r.socket.as_fd()));
            }
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            if let Err(e) = socket::wait(&fds, timeout) {
                warn!(error = %e, "BFD wait failed");
                std::thread::sleep(Duration::from_millis(1));
            }
            if !commands.drain(|c| self.command(c)) {
                break;
            }
            // Packets before timers: one that came in time must not be
            // taken for a missed one.
            for r in &receivers {
                self.drain(&r.socket, r.multihop, &mut buf);
            }
            self.tick(Instant::now());
        }
        // Everyone is gone, the daemon is stopping: tell the peers
        // (section 6.8.16), but with one AdminDown each rather than for a
        // Detection Time, which would hold the shutdown up. Sessions being
        // removed are cut short the same way.
        let now = Instant::now();
        for (discr, e) in &mut self.sessions {
            e.session.set_admin_down(true);
            let p = e.session.send_now(now);
            e.send(&p);
            info!(peer = %e.peer, discr, "BFD session removed (shutdown)");
        }
    }

    fn drain(&mut self, sock: &UdpSocket, multihop: bool, buf: &mut [u8]) {
        for _ in 0..RECEIVE_BATCH {
            match socket::recv(sock, buf) {
                Ok(r) => {
                    // Multihop TTLs are checked per session, against the
                    // minimum of its hop count (`Hops::accepts_ttl`).
                    if !multihop && r.ttl != Some(GTSM_TTL) {
                        debug!(from = %r.from, ttl = ?r.ttl, "BFD packet dropped: TTL is not 255 (RFC 5881 5)");
                        continue;
                    }
                    let len = r.len.min(buf.len());
                    let arrived = Arrival {
                        from: r.from.ip().to_canonical(),
                        to: r.to,
                        ttl: r.ttl,
                        multihop,
                    };
                    self.packet(&buf[..len], arrived);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    debug!(error = %e, "BFD receive failed");
                    return;
                }
            }
        }
    }

    fn packet(&mut self, bytes: &[u8], arrived: Arrival) {
        let Arrival {
            from,
            to,
            ttl,
            multihop,
        } = arrived;
        let pkt = match ControlPacket::decode(bytes) {
            Ok(p) => p,
            Err(e) => {
                debug!(%from, error = %e, "BFD packet discarded");
                return;
            }
        };
        let discr = if pkt.your_discr != 0 {
            pkt.your_discr
        } else {
            match self.by_peer.get(&(from, multihop)) {
                Some(d) => *d,
                None => {
                    debug!(%from, multihop, "BFD packet from a peer without a session");
                    return;
                }
            }
        };
        let Some(entry) = self.sessions.get_mut(&discr) else {
            debug!(%from, discr, "BFD packet for an unknown discriminator");
            return;
        };
        if entry.peer != from {
            debug!(%from, expected = %entry.peer, "BFD packet from the wrong source for its discriminator");
            return;
        }
        if multihop {
            // RFC 5883 sections 4 and 5: the session is a multihop one, the
            // packet went to the address we send from (when we chose one),
            // and came from no further than the hops BGP allows.
            if !entry.hops.is_multihop() {
                debug!(%from, "BFD packet on the multihop port for a single-hop session");
                return;
            }
            if let (Some(local), Some(to)) = (entry.local, to)
                && local.to_canonical() != to
            {
                debug!(%from, %to, %local, "multihop BFD packet to another of our addresses");
                return;
            }
            if !entry.hops.accepts_ttl(ttl) {
                debug!(%from, ?ttl, hops = ?entry.hops, "multihop BFD packet dropped: TTL below the minimum");
                return;
            }
            // Without our discriminator a multihop packet is matched by its
            // addresses alone, which anyone on the path can forge: one
            // saying Down would take an Up session and its BGP session
            // down. An Up session takes only packets that carry our
            // discriminator (as FRR's bfdd does); a peer that restarted
            // and lost it is seen by the detection time instead.
            if pkt.your_discr == 0 && entry.session.state() == State::Up {
                debug!(%from, "multihop BFD packet without our discriminator for an Up session dropped");
                return;
            }
        } else if entry.hops.is_multihop() {
            debug!(%from, "BFD packet on the single-hop port for a multihop session");
            return;
        }
        let now = Instant::now();
        let t = entry.session.receive(&pkt, now);
        entry.after(t, now);
    }

    fn tick(&mut self, now: Instant) {
        let mut retired = Vec::new();
        for (discr, entry) in &mut self.sessions {
            if !entry.session.due(now) {
                continue;
            }
            if entry.session.retired(now) {
                retired.push(*discr);
                continue;
            }
            let t = entry.session.expire(now);
            entry.after(t, now);
        }
        for discr in retired {
            if let Some(e) = self.sessions.remove(&discr) {
                let key = (e.peer, e.hops.is_multihop());
                if self.by_peer.get(&key) == Some(&discr) {
                    self.by_peer.remove(&key);
                }
                info!(peer = %e.peer, discr, "BFD session removed");
            }
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Add {
                client,
                peer,
                local,
                hops,
                config,
                status,
            } => {
                let now = Instant::now();
                if let Some(d) = self.by_peer.get(&(peer, hops.is_multihop()))
                    && let Some(e) = self.sessions.get_mut(d)
                {
                    // Two BGP sessions with one peer may allow different
                    // hop counts: the last one asked for applies.
                    e.hops = hops;
                    // So does the source address (a reload that changed
                    // it): packets go out from the new one, and multihop
                    // packets are taken when sent to it; the peer keys its
                    // session on the new pair of addresses.
                    if e.local != local {
                        info!(peer = %e.peer, discr = *d, old = ?e.local, new = ?local, "BFD session's source address changed");
                        e.local = local;
                        e.socket = None;
                    }
                    if e.session.retiring() {
                        // Wanted again while being removed: keep it.
                        info!(peer = %e.peer, discr = *d, "BFD session kept: a client is back");
                        let t = e.session.set_admin_down(false);
                        e.after(t, now);
                    }
                    if e.session.config() != config {
                        e.session.set_config(config);
                    }
                    status.send_replace(BfdStatus::of(
                        &e.session,
                        e.transitions,
                        hops.is_multihop(),
                    ));
                    e.clients.push((client, status));
                    return;
                }
                let discr = self.allocate_discr();
                self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                let session = Session::new(discr, config, now, self.seed);
                status.send_replace(BfdStatus::of(&session, 0, hops.is_multihop()));
                info!(%peer, discr, mode = hops.name(), ?hops, ?config, "BFD session added");
                let metrics = self
                    .metrics
                    .as_ref()
                    .map(|m| m.bfd(peer, hops.is_multihop()));
                let port = if hops.is_multihop() {
                    self.options.multihop_port
                } else {
                    self.options.port
                };
                self.sessions.insert(
                    discr,
                    Entry {
                        session,
                        peer,
                        local,
                        hops,
                        socket: None,
                        clients: vec![(client, status)],
                        transitions: 0,
                        metrics,
                        port,
                    },
                );
                self.by_peer.insert((peer, hops.is_multihop()), discr);
            }
            Command::Remove { client } => {
                let found = self.sessions.iter_mut().find_map(|(d, e)| {
                    let before = e.clients.len();
                    e.clients.retain(|(c, _)| *c != client);
                    (e.clients.len() != before).then_some((*d, e.clients.is_empty()))
                });
                if let Some((discr, true)) = found {
                    self.retire(discr, Instant::now());
                }
            }
            Command::SetConfig { client, config } => {
                let now = Instant::now();
                let entry = self
                    .sessions
                    .values_mut()
                    .find(|e| e.clients.iter().any(|(c, _)| *c == client));
                if let Some(e) = entry
                    && e.session.config() != config
                {
                    info!(peer = %e.peer, ?config, "BFD timers changed");
                    e.session.set_config(config);
                    e.after(None, now);
                }
            }
        }
    }

    /// Begin removing a session that has no clients left: AdminDown, the
    /// first packet at once, then at its interval for a Detection Time
    /// (`Session::retire`); `tick` removes it after that. A client asking
    /// for the same peer meanwhile gets it back.
    fn retire(&mut self, discr: u32, now: Instant) {
        let Some(e) = self.sessions.get_mut(&discr) else {
            return;
        };
        let t = e.session.retire(now);
        let p = e.session.send_now(now);
        e.send(&p);
        e.after(t, now);
        info!(peer = %e.peer, discr, "BFD session retiring: AdminDown for a detection time");
    }

    /// A discriminator of no other session, random (RFC 5880 6.8.1): one
    /// that follows from another is one a forger could guess.
    fn allocate_discr(&mut self) -> u32 {
        loop {
            self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let d = (splitmix(self.seed) >> 32) as u32;
            if d != 0 && !self.sessions.contains_key(&d) {
                return d;
            }
        }
    }
}

/// SplitMix64's output function: each bit of `x` moves about half of the
/// result's.
fn splitmix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The kernel's random bytes, or the clock and the process id when they
/// cannot be read.
fn random_seed() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
        ^ u64::from(std::process::id()) << 32
}

/// Where and how a datagram arrived: its source, the address it was sent
/// to (when the kernel said), its TTL, and whether on the multihop port.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    from: IpAddr,
    to: Option<IpAddr>,
    ttl: Option<u8>,
    multihop: bool,
}

impl Entry {
    /// After the machine ran: publish a transition, send what is due.
    fn after(&mut self, t: Option<Transition>, now: Instant) {
        if let Some(t) = t {
            self.transitions += 1;
            info!(peer = %self.peer, from = t.from.name(), to = t.to.name(), diag = ?t.diag, "BFD session state changed");
            if let Some(m) = &self.metrics {
                m.state.set(state_code(t.to));
                m.transitions.inc();
            }
        }
        let status = BfdStatus::of(&self.session, self.transitions, self.hops.is_multihop());
        for (_, tx) in &self.clients {
            tx.send_if_modified(|s| {
                if *s == status {
                    false
                } else {
                    *s = status.clone();
                    true
                }
            });
        }
        while let Some(p) = self.session.transmit(now) {
            self.send(&p);
            if !p.final_ {
                break;
            }
        }
    }

    fn send(&mut self, p: &ControlPacket) {
        let port = self.port;
        if self.socket.is_none() {
            let start = (self.session.local_discr() % 16384) as u16;
            match socket::bind_sender(self.peer, self.local, start, port) {
                Ok(s) => self.socket = Some(s),
                Err(e) => {
                    debug!(peer = %self.peer, error = %e, "BFD: no socket towards the peer yet");
                    return;
                }
            }
        }
        if let Some(s) = &self.socket
            && let Err(e) = s.send(&p.encode())
        {
            debug!(peer = %self.peer, error = %e, "BFD send failed");
        }
    }
}

/// The RFC 5880 code of a state, as the state metric shows it.
fn state_code(s: State) -> i64 {
    match s {
        State::AdminDown => 0,
        State::Down => 1,
        State::Init => 2,
        State::Up => 3,
    }
}

#[cfg(test)]
mod tests {
    //! The removal of sessions, driven through the runtime's commands and
    //! its clock with the peer a UDP socket on the loopback.
    use super::*;
    use crate::bfd::session::SessionConfig;

    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    fn config() -> SessionConfig {
        SessionConfig {
            desired_min_tx: Duration::from_millis(300),
            required_min_rx: Duration::from_millis(300),
            detect_mult: 3,
        }
    }

    /// A runtime without its thread and receiving sockets, and the peer.
    fn runtime() -> (Runtime, UdpSocket) {
        let peer = UdpSocket::bind((LOOPBACK, 0)).unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let rt = Runtime {
            sessions: HashMap::new(),
            by_peer: HashMap::new(),
            seed: 1,
            options: RuntimeOptions {
                port: peer.local_addr().unwrap().port(),
                multihop_port: peer.local_addr().unwrap().port(),
            },
            metrics: None,
        };
        (rt, peer)
    }

    fn add(rt: &mut Runtime, client: u64) -> watch::Receiver<BfdStatus> {
        let initial = BfdStatus::of(&Session::new(1, config(), Instant::now(), 1), 0, false);
        let (status, rx) = watch::channel(initial);
        rt.command(Command::Add {
            client,
            peer: LOOPBACK,
            local: None,
            hops: Hops::Single,
            config: config(),
            status,
        });
        rx
    }

    fn received(peer: &UdpSocket) -> ControlPacket {
        let mut buf = [0u8; 64];
        let n = peer.recv(&mut buf).expect("a packet");
        ControlPacket::decode(&buf[..n]).unwrap()
    }

    #[test]
    fn a_removed_session_says_admin_down_for_a_detection_time_then_goes() {
        let (mut rt, peer) = runtime();
        let _status = add(&mut rt, 1);
        let t = Instant::now();
        rt.command(Command::Remove { client: 1 });
        assert_eq!(rt.sessions.len(), 1, "kept while it says AdminDown");
        assert_eq!(received(&peer).state, State::AdminDown, "at once");
        // At the slow rate (1 s, times Detect Mult 3) until it goes.
        for at in [1500, 2900] {
            rt.tick(t + Duration::from_millis(at));
            assert_eq!(received(&peer).state, State::AdminDown, "at {at} ms");
            assert_eq!(rt.sessions.len(), 1);
        }
        rt.tick(t + Duration::from_millis(3500));
        assert!(rt.sessions.is_empty() && rt.by_peer.is_empty());
    }

    #[test]
    fn a_client_back_during_the_removal_keeps_the_session() {
        let (mut rt, peer) = runtime();
        let _first = add(&mut rt, 1);
        let discr = *rt.by_peer.get(&(LOOPBACK, false)).unwrap();
        rt.command(Command::Remove { client: 1 });
        assert_eq!(received(&peer).state, State::AdminDown);
        let status = add(&mut rt, 2);
        assert_eq!(
            rt.by_peer.get(&(LOOPBACK, false)),
            Some(&discr),
            "the same session"
        );
        assert_eq!(status.borrow().state, State::Down);
        rt.tick(Instant::now() + Duration::from_secs(60));
        assert!(rt.sessions.contains_key(&discr), "not removed");
    }
}

#[cfg(test)]
#[path = "runtime_multihop_tests.rs"]
mod multihop_tests;
