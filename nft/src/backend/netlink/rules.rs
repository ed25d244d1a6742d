//! The rule shapes that go over netlink, each encoded as `nft` 1.0.6
//! encodes it (checked with `nft --debug=netlink`): the policy table's
//! rules (family and protocol tests, address, port and ICMP matches,
//! set lookups, log), and the profile chains' mark statements and
//! verdicts. A rule with any other statement, or one where nft would add
//! or merge expressions in a way not mirrored here, is left to `nft`.

use std::net::{Ipv4Addr, Ipv6Addr};

use nftables::expr::{BinaryOperation, Expression, MetaKey, NamedExpression};
use nftables::stmt::{Log, LogLevel, Operator, Statement};
use nftables::types::NfFamily;

pub use super::expr::{CmpOp, Expr, META_MARK, REG, reg};
use super::expr::{META_L4PROTO, META_NFPROTO};
use super::fields::{Ctx, Field, NFPROTO_IPV4, NFPROTO_IPV6};
use super::types::{DataType, Verdict, concat_parts, number, target, text};

/// The kernel's log prefix limit (NF_LOG_PREFIXLEN, with the zero).
const LOG_PREFIX_MAX: usize = 127;

/// What a rule needs to know of a set it looks up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetInfo {
    pub key: Vec<DataType>,
    pub interval: bool,
    /// NFTA_SET_ID, when the set is made in the same batch.
    pub id: Option<u32>,
}

fn meta_key(v: &Expression) -> Option<MetaKey> {
    match v {
        Expression::Named(NamedExpression::Meta(m)) => Some(m.key),
        _ => None,
    }
}

fn is_mark(v: &Expression) -> bool {
    meta_key(v) == Some(MetaKey::Mark)
}

fn byte(v: &Expression) -> Option<u8> {
    u8::try_from(number(v)?).ok()
}

/// `meta mark & n` and `meta mark | n` as (operator, n).
fn mark_op(v: &Expression) -> Option<(&'static str, u32)> {
    let Expression::BinaryOperation(b) = v else {
        return None;
    };
    match &**b {
        BinaryOperation::AND(m, n) if is_mark(m) => Some(("&", number(n)?)),
        BinaryOperation::OR(args) => match args.as_slice() {
            [m, n] if is_mark(m) => Some(("|", number(n)?)),
            _ => None,
        },
        _ => None,
    }
}

/// An address or prefix as nft compares it: a byte-aligned prefix loads
/// only its bytes, any other loads the whole address and masks it.
fn addr_match(
    f: Field,
    v6: bool,
    right: &Expression,
    equal: bool,
    out: &mut Vec<Expr>,
) -> Option<()> {
    let parse = |s: &str| -> Option<Vec<u8>> {
        Some(if v6 {
            s.parse::<Ipv6Addr>().ok()?.octets().to_vec()
        } else {
            s.parse::<Ipv4Addr>().ok()?.octets().to_vec()
        })
    };
    let full = f.len();
    let (mut addr, bits) = match right {
        Expression::String(s) => (parse(s)?, full * 8),
        Expression::Named(NamedExpression::Prefix(p)) => {
            let bits = p.len;
            if bits > full * 8 {
                return None;
            }
            (parse(text(&p.addr)?)?, bits)
        }
        _ => return None,
    };
    let mask: Vec<u8> = (0..full)
        .map(|i| {
            let left = bits.saturating_sub(i * 8).min(8);
            // `left` is at most 8: the shift cannot overflow a u16.
            (0xff00u16 >> left) as u8
        })
        .collect();
    // nft compares with the network address, host bits cleared.
    for (a, m) in addr.iter_mut().zip(&mask) {
        *a &= m;
    }
    let op = if equal { CmpOp::Eq } else { CmpOp::Neq };
    if bits > 0 && bits.is_multiple_of(8) {
        let n = bits / 8;
        addr.truncate(n as usize);
        out.extend([
            f.load(n, REG),
            Expr::Cmp {
                reg: REG,
                op,
                data: addr,
            },
        ]);
    } else {
        out.extend([
            f.load(full, REG),
            Expr::Bitwise {
                reg: REG,
                xor: vec![0; mask.len()],
                mask,
            },
            Expr::Cmp {
                reg: REG,
                op,
                data: addr,
            },
        ]);
    }
    Some(())
}

