//! The few rule shapes that go over netlink: a policy profile chain's
//! rules (mark bits cleared, set and tested; jumps; return; drop), so that
//! a pod relabelled into a new profile does not wait for `nft`. A rule
//! with any other statement is left to `nft`.

use serde_json::Value;

use super::types::Verdict;

/// `meta mark` (NFT_META_MARK).
pub const META_MARK: u32 = 3;
/// The first 32-bit data register (NFT_REG32_00): every expression here
/// works on it.
pub const REG: u32 = 8;

/// One kernel expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    MetaLoad {
        key: u32,
    },
    MetaStore {
        key: u32,
    },
    /// `reg = (reg & mask) ^ xor`.
    Bitwise {
        mask: u32,
        xor: u32,
    },
    Cmp {
        equal: bool,
        data: u32,
    },
    Verdict(Verdict),
}

impl Expr {
    pub fn name(&self) -> &'static str {
        match self {
            Expr::MetaLoad { .. } | Expr::MetaStore { .. } => "meta",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Cmp { .. } => "cmp",
            Expr::Verdict(_) => "immediate",
        }
    }
}

fn is_mark(v: &Value) -> bool {
    v.get("meta")
        .and_then(|m| m.get("key"))
        .and_then(Value::as_str)
        == Some("mark")
}

fn number(v: &Value) -> Option<u32> {
    u32::try_from(v.as_u64()?).ok()
}

/// `meta mark OP n` as (operator, n).
fn mark_op(v: &Value) -> Option<(&str, u32)> {
    let m = v.as_object()?;
    if m.len() != 1 {
        return None;
    }
    let (op, args) = m.iter().next()?;
    let args = args.as_array()?;
    if args.len() != 2 || !is_mark(&args[0]) {
        return None;
    }
    Some((op.as_str(), number(&args[1])?))
}

/// A rule's statements as expressions, when every one is a shape this
/// module writes; `None` otherwise.
pub fn parse(stmts: &[Value]) -> Option<Vec<Expr>> {
    let mut out = Vec::new();
    for st in stmts {
        let m = st.as_object()?;
        if m.len() != 1 {
            return None;
        }
        let (kind, body) = m.iter().next()?;
        match kind.as_str() {
            "mangle" => {
                if !is_mark(body.get("key")?) {
                    return None;
                }
                let bits = match mark_op(body.get("value")?)? {
                    ("&", n) => Expr::Bitwise { mask: n, xor: 0 },
                    ("|", n) => Expr::Bitwise { mask: !n, xor: n },
                    _ => return None,
                };
                out.extend([
                    Expr::MetaLoad { key: META_MARK },
                    bits,
                    Expr::MetaStore { key: META_MARK },
                ]);
            }
            "match" => {
                let equal = match body.get("op")?.as_str()? {
                    "==" => true,
                    "!=" => false,
                    _ => return None,
                };
                let left = body.get("left")?;
                let data = number(body.get("right")?)?;
                out.push(Expr::MetaLoad { key: META_MARK });
                if !is_mark(left) {
                    match mark_op(left)? {
                        ("&", n) => out.push(Expr::Bitwise { mask: n, xor: 0 }),
                        _ => return None,
                    }
                }
                out.push(Expr::Cmp { equal, data });
            }
            "jump" | "goto" | "return" | "drop" | "accept" => {
                out.push(Expr::Verdict(Verdict::parse(st)?));
            }
            _ => return None,
        }
    }
    Some(out)
}
