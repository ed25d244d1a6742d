//! A batch written as it is made: element messages appended one chunk
//! at a time, so that a table of hundreds of thousands of elements is
//! held once, as the bytes the kernel reads, and not also as a list of
//! elements first. The whole batch is still one transaction (the kernel
//! takes a batch from one send), so its bytes are the floor.

use super::attrs::Attrs;
use super::message::*;
use super::ops::Elem;

const NLM_F_ACK_BYTE: u16 = NLM_F_ACK;

/// A batch being written: begun at [`Stream::new`], ended by
/// [`Stream::finish`].
pub struct Stream {
    out: Vec<u8>,
    seq: u32,
    /// Where the last message of the batch (not batch-begin) starts.
    last: Option<usize>,
    /// The elements of the message being filled and where it goes.
    pending: Vec<Elem>,
    target: Option<(u8, String, String)>,
}

impl Stream {
    /// A batch with sequence numbers from `seq`.
    pub fn new(seq: u32) -> Stream {
        let mut out = Vec::new();
        batch_mark(&mut out, NFNL_MSG_BATCH_BEGIN, seq);
        Stream {
            out,
            seq,
            last: None,
            pending: Vec::with_capacity(PER_MESSAGE),
            target: None,
        }
    }

    fn push(&mut self, kind: u16, flags: u16, family: u8, body: &[u8]) {
        self.seq = self.seq.wrapping_add(1);
        self.last = Some(self.out.len());
        message(
            &mut self.out,
            (NFNL_SUBSYS_NFTABLES << 8) | kind,
            NLM_F_REQUEST | flags,
            self.seq,
            family,
            0,
            body,
        );
    }

    fn list_body(table: &str, set: &str) -> Attrs {
        let mut body = Attrs::new();
        body.string(NFTA_SET_ELEM_LIST_TABLE, table)
            .string(NFTA_SET_ELEM_LIST_SET, set);
        body
    }

    /// Remove every element of set `set` (a delete naming no element).
    pub fn flush_set(&mut self, family: u8, table: &str, set: &str) {
        self.send_pending();
        let body = Self::list_body(table, set);
        self.push(NFT_MSG_DELSETELEM, 0, family, &body.0);
    }

    /// Add `e` to set `set`; elements are sent [`PER_MESSAGE`] to a
    /// message.
    pub fn add(&mut self, family: u8, table: &str, set: &str, e: Elem) {
        let same = self
            .target
            .as_ref()
            .is_some_and(|(f, t, s)| *f == family && t == table && s == set);
        if !same {
            self.send_pending();
            self.target = Some((family, table.to_string(), set.to_string()));
        }
        self.pending.push(e);
        if self.pending.len() == PER_MESSAGE {
            self.send_pending();
        }
    }

    fn send_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let Some((family, table, set)) = self.target.clone() else {
            return;
        };
        let mut list = Attrs::new();
        for e in self.pending.drain(..) {
            list.nested(NFTA_LIST_ELEM, elem_attrs(&e));
        }
        let mut body = Self::list_body(&table, &set);
        body.nested(NFTA_SET_ELEM_LIST_ELEMENTS, list);
        self.push(NFT_MSG_NEWSETELEM, NLM_F_CREATE, family, &body.0);
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_none() && self.pending.is_empty()
    }

    /// The batch's bytes and how many messages ask for an ack (the last
    /// one does, as in [`batch`]).
    pub fn finish(mut self) -> (Vec<u8>, usize) {
        self.send_pending();
        let acked = match self.last {
            Some(at) => {
                // nlmsg_flags sit after the length and the type.
                let f = at + 6;
                let flags = u16::from_ne_bytes([self.out[f], self.out[f + 1]]) | NLM_F_ACK_BYTE;
                self.out[f..f + 2].copy_from_slice(&flags.to_ne_bytes());
                1
            }
            None => 0,
        };
        self.seq = self.seq.wrapping_add(1);
        batch_mark(&mut self.out, NFNL_MSG_BATCH_END, self.seq);
        (self.out, acked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::netlink::message::{ElementOp, Op};

    fn elem(i: u32) -> Elem {
        Elem {
            key: i.to_be_bytes().to_vec(),
            data: None,
        }
    }

    #[test]
    fn elements_streamed_make_the_bytes_of_the_same_batch_made_whole() {
        let elems: Vec<Elem> = (0..600).map(elem).collect();
        let op = ElementOp {
            add: true,
            family: 2,
            table: "t".into(),
            set: "s".into(),
            elems: elems.clone(),
        };
        let whole = batch(&[Op::Elements(op)], 7);
        let mut s = Stream::new(7);
        for e in elems {
            s.add(2, "t", "s", e);
        }
        assert_eq!(s.finish(), whole);
    }

    #[test]
    fn a_flush_is_one_message_and_only_the_last_message_asks_for_an_ack() {
        let mut s = Stream::new(1);
        assert!(s.is_empty());
        s.flush_set(2, "t", "a");
        s.add(2, "t", "a", elem(1));
        s.add(2, "t", "b", elem(2));
        let (bytes, acked) = s.finish();
        assert_eq!(acked, 1);
        // begin, flush, a's element, b's element, end.
        let mut at = 0;
        let mut flags = Vec::new();
        while at < bytes.len() {
            let len = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            flags.push(u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]) & NLM_F_ACK);
            at += len;
        }
        assert_eq!(flags, vec![0, 0, 0, NLM_F_ACK, 0]);
    }
}
