//! Statements and expressions of the model as text close to what `nft
//! list ruleset` prints, for the fake backend's listing. Shapes without
//! a rendering here are printed as their JSON, which is stable too.

use nftables::expr::{
    BinaryOperation, Expression, MetaKey, NamedExpression, Payload, SetItem, Verdict,
};
use nftables::schema::{SetType, SetTypeValue};
use nftables::stmt::{Operator, Statement};

use crate::model::type_name;

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn meta(key: MetaKey) -> String {
    format!("meta {}", json(&key).trim_matches('"'))
}

pub fn verdict(v: &Verdict) -> String {
    match v {
        Verdict::Accept => "accept".into(),
        Verdict::Drop => "drop".into(),
        Verdict::Continue => "continue".into(),
        Verdict::Return => "return".into(),
        Verdict::Jump(t) => format!("jump {}", t.target),
        Verdict::Goto(t) => format!("goto {}", t.target),
    }
}

fn items(items: &[Expression]) -> String {
    let parts: Vec<String> = items.iter().map(expr).collect();
    format!("{{ {} }}", parts.join(", "))
}

pub fn expr(e: &Expression) -> String {
    match e {
        Expression::String(s) => s.to_string(),
        Expression::Number(n) => n.to_string(),
        Expression::Boolean(b) => b.to_string(),
        Expression::List(l) => items(l),
        Expression::Range(r) => format!("{}-{}", expr(&r.range[0]), expr(&r.range[1])),
        Expression::Verdict(v) => verdict(v),
        Expression::BinaryOperation(b) => match &**b {
            BinaryOperation::AND(a, c) => format!("{} & {}", expr(a), expr(c)),
            BinaryOperation::OR(v) => v.iter().map(expr).collect::<Vec<_>>().join(" | "),
            BinaryOperation::XOR(a, c) => format!("{} ^ {}", expr(a), expr(c)),
            BinaryOperation::LSHIFT(a, c) => format!("{} << {}", expr(a), expr(c)),
            BinaryOperation::RSHIFT(a, c) => format!("{} >> {}", expr(a), expr(c)),
        },
        Expression::Named(n) => match n {
            NamedExpression::Concat(parts) => {
                parts.iter().map(expr).collect::<Vec<_>>().join(" . ")
            }
            NamedExpression::Set(s) => {
                let parts: Vec<String> = s
                    .iter()
                    .map(|i| match i {
                        SetItem::Element(e) => expr(e),
                        SetItem::Mapping(k, v) => format!("{} : {}", expr(k), expr(v)),
                        SetItem::MappingStatement(k, s) => format!("{} : {}", expr(k), stmt(s)),
                    })
                    .collect();
                format!("{{ {} }}", parts.join(", "))
            }
            NamedExpression::Map(m) => format!("{} map {}", expr(&m.key), expr(&m.data)),
            NamedExpression::Prefix(p) => format!("{}/{}", expr(&p.addr), p.len),
            NamedExpression::Payload(Payload::PayloadField(f)) => {
                format!("{} {}", f.protocol, f.field)
            }
            NamedExpression::Meta(m) => meta(m.key),
            NamedExpression::CT(c) => format!("ct {}", c.key),
            NamedExpression::Numgen(g) => {
                format!(
                    "numgen {} mod {}",
                    json(&g.mode).trim_matches('"'),
                    g.ng_mod
                )
            }
            NamedExpression::Fib(f) => {
                // nft's order (its flags are a set, held in a HashSet).
                use nftables::expr::FibFlag::*;
                let flags: Vec<String> = [Saddr, Daddr, Mark, Iif, Oif]
                    .into_iter()
                    .filter(|k| f.flags.contains(k))
                    .map(|k| json(&k).trim_matches('"').to_string())
                    .collect();
                let result = json(&f.result);
                format!("fib {} {}", flags.join(" . "), result.trim_matches('"'))
            }
            other => json(other),
        },
    }
}

fn op(o: &Operator) -> String {
    json(o).trim_matches('"').to_string()
}

pub fn stmt(s: &Statement) -> String {
    match s {
        Statement::Accept(_) => "accept".into(),
        Statement::Drop(_) => "drop".into(),
        Statement::Continue(_) => "continue".into(),
        Statement::Return(_) => "return".into(),
        Statement::Jump(t) => format!("jump {}", t.target),
        Statement::Goto(t) => format!("goto {}", t.target),
        Statement::Match(m) => format!("{} {} {}", expr(&m.left), op(&m.op), expr(&m.right)),
        Statement::Mangle(m) => format!("{} set {}", expr(&m.key), expr(&m.value)),
        Statement::VerdictMap(v) => format!("{} vmap {}", expr(&v.key), expr(&v.data)),
        Statement::Masquerade(_) => "masquerade".into(),
        Statement::Log(l) => match l.as_ref().and_then(|l| l.prefix.as_ref()) {
            Some(p) => format!("log prefix {p:?}"),
            None => "log".into(),
        },
        other => json(other),
    }
}

/// A rule: its statements, space separated.
pub fn rule(stmts: &[Statement]) -> String {
    stmts.iter().map(stmt).collect::<Vec<_>>().join(" ")
}

/// A set's or map's key type: `ipv4_addr . inet_proto`.
pub fn key_type(t: &SetTypeValue) -> String {
    match t {
        SetTypeValue::Single(t) => type_name(*t).to_string(),
        SetTypeValue::Concatenated(ts) => types(ts),
    }
}

pub fn types(ts: &[SetType]) -> String {
    ts.iter()
        .map(|t| type_name(*t))
        .collect::<Vec<_>>()
        .join(" . ")
}
