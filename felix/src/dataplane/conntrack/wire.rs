//! ctnetlink messages (NFNL_SUBSYS_CTNETLINK): the dump request of one
//! family's table (IPv4 or IPv6: AF_INET or AF_INET6 in the nfgenmsg, as
//! the kernel filters dumps by it), an entry's delete, and the decoding
//! of the entries the kernel lists. Only what the service proxy needs.
//! The decoder reads what the kernel sends and never panics on any input.

use std::net::Ipv4Addr;

use crate::services::Family;
use crate::services::stale::{Entry, Tuple};

const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_ID: u16 = 12;
const CTA_ZONE: u16 = 18;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;

fn align(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// A netlink message being written: header, nfgenmsg, attributes.
struct Msg(Vec<u8>);

impl Msg {
    /// `af`: the address family (AF_INET, AF_INET6) of the entries.
    fn new(kind: u16, flags: u16, seq: u32, af: u8) -> Msg {
        let mut b = Vec::with_capacity(96);
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&((NFNL_SUBSYS_CTNETLINK << 8) | kind).to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        // nfgenmsg: family, version 0, resource id 0 (big-endian).
        b.extend_from_slice(&[af, 0, 0, 0]);
        Msg(b)
    }

    fn attr(&mut self, kind: u16, data: &[u8]) {
        let len = 4 + data.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&kind.to_ne_bytes());
        self.0.extend_from_slice(data);
        self.0.resize(align(self.0.len()), 0);
    }

    /// A nested attribute whose content `f` writes.
    /// A tuple's addresses and ports, as the kernel nests them.
    fn tuple<A: Family>(&mut self, t: &Tuple<A>) {
        let (src, dst) = ip_attrs::<A>();
        self.nest(CTA_TUPLE_IP, |m| {
            m.attr(src, t.src.bytes().as_ref());
            m.attr(dst, t.dst.bytes().as_ref());
        });
        self.nest(CTA_TUPLE_PROTO, |m| {
            m.attr(CTA_PROTO_NUM, &[t.proto]);
            m.attr(CTA_PROTO_SRC_PORT, &t.src_port.to_be_bytes());
            m.attr(CTA_PROTO_DST_PORT, &t.dst_port.to_be_bytes());
        });
    }

    fn nest(&mut self, kind: u16, f: impl FnOnce(&mut Msg)) {
        let at = self.0.len();
        self.0.extend_from_slice(&[0; 4]);
        f(self);
        let len = (self.0.len() - at) as u16;
        self.0[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        self.0[at + 2..at + 4].copy_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    }

    fn done(mut self) -> Vec<u8> {
        let len = self.0.len() as u32;
        self.0[0..4].copy_from_slice(&len.to_ne_bytes());
        self.0
    }
}

/// The attribute types of a tuple's source and destination in family `A`.
fn ip_attrs<A: Family>() -> (u16, u16) {
    match A::FAM {
        crate::services::Fam::V4 => (CTA_IP_V4_SRC, CTA_IP_V4_DST),
        crate::services::Fam::V6 => (CTA_IP_V6_SRC, CTA_IP_V6_DST),
    }
}

/// Ask for every entry of family `A`.
pub fn dump<A: Family>(seq: u32) -> Vec<u8> {
    Msg::new(
        IPCTNL_MSG_CT_GET,
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
        A::FAM.af(),
    )
    .done()
}

/// Delete entry `e` (found by its original tuple, its zone and its id, so
/// that an entry re-created since the dump is left alone), asking for an
/// ack.
pub fn delete<A: Family>(e: &Entry<A>, seq: u32) -> Vec<u8> {
    let mut m = Msg::new(
        IPCTNL_MSG_CT_DELETE,
        NLM_F_REQUEST | NLM_F_ACK,
        seq,
        A::FAM.af(),
    );
    let t = e.orig;
    m.nest(CTA_TUPLE_ORIG, |m| {
        m.tuple(&t);
    });
    if let Some(z) = e.zone {
        m.attr(CTA_ZONE, &z.to_be_bytes());
    }
    if let Some(id) = e.id {
        m.attr(CTA_ID, &id.to_be_bytes());
    }
    m.done()
}

/// Create entry `e` with `timeout` seconds to live: not used by felix,
/// but by benchmarks and tests that need a table of entries without the
/// traffic that would make them.
pub fn create<A: Family>(e: &Entry<A>, timeout: u32, seq: u32) -> Vec<u8> {
    const NLM_F_CREATE: u16 = 0x400;
    const NLM_F_EXCL: u16 = 0x200;
    const CTA_TIMEOUT: u16 = 7;
    let mut m = Msg::new(
        IPCTNL_MSG_CT_NEW,
        NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        seq,
        A::FAM.af(),
    );
    for (kind, t) in [(CTA_TUPLE_ORIG, e.orig), (CTA_TUPLE_REPLY, e.reply)] {
        m.nest(kind, |m| {
            m.tuple(&t);
        });
    }
    m.attr(CTA_TIMEOUT, &timeout.to_be_bytes());
    if let Some(z) = e.zone {
        m.attr(CTA_ZONE, &z.to_be_bytes());
    }
    m.done()
}

/// The attributes in `b`: (type without flags, payload). Stops at the
/// first one that does not fit.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let head = b.get(..4)?;
        let len = usize::from(u16::from_ne_bytes([head[0], head[1]]));
        let kind = u16::from_ne_bytes([head[2], head[3]]) & NLA_TYPE_MASK;
        let data = b.get(4..len.max(4))?;
        b = b.get(align(len.max(4))..).unwrap_or(&[]);
        Some((kind, data))
    })
}

