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
        let len = 4 + payload.len();
        self.0.extend((len as u16).to_ne_bytes());
        self.0.extend(kind.to_ne_bytes());
        self.0.extend(payload);
        self.pad();
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

    pub(crate) fn pad(&mut self) {
        let n = self.0.len().div_ceil(4) * 4;
        self.0.resize(n, 0);
    }
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
