//! nftables statements and expressions, built with the `nftables` crate's
//! JSON schema types. Small constructors so the compiler reads as rules.

use std::borrow::Cow;

use ipnet::IpNet;
use nftables::expr::{
    CT, Expression, Meta, MetaKey, NamedExpression, Payload, PayloadField, Prefix, Range, SetItem,
};
use nftables::stmt::{JumpTarget, Log, LogLevel, Match, Operator, Statement};

pub type Stmts = Vec<Statement<'static>>;

pub fn s(text: impl Into<String>) -> Expression<'static> {
    Expression::String(Cow::Owned(text.into()))
}

pub fn meta(key: MetaKey) -> Expression<'static> {
    Expression::Named(NamedExpression::Meta(Meta { key }))
}

pub fn payload(protocol: &'static str, field: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::Payload(Payload::PayloadField(
        PayloadField {
            protocol: Cow::Borrowed(protocol),
            field: Cow::Borrowed(field),
        },
    )))
}

pub fn ct(key: &'static str) -> Expression<'static> {
    Expression::Named(NamedExpression::CT(CT {
        key: Cow::Borrowed(key),
        family: None,
        dir: None,
    }))
}

pub fn concat(parts: Vec<Expression<'static>>) -> Expression<'static> {
    Expression::Named(NamedExpression::Concat(parts))
}

pub fn matches(
    left: Expression<'static>,
    right: Expression<'static>,
    eq: bool,
) -> Statement<'static> {
    Statement::Match(Match {
        left,
        right,
        op: if eq { Operator::EQ } else { Operator::NEQ },
    })
}

/// A flag test (`ct state established,related`): any of `flags` set.
pub fn flags_set(left: Expression<'static>, flags: Expression<'static>) -> Statement<'static> {
    Statement::Match(Match {
        left,
        right: flags,
        op: Operator::IN,
    })
}

pub fn prefix(n: &IpNet) -> Expression<'static> {
    if n.prefix_len() == n.max_prefix_len() {
        return s(n.addr().to_string());
    }
    Expression::Named(NamedExpression::Prefix(Prefix {
        addr: Box::new(s(n.network().to_string())),
        len: u32::from(n.prefix_len()),
    }))
}

pub fn port_range(a: u16, b: u16) -> Expression<'static> {
    if a == b {
        Expression::Number(u32::from(a))
    } else {
        Expression::Range(Box::new(Range {
            range: [
                Expression::Number(u32::from(a)),
                Expression::Number(u32::from(b)),
            ],
        }))
    }
}

/// One item as itself, several as an anonymous set.
pub fn one_or_set(mut items: Vec<Expression<'static>>) -> Expression<'static> {
    if items.len() == 1 {
        return items.remove(0);
    }
    Expression::Named(NamedExpression::Set(
        items.into_iter().map(SetItem::Element).collect(),
    ))
}

pub fn jump(chain: &str) -> Statement<'static> {
    Statement::Jump(JumpTarget {
        target: Cow::Owned(chain.to_string()),
    })
}

pub fn goto(chain: &str) -> Statement<'static> {
    Statement::Goto(JumpTarget {
        target: Cow::Owned(chain.to_string()),
    })
}

/// `fib saddr . iif oif missing`: no route back to the packet's source
/// leaves through the interface it came in on (strict reverse path).
pub fn no_route_back() -> Statement<'static> {
    use nftables::expr::{Fib, FibFlag, FibResult};
    Statement::Match(Match {
        left: Expression::Named(NamedExpression::Fib(Fib {
            result: FibResult::Oif,
            flags: [FibFlag::Saddr, FibFlag::Iif].into_iter().collect(),
        })),
        right: Expression::Boolean(false),
        op: Operator::EQ,
    })
}

pub fn drop() -> Statement<'static> {
    Statement::Drop(None)
}

pub fn accept() -> Statement<'static> {
    Statement::Accept(None)
}

/// The kernel log limits a prefix to 127 bytes.
pub fn log(prefix: &str) -> Statement<'static> {
    let mut p = prefix.to_string();
    while p.len() > 127 {
        p.pop();
    }
    Statement::Log(Some(Log {
        prefix: Some(Cow::Owned(p)),
        group: None,
        snaplen: None,
        queue_threshold: None,
        level: Some(LogLevel::Info),
        flags: None,
    }))
}
