//! Deleting stale conntrack entries over ctnetlink: each family's table
//! (IPv4, IPv6) that has stale flows is listed once, the entries the
//! given [`Flow`]s match are picked in memory, and their deletes are sent
//! in batches of many messages per datagram. Nothing runs the `conntrack`
//! program.

#[cfg(test)]
mod tests;
pub mod wire;

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use netlink_sys::{Socket, protocols::NETLINK_NETFILTER};

use std::net::Ipv4Addr;

use crate::services::Family;
use crate::services::stale::{Entry, Flow, StaleFlows};

/// Messages per datagram (a delete is 80 bytes). Each ack the kernel
/// queues costs about 1 KiB of the receive buffer (its allocation, not its
/// 36 bytes): more in flight than the buffer holds and the kernel drops
/// acks (ENOBUFS).
const BATCH: usize = 128;

/// What [`Conntrack::clean_each`] came to.
#[derive(Debug)]
pub struct Cleanup {
    /// The families that were cleaned, together.
    pub done: Cleaned,
    /// The first error, with the flows of every family that failed.
    pub failed: Option<(io::Error, StaleFlows)>,
}

/// What one cleanup did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Cleaned {
    /// Entries in the table when listed.
    pub listed: usize,
    /// Entries the kernel deleted.
    pub deleted: usize,
    /// Entries that had gone by the time of their delete.
    pub vanished: usize,
    pub took: Duration,
}

/// A ctnetlink socket, kept open.
pub struct Conntrack {
    sock: Socket,
    seq: u32,
}

/// The flows by (protocol, original destination port), for a lookup per
/// listed entry.
fn index<A: Family>(flows: &[Flow<A>]) -> HashMap<(u8, u16), Vec<Flow<A>>> {
    let mut m: HashMap<(u8, u16), Vec<Flow<A>>> = HashMap::new();
    for f in flows {
        m.entry((f.proto, f.port)).or_default().push(*f);
    }
    m
}

/// The entries of `listed` that some flow matches.
pub fn matching<A: Family>(listed: &[Entry<A>], flows: &[Flow<A>]) -> Vec<Entry<A>> {
    let idx = index(flows);
    listed
        .iter()
        .filter(|e| {
            idx.get(&(e.orig.proto, e.orig.dst_port))
                .is_some_and(|fs| fs.iter().any(|f| f.matches(e)))
        })
        .copied()
        .collect()
}

impl Conntrack {
    /// A socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Conntrack> {
        let mut sock = Socket::new(NETLINK_NETFILTER)?;
        sock.bind_auto()?;
        sock.set_cap_ack(true)?;
        // Room for a batch's acks with a margin (the default is enough).
        let _ = sock.set_rx_buf_sz(1usize << 20);
        Ok(Conntrack { sock, seq: 1 })
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn recv<A: Family>(&self) -> io::Result<wire::Read<A>> {
        let mut buf = Vec::with_capacity(64 * 1024);
        self.sock.recv(&mut buf, 0)?;
        Ok(wire::read(&buf))
    }

    /// Throw away whatever an interrupted exchange left unread.
    fn drain(&self) {
        loop {
            let mut buf = Vec::with_capacity(64 * 1024);
            match self.sock.recv(&mut buf, libc::MSG_DONTWAIT) {
                Ok(n) if n > 0 => {}
                _ => return,
            }
        }
    }

    /// Every IPv4 entry.
    pub fn list(&mut self) -> io::Result<Vec<Entry<Ipv4Addr>>> {
        self.list_family()
    }

    /// Every entry of family `A`.
    pub fn list_family<A: Family>(&mut self) -> io::Result<Vec<Entry<A>>> {
        self.drain();
        let seq = self.next_seq();
        self.sock.send(&wire::dump::<A>(seq), 0)?;
        let mut out = Vec::new();
        loop {
            let r = self.recv::<A>()?;
            out.extend(r.entries);
            if let Some(e) = r.errors.iter().find(|e| **e != 0) {
                return Err(io::Error::from_raw_os_error(*e));
            }
            if r.done {
                return Ok(out);
            }
        }
    }

