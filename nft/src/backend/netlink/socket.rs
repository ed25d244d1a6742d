//! Sending a batch to nf_tables and reading what it answered. The kernel
//! runs the whole batch, commit included, inside the send, so every
//! answer is waiting when the send returns.

use std::io;

use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};

const NLMSG_ERROR: u16 = 2;

/// How the kernel answered a batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Every message acknowledged: the transaction is committed.
    Committed,
    /// The kernel refused a message (errno); nothing was applied.
    Refused(i32),
}

/// A netlink socket to nf_tables, kept open: closing one costs the
/// kernel 5–30 ms here, far more than a small transaction.
pub struct Conn {
    sock: Socket,
    send_buffer: usize,
}

impl Conn {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Conn> {
        let mut sock = Socket::new(NETLINK_NETFILTER)?;
        sock.bind_auto()?;
        // Acks without a copy of the request.
        sock.set_cap_ack(true)?;
        Ok(Conn {
            sock,
            send_buffer: 0,
        })
    }

    /// Send `bytes` (a batch whose `acked` messages ask for an ack).
    pub fn send(&mut self, bytes: &[u8], acked: usize) -> io::Result<Answer> {
        // Nothing from an earlier exchange may be taken for this one.
        self.drain(&mut |_| {})?;
        if bytes.len() > 200_000 && bytes.len() > self.send_buffer {
            set_send_buffer(&self.sock, bytes.len())?;
            self.send_buffer = bytes.len();
        }
        let sent = self.sock.send(bytes, 0)?;
        if sent != bytes.len() {
            return Err(io::Error::other(format!(
                "netlink sent {sent} of {} bytes",
                bytes.len()
            )));
        }
        let mut acks = 0;
        let mut refused = None;
        self.drain(&mut |errno| {
            if errno != 0 {
                refused.get_or_insert(errno);
            } else {
                acks += 1;
            }
        })?;
        if let Some(errno) = refused {
            return Ok(Answer::Refused(errno));
        }
        if acks == acked {
            Ok(Answer::Committed)
        } else {
            Err(io::Error::other(format!(
                "nf_tables acknowledged {acks} of {acked} messages"
            )))
        }
    }

    /// Read every answer waiting (the kernel has answered a batch by the
    /// time the send returns), giving each error code (0: an ack) to `f`.
    fn drain(&mut self, f: &mut dyn FnMut(i32)) -> io::Result<()> {
        loop {
            let mut buf = Vec::with_capacity(64 * 1024);
            match self.sock.recv(&mut buf, libc::MSG_DONTWAIT) {
                Ok(0) => return Ok(()),
                Ok(_) => errors(&buf).into_iter().for_each(&mut *f),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether table `name` of `family` (NFPROTO_*) is in the kernel.
    pub fn table_exists(&mut self, family: u8, name: &str) -> io::Result<bool> {
        self.drain(&mut |_| {})?;
        self.sock
            .send(&super::message::get_table(family, name, 1), 0)?;
        let mut codes = Vec::new();
        self.drain(&mut |e| codes.push(e))?;
        // A table is its description and then an ack; a missing one is
        // ENOENT.
        match codes.first() {
            Some(&libc::ENOENT) => Ok(false),
            Some(&0) | None => Ok(true),
            Some(&e) => Err(io::Error::from_raw_os_error(e)),
        }
    }
}

/// The error codes (0 for an ack) of the NLMSG_ERROR messages in `buf`.
pub fn errors(buf: &[u8]) -> Vec<i32> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(head) = buf.get(at..at + 16) {
        let len = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = u16::from_ne_bytes([head[4], head[5]]);
        if len < 16 {
            break;
        }
        if kind == NLMSG_ERROR
            && let Some(e) = buf.get(at + 16..at + 20)
        {
            out.push(-i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
        }
        at += len.div_ceil(4) * 4;
    }
    out
}

fn set_send_buffer(sock: &Socket, size: usize) -> io::Result<()> {
    use nix::sys::socket::{setsockopt, sockopt};
    let size = size.saturating_mul(2);
    // SO_SNDBUFFORCE passes the system cap (felix runs as root); without
    // the privilege, SO_SNDBUF gives what the cap allows.
    setsockopt(sock, sockopt::SndBufForce, &size)
        .or_else(|_| setsockopt(sock, sockopt::SndBuf, &size))
        .map_err(io::Error::from)
}
