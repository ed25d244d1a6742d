//! A batch written as it is made: each element encoded straight into
//! the batch's bytes as it comes, so that a table of hundreds of
//! thousands of elements is held once, as the bytes the kernel reads,
//! and not also as a list of elements or a buffer per attribute. The
//! whole batch is still one transaction (the kernel takes a batch from
//! one send), so its bytes are the floor.

use super::attrs::{close_nest, open_nest};
use super::message::*;
use super::ops::Elem;

const NLM_F_ACK_BYTE: u16 = NLM_F_ACK;

/// The element message being filled: where it goes, where it and its
/// element list begin in the batch, and how many elements it holds.
struct Open {
    family: u8,
    table: String,
    set: String,
    message: usize,
    list: usize,
    count: usize,
}

/// A batch being written: begun at [`Stream::new`], ended by
/// [`Stream::finish`].
pub struct Stream {
    out: Vec<u8>,
    seq: u32,
    /// Where the last message of the batch (not batch-begin) starts.
    last: Option<usize>,
    open: Option<Open>,
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
            open: None,
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

    fn list_body(table: &str, set: &str) -> Vec<u8> {
        let mut body = super::attrs::Attrs::new();
        body.string(NFTA_SET_ELEM_LIST_TABLE, table)
            .string(NFTA_SET_ELEM_LIST_SET, set);
        body.0
    }

    /// Remove every element of set `set` (a delete naming no element).
    pub fn flush_set(&mut self, family: u8, table: &str, set: &str) {
        self.close();
        let body = Self::list_body(table, set);
        self.push(NFT_MSG_DELSETELEM, 0, family, &body);
    }

    /// Add `e` to set `set`; elements go [`PER_MESSAGE`] to a message.
    pub fn add(&mut self, family: u8, table: &str, set: &str, e: Elem) {
        let value = match &e.data {
            None => ElemValue::None,
            Some(Data::Bytes(b)) => ElemValue::Bytes(b),
            Some(d) => ElemValue::Data(d),
        };
        self.element(family, table, set, &e.key, value);
    }

    /// Add the element `key` (with `value`, in a map of bytes) to set
    /// `set`: [`Stream::add`] for keys and values the caller holds as
    /// bytes already.
    pub fn add_bytes(
        &mut self,
        family: u8,
        table: &str,
        set: &str,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        let value = value.map_or(ElemValue::None, ElemValue::Bytes);
        self.element(family, table, set, key, value);
    }

    fn element(&mut self, family: u8, table: &str, set: &str, key: &[u8], value: ElemValue) {
        let same = self
            .open
            .as_ref()
            .is_some_and(|o| o.family == family && o.table == table && o.set == set);
        if !same {
            self.close();
            self.begin(family, table, set);
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        elem_into(&mut self.out, key, value);
        open.count += 1;
        if open.count == PER_MESSAGE {
            self.close();
        }
    }

    /// Begin an element message: its header (the length set at
    /// [`Stream::close`]), the set it names, and its element list.
    fn begin(&mut self, family: u8, table: &str, set: &str) {
        let message = self.out.len();
        self.push(
            NFT_MSG_NEWSETELEM,
            NLM_F_CREATE,
            family,
            &Self::list_body(table, set),
        );
        let list = open_nest(&mut self.out, NFTA_SET_ELEM_LIST_ELEMENTS);
        self.open = Some(Open {
            family,
            table: table.to_string(),
            set: set.to_string(),
            message,
            list,
            count: 0,
        });
    }

    /// End the element message being filled, if any.
    fn close(&mut self) {
        let Some(open) = self.open.take() else {
            return;
        };
        close_nest(&mut self.out, open.list);
        let len = (self.out.len() - open.message) as u32;
        self.out[open.message..open.message + 4].copy_from_slice(&len.to_ne_bytes());
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.last.is_none()
    }

    /// The batch's bytes and how many messages ask for an ack (the last
    /// one does, as in [`batch`]).
    pub fn finish(mut self) -> (Vec<u8>, usize) {
        self.close();
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

    /// Maps of bytes and of verdicts, messages filled and begun anew, a
    /// set changing mid-message, elements given whole or as bytes: the
    /// bytes written in place are those of the batch made whole from the
    /// same operations.
    #[test]
    fn elements_written_in_place_make_the_bytes_of_the_batch_made_whole() {
        use crate::backend::netlink::types::Verdict;
        let bytes: Vec<Elem> = (0..300u32)
            .map(|i| Elem {
                key: [i.to_be_bytes().as_slice(), &[6, 0, 0, 0]].concat(),
                data: Some(Data::Bytes((i * 7).to_ne_bytes().to_vec())),
            })
            .collect();
        let verdicts: Vec<Elem> = (0..3u32)
            .map(|i| Elem {
                key: i.to_ne_bytes().to_vec(),
                data: Some(Data::Verdict(match i {
                    0 => Verdict::Drop,
                    _ => Verdict::Goto(format!("pick-{i}")),
                })),
            })
            .collect();
        let op = |add: bool, set: &str, elems: &[Elem]| {
            Op::Elements(ElementOp {
                add,
                family: 10,
                table: "t".into(),
                set: set.into(),
                elems: elems.to_vec(),
            })
        };
        let whole = batch(
            &[
                op(true, "m", &bytes),
                op(true, "v", &verdicts),
                op(true, "s", &[elem(9)]),
            ],
            3,
        );
        let mut s = Stream::new(3);
        for e in &bytes[..100] {
            s.add(10, "t", "m", e.clone());
        }
        for e in &bytes[100..] {
            let Some(Data::Bytes(v)) = &e.data else {
                unreachable!()
            };
            s.add_bytes(10, "t", "m", &e.key, Some(v));
        }
        for e in &verdicts {
            s.add(10, "t", "v", e.clone());
        }
        s.add_bytes(10, "t", "s", &9u32.to_be_bytes(), None);
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
