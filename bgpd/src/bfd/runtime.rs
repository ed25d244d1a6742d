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
//! section 3).

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
    pub port: u16,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            port: socket::CONTROL_PORT,
        }
    }
}

struct Entry {
    session: Session,
    peer: IpAddr,
    local: Option<IpAddr>,
    socket: Option<UdpSocket>,
    clients: Vec<(u64, watch::Sender<BfdStatus>)>,
    transitions: u64,
    metrics: Option<BfdMetrics>,
    port: u16,
}

struct Runtime {
    sessions: HashMap<u32, Entry>,
    by_peer: HashMap<IpAddr, u32>,
    next_discr: u32,
    seed: u64,
    port: u16,
    metrics: Option<Arc<crate::control::Metrics>>,
}

/// Start the runtime: binds port 3784 for IPv4 (required) and IPv6 (when
/// the host has IPv6) and starts its thread.
pub fn spawn(
    options: RuntimeOptions,
    metrics: Option<Arc<crate::control::Metrics>>,
) -> io::Result<BfdHandle> {
    let rx4 = socket::bind_receiver(false, options.port)?;
    let rx6 = match socket::bind_receiver(true, options.port) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "BFD over IPv6 unavailable");
            None
        }
    };
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
        ^ u64::from(std::process::id()) << 32;
    let (tx, rx) = queue()?;
    let rt = Runtime {
        sessions: HashMap::new(),
        by_peer: HashMap::new(),
        next_discr: (seed as u32) | 1,
        seed,
        port: options.port,
        metrics,
    };
    // Its own thread, blocking in poll(2): BGP work never delays a BFD
    // packet, and the many small wakeups of fast sessions cost no runtime.
    std::thread::Builder::new()
        .name("tartan-bfd".into())
        .spawn(move || rt.run(rx, rx4, rx6))?;
    Ok(BfdHandle {
        commands: tx,
        next_client: Arc::new(AtomicU64::new(1)),
    })
}

impl Runtime {
    fn run(mut self, commands: QueueReceiver<Command>, rx4: UdpSocket, rx6: Option<UdpSocket>) {
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
                fds.push(rx4.as_fd());
                fds.extend(rx6.as_ref().map(|s| s.as_fd()));
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
            self.drain(&rx4, &mut buf);
            if let Some(s) = &rx6 {
                self.drain(s, &mut buf);
            }
            self.tick(Instant::now());
        }
        // Everyone is gone: tell the peers (section 6.8.16).
        let discrs: Vec<u32> = self.sessions.keys().copied().collect();
        for d in discrs {
            self.retire(d);
        }
    }

    fn drain(&mut self, sock: &UdpSocket, buf: &mut [u8]) {
        for _ in 0..RECEIVE_BATCH {
            match socket::recv(sock, buf) {
                Ok(r) => {
                    if r.ttl != Some(GTSM_TTL) {
                        debug!(from = %r.from, ttl = ?r.ttl, "BFD packet dropped: TTL is not 255 (RFC 5881 5)");
                        continue;
                    }
                    let len = r.len.min(buf.len());
                    self.packet(&buf[..len], r.from.ip().to_canonical());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    debug!(error = %e, "BFD receive failed");
                    return;
                }
            }
        }
    }

    fn packet(&mut self, bytes: &[u8], from: IpAddr) {
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
            match self.by_peer.get(&from) {
                Some(d) => *d,
                None => {
                    debug!(%from, "BFD packet from a peer without a session");
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
        let now = Instant::now();
        let t = entry.session.receive(&pkt, now);
        entry.after(t, now);
    }

    fn tick(&mut self, now: Instant) {
        for entry in self.sessions.values_mut() {
            if !entry.session.due(now) {
                continue;
            }
            let t = entry.session.expire(now);
            entry.after(t, now);
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Add {
                client,
                peer,
                local,
                config,
                status,
            } => {
                let now = Instant::now();
                if let Some(d) = self.by_peer.get(&peer)
                    && let Some(e) = self.sessions.get_mut(d)
                {
                    if e.session.config() != config {
                        e.session.set_config(config, now);
                    }
                    status.send_replace(BfdStatus::of(&e.session, e.transitions));
                    e.clients.push((client, status));
                    return;
                }
                let discr = self.allocate_discr();
                self.seed = self.seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                let session = Session::new(discr, config, now, self.seed);
                status.send_replace(BfdStatus::of(&session, 0));
                info!(%peer, discr, ?config, "BFD session added");
                let metrics = self.metrics.as_ref().map(|m| m.bfd(peer));
                self.sessions.insert(
                    discr,
                    Entry {
                        session,
                        peer,
                        local,
                        socket: None,
                        clients: vec![(client, status)],
                        transitions: 0,
                        metrics,
                        port: self.port,
                    },
                );
                self.by_peer.insert(peer, discr);
            }
            Command::Remove { client } => {
                let found = self.sessions.iter_mut().find_map(|(d, e)| {
                    let before = e.clients.len();
                    e.clients.retain(|(c, _)| *c != client);
                    (e.clients.len() != before).then_some((*d, e.clients.is_empty()))
                });
                if let Some((discr, true)) = found {
                    self.retire(discr);
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
                    e.session.set_config(config, now);
                    e.after(None, now);
                }
            }
        }
    }

    /// Remove a session, first telling the peer it is AdminDown.
    fn retire(&mut self, discr: u32) {
        let Some(mut e) = self.sessions.remove(&discr) else {
            return;
        };
        self.by_peer.remove(&e.peer);
        let now = Instant::now();
        e.session.set_admin_down(true, now);
        let p = e.session.current_packet();
        e.send(&p);
        info!(peer = %e.peer, discr, "BFD session removed");
    }

    fn allocate_discr(&mut self) -> u32 {
        loop {
            self.next_discr = self.next_discr.wrapping_add(1);
            if self.next_discr != 0 && !self.sessions.contains_key(&self.next_discr) {
                return self.next_discr;
            }
        }
    }
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
        let status = BfdStatus::of(&self.session, self.transitions);
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