/// `f OP right` for a payload field.
fn field_match(
    f: Field,
    right: &Expression,
    equal: bool,
    ctx: &mut Ctx,
    sets: &dyn Fn(&str) -> Option<SetInfo>,
    out: &mut Vec<Expr>,
) -> Option<()> {
    ctx.depend(f, out)?;
    let op = if equal { CmpOp::Eq } else { CmpOp::Neq };
    if let Some(name) = text(right).and_then(|s| s.strip_prefix('@')) {
        let Field::Addr { v6, .. } = f else {
            return None;
        };
        let t = if v6 {
            DataType::Ipv6Addr
        } else {
            DataType::Ipv4Addr
        };
        return lookup(name, &[t], equal, sets, vec![f.load(f.len(), REG)], out);
    }
    ctx.compare(f);
    match f {
        Field::Addr { v6, .. } => addr_match(f, v6, right, equal, out),
        Field::Icmp { .. } => {
            out.extend([
                f.load(1, REG),
                Expr::Cmp {
                    reg: REG,
                    op,
                    data: vec![byte(right)?],
                },
            ]);
            Some(())
        }
        Field::Port { .. } => {
            let port =
                |v: &Expression| Some(u16::try_from(number(v)?).ok()?.to_be_bytes().to_vec());
            out.push(f.load(2, REG));
            if let Expression::Range(r) = right {
                let [lo, hi] = &r.range;
                let (lo, hi) = (port(lo)?, port(hi)?);
                if lo > hi {
                    return None;
                }
                // nft tests an inclusive range as two compares, and its
                // negation with the range expression.
                if equal {
                    out.extend([
                        Expr::Cmp {
                            reg: REG,
                            op: CmpOp::Gte,
                            data: lo,
                        },
                        Expr::Cmp {
                            reg: REG,
                            op: CmpOp::Lte,
                            data: hi,
                        },
                    ]);
                } else {
                    out.push(Expr::Range {
                        reg: REG,
                        equal: false,
                        from: lo,
                        to: hi,
                    });
                }
            } else {
                out.push(Expr::Cmp {
                    reg: REG,
                    op,
                    data: port(right)?,
                });
            }
            Some(())
        }
    }
}

/// A lookup of the key `loads` put in the registers, in set `name`,
/// whose key type must be `key` (nft refuses any other; the kernel
/// would not).
fn lookup(
    name: &str,
    key: &[DataType],
    equal: bool,
    sets: &dyn Fn(&str) -> Option<SetInfo>,
    loads: Vec<Expr>,
    out: &mut Vec<Expr>,
) -> Option<()> {
    let set = sets(name)?;
    if set.key != key {
        return None;
    }
    out.extend(loads);
    out.push(Expr::Lookup {
        reg: REG,
        set: name.to_string(),
        set_id: set.id,
        invert: !equal,
    });
    Some(())
}

/// `addr . meta l4proto [. port] @set`: each part in the registers from
/// the next 32-bit word on.
fn concat_lookup(
    parts: &[Expression],
    right: &Expression,
    equal: bool,
    ctx: &mut Ctx,
    sets: &dyn Fn(&str) -> Option<SetInfo>,
    out: &mut Vec<Expr>,
) -> Option<()> {
    let name = text(right)?.strip_prefix('@')?;
    let l4 = |p: &Expression| meta_key(p) == Some(MetaKey::L4proto);
    let (addr, port) = match parts {
        [a, p] if l4(p) => (Field::parse(a)?, None),
        [a, p, t] if l4(p) => (Field::parse(a)?, Some(Field::parse(t)?)),
        _ => return None,
    };
    let Field::Addr { v6, .. } = addr else {
        return None;
    };
    ctx.depend(addr, out)?;
    let mut key = vec![
        if v6 {
            DataType::Ipv6Addr
        } else {
            DataType::Ipv4Addr
        },
        DataType::InetProto,
    ];
    let proto_unit = addr.len() / 4;
    let proto_reg = reg(proto_unit);
    let mut loads = vec![
        addr.load(addr.len(), REG),
        Expr::MetaLoad {
            key: META_L4PROTO,
            reg: proto_reg,
        },
    ];
    let interval = sets(name)?.interval;
    if interval {
        loads.push(Expr::Hton {
            reg: proto_reg,
            len: 1,
            size: 2,
        });
    }
    if let Some(p) = port {
        let Field::Port { .. } = p else {
            return None;
        };
        key.push(DataType::InetService);
        loads.push(p.load(2, reg(proto_unit + 1)));
    }
    lookup(name, &key, equal, sets, loads, out)
}

/// `log`, with a prefix and a level or without; no other option.
fn log(body: &Option<Log>) -> Option<Expr> {
    let Some(l) = body else {
        return Some(Expr::Log {
            prefix: None,
            level: None,
        });
    };
    if l.group.is_some() || l.snaplen.is_some() || l.queue_threshold.is_some() || l.flags.is_some()
    {
        return None;
    }
    let prefix = match &l.prefix {
        None => None,
        Some(p) => {
            if p.len() > LOG_PREFIX_MAX || p.contains('\0') {
                return None;
            }
            Some(p.to_string())
        }
    };
    let level = match l.level {
        None => None,
        Some(l) => Some(match l {
            LogLevel::Emerg => 0,
            LogLevel::Alert => 1,
            LogLevel::Crit => 2,
            LogLevel::Err => 3,
            LogLevel::Warn => 4,
            LogLevel::Notice => 5,
            LogLevel::Info => 6,
            LogLevel::Debug => 7,
            LogLevel::Audit => return None,
        }),
    };
    Some(Expr::Log { prefix, level })
}

