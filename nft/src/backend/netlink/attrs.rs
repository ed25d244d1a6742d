//! Netlink attributes as nf_tables reads them: a builder for
//! type-length-value attributes (nested ones flagged), and the data
//! attributes of values and verdicts.

use super::ops::Data;

const NLA_F_NESTED: u16 = 0x8000;
pub(crate) const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;

/// A netlink attribute being built.
pub(crate) struct Attrs(pub(crate) Vec<u8>);

impl Attrs {
    pub(crate) fn new() -> Attrs {
        Attrs(Vec::new())
    }

    pub(crate) fn bytes(&mut self, kind: u16, payload: &[u8]) -> &mut Self {
        put(&mut self.0, kind, payload);
        self
    }

    pub(crate) fn string(&mut self, kind: u16, s: &str) -> &mut Self {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.bytes(kind, &b)
    }

    pub(crate) fn nested(&mut self, kind: u16, inner: Attrs) -> &mut Self {
        self.bytes(kind | NLA_F_NESTED, &inner.0)
    }
}

/// Append one attribute to `out`, padded to four bytes.
pub(crate) fn put(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    out.extend((len as u16).to_ne_bytes());
    out.extend(kind.to_ne_bytes());
    out.extend(payload);
    out.resize(out.len().div_ceil(4) * 4, 0);
}

/// Begin a nested attribute in `out`, written in place (no buffer of
/// its own); [`close_nest`] with the returned offset sets its length.
pub(crate) fn open_nest(out: &mut Vec<u8>, kind: u16) -> usize {
    let at = out.len();
    out.extend(0u16.to_ne_bytes());
    out.extend((kind | NLA_F_NESTED).to_ne_bytes());
    at
}

/// End the nested attribute begun at `at`: everything since is its
/// payload (already padded, as every attribute is).
pub(crate) fn close_nest(out: &mut [u8], at: usize) {
    let len = (out.len() - at) as u16;
    out[at..at + 2].copy_from_slice(&len.to_ne_bytes());
}

pub(crate) fn data_attrs(d: &Data) -> Attrs {
    let mut a = Attrs::new();
    match d {
        Data::Bytes(b) => {
            a.bytes(NFTA_DATA_VALUE, b);
        }
        Data::Verdict(v) => {
            let mut verdict = Attrs::new();
            verdict.bytes(NFTA_VERDICT_CODE, &v.code().to_be_bytes());
            if let Some(c) = v.chain() {
                verdict.string(NFTA_VERDICT_CHAIN, c);
            }
            a.nested(NFTA_DATA_VERDICT, verdict);
        }
    }
    a
}

pub(crate) fn value(v: &[u8]) -> Attrs {
    let mut a = Attrs::new();
    a.bytes(NFTA_DATA_VALUE, v);
    a
}
