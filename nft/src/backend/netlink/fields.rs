//! The packet fields rules match on (addresses, ports, ICMP type and
//! code) with their headers and offsets, and what nft knows of a packet
//! at each point of a rule ([`Ctx`]), which decides the dependencies it
//! adds.

use nftables::expr::{Expression, NamedExpression, Payload};

use super::expr::{CmpOp, Expr, META_L4PROTO, REG};

/// NFT_PAYLOAD_NETWORK_HEADER, NFT_PAYLOAD_TRANSPORT_HEADER.
const NETWORK: u32 = 1;
const TRANSPORT: u32 = 2;
pub(crate) const NFPROTO_IPV4: u8 = 2;
pub(crate) const NFPROTO_IPV6: u8 = 10;
const IPPROTO_ICMP: u8 = 1;
const IPPROTO_ICMPV6: u8 = 58;

/// A packet field a rule matches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// `ip saddr` … `ip6 daddr`.
    Addr { v6: bool, offset: u32 },
    /// `th sport`, `th dport`.
    Port { offset: u32 },
    /// `icmp type` … `icmpv6 code`.
    Icmp { v6: bool, offset: u32 },
}

/// The fields by nft's names, with their offsets in their header.
const FIELDS: [(&str, &str, Field); 10] = [
    ("ip", "saddr", addr(false, 12)),
    ("ip", "daddr", addr(false, 16)),
    ("ip6", "saddr", addr(true, 8)),
    ("ip6", "daddr", addr(true, 24)),
    ("th", "sport", Field::Port { offset: 0 }),
    ("th", "dport", Field::Port { offset: 2 }),
    ("icmp", "type", icmp(false, 0)),
    ("icmp", "code", icmp(false, 1)),
    ("icmpv6", "type", icmp(true, 0)),
    ("icmpv6", "code", icmp(true, 1)),
];

const fn addr(v6: bool, offset: u32) -> Field {
    Field::Addr { v6, offset }
}

const fn icmp(v6: bool, offset: u32) -> Field {
    Field::Icmp { v6, offset }
}

impl Field {
    pub(crate) fn parse(v: &Expression) -> Option<Field> {
        let Expression::Named(NamedExpression::Payload(Payload::PayloadField(p))) = v else {
            return None;
        };
        let (proto, field) = (p.protocol.as_ref(), p.field.as_ref());
        FIELDS
            .iter()
            .find(|(p, f, _)| *p == proto && *f == field)
            .map(|(_, _, x)| *x)
    }

    pub(crate) fn base(self) -> u32 {
        match self {
            Field::Addr { .. } => NETWORK,
            Field::Port { .. } | Field::Icmp { .. } => TRANSPORT,
        }
    }

    pub(crate) fn offset(self) -> u32 {
        match self {
            Field::Addr { offset, .. } | Field::Port { offset } | Field::Icmp { offset, .. } => {
                offset
            }
        }
    }

    pub(crate) fn len(self) -> u32 {
        match self {
            Field::Addr { v6: false, .. } => 4,
            Field::Addr { v6: true, .. } => 16,
            Field::Port { .. } => 2,
            Field::Icmp { .. } => 1,
        }
    }

    pub(crate) fn load(self, len: u32, reg: u32) -> Expr {
        Expr::Payload {
            base: self.base(),
            offset: self.offset(),
            len,
            reg,
        }
    }
}

/// What nft knows of the packet at a point of a rule (its protocol
/// context), which decides the dependencies it adds.
#[derive(Debug, Default)]
pub(crate) struct Ctx {
    /// The table is of family inet: the only one whose dependencies
    /// are mirrored here.
    pub(crate) inet: bool,
    /// NFPROTO_* from `meta nfproto ==`.
    pub(crate) nfproto: Option<u8>,
    /// IPPROTO_* from `meta l4proto ==` or an ICMP dependency.
    pub(crate) l4proto: Option<u8>,
    /// Payload comparisons with the network and the transport header.
    /// nft merges adjacent ones into one load (`icmp type 8 icmp code
    /// 0` is one 2-byte compare), which is not mirrored here.
    pub(crate) compares: [u8; 2],
}

impl Ctx {
    /// A field may be matched: nft would add no dependency of its own
    /// (the rule states the family already), or only the ICMP one,
    /// which is added to `out`.
    pub(crate) fn depend(&mut self, f: Field, out: &mut Vec<Expr>) -> Option<()> {
        if !self.inet {
            return None;
        }
        let family = |v6| if v6 { NFPROTO_IPV6 } else { NFPROTO_IPV4 };
        match f {
            Field::Port { .. } => {}
            Field::Addr { v6, .. } => {
                if self.nfproto != Some(family(v6)) {
                    return None;
                }
            }
            Field::Icmp { v6, .. } => {
                if self.nfproto != Some(family(v6)) {
                    return None;
                }
                let proto = if v6 { IPPROTO_ICMPV6 } else { IPPROTO_ICMP };
                match self.l4proto {
                    Some(p) if p == proto => {}
                    Some(_) => return None,
                    None => {
                        out.extend([
                            Expr::MetaLoad {
                                key: META_L4PROTO,
                                reg: REG,
                            },
                            Expr::Cmp {
                                reg: REG,
                                op: CmpOp::Eq,
                                data: vec![proto],
                            },
                        ]);
                        self.l4proto = Some(proto);
                    }
                }
            }
        }
        Some(())
    }

    pub(crate) fn compare(&mut self, f: Field) {
        let i = usize::from(f.base() == TRANSPORT);
        self.compares[i] = self.compares[i].saturating_add(1);
    }
}