/// `meta KEY OP right` for the keys other than mark.
fn meta_match(
    key: MetaKey,
    right: &Expression,
    equal: bool,
    ctx: &mut Ctx,
    out: &mut Vec<Expr>,
) -> Option<()> {
    if !ctx.inet {
        return None;
    }
    let (key, value) = match key {
        MetaKey::Nfproto => {
            let f = match text(right)? {
                "ipv4" => NFPROTO_IPV4,
                "ipv6" => NFPROTO_IPV6,
                _ => return None,
            };
            if !equal || ctx.nfproto.is_some_and(|n| n != f) {
                return None;
            }
            ctx.nfproto = Some(f);
            (META_NFPROTO, f)
        }
        MetaKey::L4proto => {
            let p = byte(right)?;
            if equal {
                if ctx.l4proto.is_some_and(|x| x != p) {
                    return None;
                }
                ctx.l4proto = Some(p);
            }
            (META_L4PROTO, p)
        }
        _ => return None,
    };
    out.extend([
        Expr::MetaLoad { key, reg: REG },
        Expr::Cmp {
            reg: REG,
            op: if equal { CmpOp::Eq } else { CmpOp::Neq },
            data: vec![value],
        },
    ]);
    Some(())
}

fn mark_bits(op: (&str, u32)) -> Option<Expr> {
    let (mask, xor) = match op {
        ("&", n) => (n, 0),
        ("|", n) => (!n, n),
        _ => return None,
    };
    Some(Expr::Bitwise {
        reg: REG,
        mask: mask.to_ne_bytes().to_vec(),
        xor: xor.to_ne_bytes().to_vec(),
    })
}

fn load_mark() -> Expr {
    Expr::MetaLoad {
        key: META_MARK,
        reg: REG,
    }
}

/// A rule's statements as expressions, when every one is a shape this
/// module writes as nft does; `None` otherwise. `family`: the table's;
/// `sets`: the sets of the table the rule may look up.
pub fn parse(
    stmts: &[Statement],
    family: NfFamily,
    sets: &dyn Fn(&str) -> Option<SetInfo>,
) -> Option<Vec<Expr>> {
    let mut out = Vec::new();
    let mut ctx = Ctx {
        inet: family == NfFamily::INet,
        ..Ctx::default()
    };
    for st in stmts {
        match st {
            Statement::Mangle(m) => {
                if !is_mark(&m.key) {
                    return None;
                }
                let bits = mark_bits(mark_op(&m.value)?)?;
                out.extend([
                    load_mark(),
                    bits,
                    Expr::MetaStore {
                        key: META_MARK,
                        reg: REG,
                    },
                ]);
            }
            Statement::Match(m) => {
                let equal = match m.op {
                    Operator::EQ => true,
                    Operator::NEQ => false,
                    _ => return None,
                };
                let (left, right) = (&m.left, &m.right);
                if is_mark(left) || mark_op(left).is_some() {
                    out.push(load_mark());
                    if !is_mark(left) {
                        match mark_op(left)? {
                            ("&", _) => out.push(mark_bits(mark_op(left)?)?),
                            _ => return None,
                        }
                    }
                    out.push(Expr::Cmp {
                        reg: REG,
                        op: if equal { CmpOp::Eq } else { CmpOp::Neq },
                        data: number(right)?.to_ne_bytes().to_vec(),
                    });
                } else if let Some(key) = meta_key(left) {
                    meta_match(key, right, equal, &mut ctx, &mut out)?;
                } else if let Some(f) = Field::parse(left) {
                    field_match(f, right, equal, &mut ctx, sets, &mut out)?;
                } else {
                    let parts = concat_parts(left)?;
                    concat_lookup(parts, right, equal, &mut ctx, sets, &mut out)?;
                }
            }
            Statement::Log(l) => out.push(log(l)?),
            Statement::Jump(t) => out.push(Expr::Verdict(Verdict::Jump(target(&t.target)?))),
            Statement::Goto(t) => out.push(Expr::Verdict(Verdict::Goto(target(&t.target)?))),
            Statement::Return(_) => out.push(Expr::Verdict(Verdict::Return)),
            Statement::Drop(_) => out.push(Expr::Verdict(Verdict::Drop)),
            Statement::Accept(_) => out.push(Expr::Verdict(Verdict::Accept)),
            _ => return None,
        }
    }
    if ctx.compares.iter().any(|n| *n > 1) {
        return None;
    }
    Some(out)
}
