//! The minimal BGP speaker under the injectors and the sink: the OPEN /
//! KEEPALIVE handshake, and a read loop that feeds UPDATEs to a counter.
use super::counter::Counter;
use anyhow::{Context, Result, bail};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};
use tartan_bgpd::model::Family;
use tartan_bgpd::wire::{
    Capabilities, DecodeOptions, Message, Open, decode, encode_keepalive, frame, msg_type,
};

/// Who a generator speaker is.
#[derive(Debug, Clone, Copy)]
pub struct SpeakerId {
    pub asn: u32,
    pub router_id: Ipv4Addr,
    /// Offered hold time (the session uses the smaller of both sides').
    pub hold_time: u16,
}

/// A session after the handshake.
#[derive(Debug)]
pub struct Established {
    pub stream: TcpStream,
    pub peer_as: u32,
    /// Negotiated hold time in seconds (0: no keepalives needed).
    pub hold_time: u16,
    /// Bytes read past the handshake (the start of the peer's UPDATEs).
    pub leftover: Vec<u8>,
}

impl Established {
    /// How often to send KEEPALIVEs (a third of the hold time).
    pub fn keepalive_every(&self) -> Option<Duration> {
        (self.hold_time > 0).then(|| Duration::from_secs(u64::from(self.hold_time / 3).max(1)))
    }
}

/// The OPEN of a generator speaker: 4-octet AS, IPv4 unicast only.
fn open_message(id: &SpeakerId) -> Vec<u8> {
    Open {
        version: 4,
        asn: id.asn,
        my_as_field: 0,
        hold_time: id.hold_time,
        router_id: id.router_id,
        caps: Capabilities {
            families: vec![Family::Ipv4Unicast],
            four_octet_as: Some(id.asn),
            ..Capabilities::default()
        },
    }
    .encode()
}

pub fn keepalive() -> Vec<u8> {
    let mut k = Vec::with_capacity(19);
    encode_keepalive(&mut k);
    k
}

/// Sends our OPEN, waits for the peer's, answers with a KEEPALIVE and
/// waits for the peer's KEEPALIVE (or first UPDATE).
pub fn handshake(mut stream: TcpStream, id: &SpeakerId, timeout: Duration) -> Result<Established> {
    let deadline = Instant::now() + timeout;
    stream.write_all(&open_message(id))?;
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 4096];
    let mut open: Option<Open> = None;
    loop {
        // Handle every whole message already buffered.
        while let Some(len) = frame_at(&buf)? {
            let msg = decode(&buf[..len], &DecodeOptions::default());
            match (msg, &open) {
                (Ok(Message::Open(o)), None) => {
                    stream.write_all(&keepalive())?;
                    open = Some(o);
                }
                (Ok(Message::Keepalive), Some(o)) => {
                    let leftover = buf[len..].to_vec();
                    return Ok(established(stream, o, id, leftover));
                }
                (Ok(Message::Update(_)), Some(o)) => {
                    let leftover = buf.to_vec();
                    return Ok(established(stream, o, id, leftover));
                }
                (Ok(Message::Notification(n)), _) => bail!("peer sent NOTIFICATION {n}"),
                (Ok(m), _) => bail!("unexpected message during handshake: {m:?}"),
                (Err(n), _) => bail!("bad message during handshake: {n}"),
            }
            buf.drain(..len);
        }
        let left = deadline
            .checked_duration_since(Instant::now())
            .context("BGP handshake timed out")?;
        stream.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        match stream.read(&mut chunk) {
            Ok(0) => bail!("peer closed the connection during the handshake"),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                bail!("BGP handshake timed out")
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read during handshake"),
        }
    }
}

fn established(stream: TcpStream, o: &Open, id: &SpeakerId, leftover: Vec<u8>) -> Established {
    Established {
        stream,
        peer_as: o.asn,
        hold_time: o.hold_time.min(id.hold_time),
        leftover,
    }
}

/// A whole message at the front of `buf`, if there is one.
fn frame_at(buf: &[u8]) -> Result<Option<usize>> {
    if buf.is_empty() {
        return Ok(None);
    }
    frame(buf).map_err(|n| anyhow::anyhow!("bad BGP framing: {n}"))
}

/// Reads until the connection closes (or is shut down), feeding every
/// UPDATE to `counter`. Returns why it stopped: None for a clean close,
/// else the peer's NOTIFICATION or the error.
pub fn read_loop(mut stream: TcpStream, leftover: Vec<u8>, counter: &Counter) -> Option<String> {
    let _ = stream.set_read_timeout(None);
    let mut buf = leftover;
    buf.reserve(1 << 20);
    let mut start = 0;
    loop {
        // Whole messages from `start`.
        loop {
            let rest = &buf[start..];
            match frame_at(rest) {
                Ok(Some(len)) => {
                    match rest[18] {
                        msg_type::UPDATE => counter.update(&rest[19..len]),
                        msg_type::NOTIFICATION => {
                            return Some(match decode(&rest[..len], &DecodeOptions::default()) {
                                Ok(Message::Notification(n)) => format!("NOTIFICATION {n}"),
                                _ => "malformed NOTIFICATION".into(),
                            });
                        }
                        _ => {}
                    }
                    start += len;
                }
                Ok(None) => break,
                Err(e) => return Some(e.to_string()),
            }
        }
        buf.drain(..start);
        start = 0;
        let old = buf.len();
        buf.resize(old + (1 << 18), 0);
        match stream.read(&mut buf[old..]) {
            Ok(0) => return None,
            Ok(n) => buf.truncate(old + n),
            Err(e) if e.kind() == ErrorKind::Interrupted => buf.truncate(old),
            Err(e) => {
                buf.truncate(old);
                return match e.kind() {
                    ErrorKind::ConnectionReset | ErrorKind::NotConnected => None,
                    _ => Some(format!("read: {e}")),
                };
            }
        }
    }
}

/// Connects to `addr` and completes the handshake, retrying (refused
/// connections, a peer that resets the session while it starts up) until
/// `timeout`.
pub fn establish(
    addr: std::net::SocketAddr,
    id: &SpeakerId,
    timeout: Duration,
) -> Result<Established> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let r =
            connect(addr, left).and_then(|s| handshake(s, id, left.max(Duration::from_secs(1))));
        match r {
            Ok(e) => return Ok(e),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// Connects to `addr`, retrying refused connections until `timeout`.
pub fn connect(addr: std::net::SocketAddr, timeout: Duration) -> Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(e).with_context(|| format!("connect to {addr}")),
        }
    }
}