fn be16(d: &[u8]) -> Option<u16> {
    Some(u16::from_be_bytes(d.get(..2)?.try_into().ok()?))
}

fn tuple<A: Family>(b: &[u8]) -> Option<Tuple<A>> {
    let (src_attr, dst_attr) = ip_attrs::<A>();
    let (mut src, mut dst, mut proto, mut sport, mut dport) = (None, None, None, None, None);
    for (k, d) in attrs(b) {
        match k {
            CTA_TUPLE_IP => {
                for (k, d) in attrs(d) {
                    // An entry of the other family has neither.
                    if k == src_attr {
                        src = A::from_bytes(d);
                    } else if k == dst_attr {
                        dst = A::from_bytes(d);
                    }
                }
            }
            CTA_TUPLE_PROTO => {
                for (k, d) in attrs(d) {
                    match k {
                        CTA_PROTO_NUM => proto = d.first().copied(),
                        CTA_PROTO_SRC_PORT => sport = be16(d),
                        CTA_PROTO_DST_PORT => dport = be16(d),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some(Tuple {
        src: src?,
        dst: dst?,
        proto: proto?,
        // ICMP and the like have no ports.
        src_port: sport.unwrap_or(0),
        dst_port: dport.unwrap_or(0),
    })
}

/// The entry in one ctnetlink message's payload (after nfgenmsg).
fn entry<A: Family>(b: &[u8]) -> Option<Entry<A>> {
    let (mut orig, mut reply, mut zone, mut id) = (None, None, None, None);
    for (k, d) in attrs(b) {
        match k {
            CTA_TUPLE_ORIG => orig = tuple(d),
            CTA_TUPLE_REPLY => reply = tuple(d),
            CTA_ZONE => zone = be16(d),
            CTA_ID => {
                id = d
                    .get(..4)
                    .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
            }
            _ => {}
        }
    }
    Some(Entry {
        orig: orig?,
        reply: reply?,
        zone,
        id,
    })
}

/// What one datagram of a dump holds.
#[derive(Debug, PartialEq)]
pub struct Read<A = Ipv4Addr> {
    pub entries: Vec<Entry<A>>,
    /// The dump ended (NLMSG_DONE).
    pub done: bool,
    /// Error codes (0: an ack) of NLMSG_ERROR messages.
    pub errors: Vec<i32>,
}

/// Decode the netlink messages in `buf`, entries of family `A`.
pub fn read<A: Family>(buf: &[u8]) -> Read<A> {
    let mut out = Read {
        entries: Vec::new(),
        done: false,
        errors: Vec::new(),
    };
    let mut at = 0;
    while let Some(head) = buf.get(at..at + 16) {
        let len = u32::from_ne_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let kind = u16::from_ne_bytes([head[4], head[5]]);
        if len < 16 {
            break;
        }
        let body = buf.get(at + 16..at.saturating_add(len)).unwrap_or(&[]);
        match kind {
            NLMSG_DONE => out.done = true,
            NLMSG_ERROR => {
                if let Some(e) = body.get(..4) {
                    out.errors
                        .push(-i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
                }
            }
            k if k == (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW => {
                if let Some(e) = body.get(4..).and_then(entry) {
                    out.entries.push(e);
                }
            }
            _ => {}
        }
        at = at.saturating_add(align(len));
    }
    out
}

/// A listed entry as the kernel writes it (for tests of the decoder).
#[cfg(test)]
pub fn listed<A: Family>(e: &Entry<A>, seq: u32) -> Vec<u8> {
    let mut m = Msg::new(IPCTNL_MSG_CT_NEW, 0, seq, A::FAM.af());
    for (kind, t) in [(CTA_TUPLE_ORIG, e.orig), (CTA_TUPLE_REPLY, e.reply)] {
        m.nest(kind, |m| {
            m.tuple(&t);
        });
    }
    // Attributes felix does not read come between.
    m.attr(3, &0x1a0u32.to_be_bytes());
    if let Some(z) = e.zone {
        m.attr(CTA_ZONE, &z.to_be_bytes());
    }
    if let Some(id) = e.id {
        m.attr(CTA_ID, &id.to_be_bytes());
    }
    m.done()
}