    /// Delete `entries`; how many the kernel deleted and how many were
    /// already gone.
    pub fn delete<A: Family>(&mut self, entries: &[Entry<A>]) -> io::Result<(usize, usize)> {
        self.send_acked(entries, wire::delete, libc::ENOENT)
    }

    /// Create `entries` (for benchmarks and tests); how many were made and
    /// how many existed already.
    pub fn create<A: Family>(
        &mut self,
        entries: &[Entry<A>],
        timeout: u32,
    ) -> io::Result<(usize, usize)> {
        self.send_acked(
            entries,
            |e, seq| wire::create(e, timeout, seq),
            libc::EEXIST,
        )
    }

    /// One message per entry, [`BATCH`] to a datagram, each acked: how
    /// many succeeded and how many were refused with `benign`.
    fn send_acked<A: Family>(
        &mut self,
        entries: &[Entry<A>],
        encode: impl Fn(&Entry<A>, u32) -> Vec<u8>,
        benign: i32,
    ) -> io::Result<(usize, usize)> {
        self.drain();
        let (mut done, mut skipped) = (0, 0);
        let mut refused = None;
        for chunk in entries.chunks(BATCH) {
            let mut buf = Vec::with_capacity(chunk.len() * 160);
            for e in chunk {
                let seq = self.next_seq();
                buf.extend_from_slice(&encode(e, seq));
            }
            self.sock.send(&buf, 0)?;
            // Every answer is read, also after a refusal, so that none is
            // left for the next exchange.
            let mut answered = 0;
            while answered < chunk.len() {
                let r = self.recv::<A>()?;
                for e in r.errors {
                    answered += 1;
                    match e {
                        0 => done += 1,
                        e if e == benign => skipped += 1,
                        e => {
                            refused.get_or_insert(e);
                        }
                    }
                }
            }
        }
        match refused {
            Some(e) => Err(io::Error::from_raw_os_error(e)),
            None => Ok((done, skipped)),
        }
    }

    /// List each family's table that has flows, delete what they match
    /// ([`Conntrack::clean_each`]); the first error when a family failed.
    pub fn clean(&mut self, flows: &StaleFlows) -> io::Result<Cleaned> {
        let c = self.clean_each(flows);
        match c.failed {
            Some((e, _)) => Err(e),
            None => Ok(c.done),
        }
    }

    /// List each family's table that has flows, delete what they match.
    /// Both families are tried, also when the first fails; the flows of
    /// a family that failed come back in [`Cleanup::failed`] (to try
    /// again), the other's are done with.
    pub fn clean_each(&mut self, flows: &StaleFlows) -> Cleanup {
        let started = Instant::now();
        let mut done = Cleaned::default();
        let mut failed: Option<(io::Error, StaleFlows)> = None;
        let mut add = |c: Cleaned| {
            done.listed += c.listed;
            done.deleted += c.deleted;
            done.vanished += c.vanished;
        };
        match self.clean_family(&flows.v4) {
            Ok(c) => add(c),
            Err(e) => {
                let keep = StaleFlows {
                    v4: flows.v4.clone(),
                    ..StaleFlows::default()
                };
                failed = Some((e, keep));
            }
        }
        match self.clean_family(&flows.v6) {
            Ok(c) => add(c),
            Err(e) => {
                let (_, keep) = failed.get_or_insert_with(|| (e, StaleFlows::default()));
                keep.v6 = flows.v6.clone();
            }
        }
        done.took = started.elapsed();
        Cleanup { done, failed }
    }

    /// List the table of family `A`, delete what `flows` match.
    pub fn clean_family<A: Family>(&mut self, flows: &[Flow<A>]) -> io::Result<Cleaned> {
        let started = Instant::now();
        if flows.is_empty() {
            return Ok(Cleaned::default());
        }
        let listed = self.list_family::<A>()?;
        let stale = matching(&listed, flows);
        let (deleted, vanished) = self.delete(&stale)?;
        Ok(Cleaned {
            listed: listed.len(),
            deleted,
            vanished,
            took: started.elapsed(),
        })
    }
}
