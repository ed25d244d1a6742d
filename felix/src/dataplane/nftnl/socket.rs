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

/// Send `bytes` (a batch whose `acked` messages ask for an ack).
pub fn send(bytes: &[u8], acked: usize) -> io::Result<Answer> {
    let mut sock = Socket::new(NETLINK_NETFILTER)?;
    sock.bind_auto()?;
    // Acks without a copy of the request.
    sock.set_cap_ack(true)?;
    if bytes.len() > 200_000 {
        set_send_buffer(&sock, bytes.len())?;
    }
    let sent = sock.send(bytes, 0)?;
    if sent != bytes.len() {
        return Err(io::Error::other(format!(
            "netlink sent {sent} of {} bytes",
            bytes.len()
        )));
    }
    let mut acks = 0;
    loop {
        let mut buf = Vec::with_capacity(64 * 1024);
        match sock.recv(&mut buf, libc::MSG_DONTWAIT) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
        for errno in errors(&buf) {
            if errno != 0 {
                return Ok(Answer::Refused(errno));
            }
            acks += 1;
        }
    }
    if acks == acked {
        Ok(Answer::Committed)
    } else {
        Err(io::Error::other(format!(
            "nf_tables acknowledged {acks} of {acked} messages"
        )))
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
