//! A BGP peer written by hand for tests: it sends whatever bytes a test
//! wants (also malformed ones) and decodes what the speaker answers.
use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use tartan_bgpd::model::Family;
use tartan_bgpd::wire::{self, Capabilities, DecodeOptions, Message, Notification, Open};
use tartan_lab::netns::Netns;

pub struct RawPeer {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// What reading from the speaker produced.
// Test-only and short-lived: boxing the message would only clutter every match.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Received {
    Message(Message),
    Closed,
    TimedOut,
}

impl RawPeer {
    /// Connects from inside `ns` to `to`.
    pub fn connect(ns: &Netns, to: SocketAddr) -> Result<RawPeer> {
        let name = ns.name().to_string();
        let stream = std::thread::scope(|s| {
            s.spawn(|| -> Result<TcpStream> {
                let f = std::fs::File::open(format!("/run/netns/{name}"))?;
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET)?;
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    match TcpStream::connect_timeout(&to, Duration::from_secs(2)) {
                        Ok(s) => return Ok(s),
                        Err(e) if Instant::now() > deadline => return Err(e.into()),
                        Err(_) => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })
            .join()
            .map_err(|_| anyhow::anyhow!("connect thread panicked"))?
        })?;
        stream.set_nodelay(true)?;
        Ok(RawPeer {
            stream,
            buf: Vec::new(),
        })
    }

    pub fn send(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).context("send")
    }

    /// The next message from the speaker, skipping KEEPALIVEs when asked.
    pub fn recv(&mut self, timeout: Duration, skip_keepalives: bool) -> Result<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(len) = wire::frame(&self.buf)
                .map_err(|n| anyhow::anyhow!("speaker sent a bad header: {n}"))?
            {
                let msg: Vec<u8> = self.buf.drain(..len).collect();
                let m = wire::decode(&msg, &DecodeOptions::default())
                    .map_err(|n| anyhow::anyhow!("speaker sent a message we cannot decode: {n}"))?;
                if skip_keepalives && matches!(m, Message::Keepalive) {
                    continue;
                }
                return Ok(Received::Message(m));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Received::TimedOut);
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Ok(Received::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Received::TimedOut);
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Ok(Received::Closed);
                }
                // A signal (a child of this test process exiting): a read
                // with a timeout is not restarted by the kernel, so again,
                // with the time left.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Runs the OPEN exchange as AS `asn`; returns the speaker's OPEN.
    pub fn establish(
        &mut self,
        asn: u32,
        router_id: Ipv4Addr,
        families: &[Family],
    ) -> Result<Open> {
        let open = Open {
            version: 4,
            asn,
            my_as_field: u16::try_from(asn).unwrap_or(23456),
            hold_time: 90,
            router_id,
            caps: Capabilities {
                families: families.to_vec(),
                four_octet_as: Some(asn),
                route_refresh: true,
                ..Default::default()
            },
        };
        self.send(&open.encode())?;
        let theirs = match self.recv(Duration::from_secs(10), true)? {
            Received::Message(Message::Open(o)) => o,
            other => bail!("expected OPEN, got {other:?}"),
        };
        let mut ka = Vec::new();
        wire::encode_keepalive(&mut ka);
        self.send(&ka)?;
        match self.recv(Duration::from_secs(10), false)? {
            Received::Message(Message::Keepalive) => Ok(theirs),
            other => bail!("expected KEEPALIVE, got {other:?}"),
        }
    }

    /// Waits for a NOTIFICATION (skipping other messages).
    pub fn expect_notification(&mut self, timeout: Duration) -> Result<Notification> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left, true)? {
                Received::Message(Message::Notification(n)) => return Ok(n),
                Received::Message(_) => continue,
                other => bail!("expected NOTIFICATION, got {other:?}"),
            }
        }
    }

    /// Collects UPDATEs until `timeout` passes with nothing new.
    pub fn updates_until_quiet(&mut self, quiet: Duration) -> Result<Vec<wire::Update>> {
        let mut out = Vec::new();
        loop {
            match self.recv(quiet, true)? {
                Received::Message(Message::Update(u)) => out.push(u),
                Received::Message(Message::Notification(n)) => {
                    bail!("speaker sent NOTIFICATION {n}")
                }
                Received::Message(_) => {}
                Received::TimedOut => return Ok(out),
                Received::Closed => bail!("speaker closed the session"),
            }
        }
    }
}
