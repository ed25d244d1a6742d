//! Set and map element changes written straight to nf_tables over
//! netlink, skipping the `nft` program.
//!
//! With a large table in the kernel, every `nft` run costs 10–25 ms before
//! it applies anything (process start, reading the table into its cache,
//! parsing JSON), while the kernel commits a few elements in microseconds.
//! Most of felix's changes are only elements: a pod relabelled, an endpoint
//! replaced. So a batch made only of element adds and deletes, on sets
//! whose types are known, goes over netlink as one transaction; anything
//! else (rules, chains, set declarations, interval sets) goes to `nft` as
//! before. The batch is the same JSON either way, so what felix means by a
//! change does not depend on the path.
//!
//! No crate writes set elements with map values over netlink (rustables
//! writes keys only), hence the small encoder in [`message`].

pub mod message;
pub mod rules;
pub mod socket;
pub mod types;

use std::collections::HashMap;

use serde_json::Value;

use message::{ChainRef, Data, Elem, ElementOp, Op};
use types::{KeyType, ValueType, Verdict};

/// A set or map as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decl {
    key: KeyType,
    /// `None` for a set.
    value: Option<ValueType>,
}

/// (family, table, set).
type SetId = (String, String, String);

/// The declarations of the sets felix has written, learnt from the
/// batches themselves, so that element keys can be encoded.
#[derive(Debug, Default, Clone)]
pub struct Declarations {
    sets: HashMap<SetId, Option<Decl>>,
}

pub fn family_number(f: &str) -> Option<u8> {
    Some(match f {
        "inet" => 1,
        "ip" => 2,
        "arp" => 3,
        "netdev" => 5,
        "bridge" => 7,
        "ip6" => 10,
        _ => return None,
    })
}

fn id(o: &Value) -> Option<SetId> {
    Some((
        o.get("family")?.as_str()?.to_string(),
        o.get("table")?.as_str()?.to_string(),
        o.get("name")?.as_str()?.to_string(),
    ))
}

/// A declaration felix can encode elements for: known key and value
/// types, and no flags that change the element format (an interval set
/// stores ranges as pairs of elements).
fn decl(o: &Value, map: bool) -> Option<Decl> {
    let flags = o.get("flags").and_then(Value::as_array);
    if flags.is_some_and(|f| f.iter().any(|x| x.as_str() != Some("timeout"))) {
        return None;
    }
    let key = KeyType::parse(o.get("type")?)?;
    let value = if map {
        let v = o.get("map")?.as_str()?;
        Some(if v == "verdict" {
            ValueType::Verdict
        } else {
            ValueType::Data(types::DataType::parse(v)?)
        })
    } else {
        None
    };
    Some(Decl { key, value })
}

impl Declarations {
    /// Take note of the declarations in a batch the kernel accepted.
    pub fn observe(&mut self, batch: &Value) {
        let Some(cmds) = batch.get("nftables").and_then(Value::as_array) else {
            return;
        };
        for c in cmds {
            let Some((verb, body)) = c.as_object().and_then(|m| m.iter().next()) else {
                continue;
            };
            let Some((what, o)) = body.as_object().and_then(|m| m.iter().next()) else {
                continue;
            };
            match (verb.as_str(), what.as_str()) {
                ("add" | "create", "set" | "map") => {
                    if let Some(k) = id(o) {
                        // A set already declared keeps its declaration: nft
                        // treats a repeated `add set` as a no-op.
                        let d = decl(o, what == "map");
                        self.sets.entry(k).or_insert(d);
                    }
                }
                ("delete" | "destroy", "set" | "map") => {
                    if let Some(k) = id(o) {
                        self.sets.remove(&k);
                    }
                }
                ("delete" | "destroy", "table") => {
                    let (Some(f), Some(t)) = (
                        o.get("family").and_then(Value::as_str),
                        o.get("name").and_then(Value::as_str),
                    ) else {
                        continue;
                    };
                    self.sets.retain(|(sf, st, _), _| !(sf == f && st == t));
                }
                _ => {}
            }
        }
    }

    /// Forget a table's sets (its state in the kernel is unknown).
    pub fn forget(&mut self, family: &str, table: &str) {
        self.sets
            .retain(|(sf, st, _), _| !(sf == family && st == table));
    }

    /// `batch` as netlink operations, when every command is one that can
    /// be encoded (element adds and deletes on known sets; regular chains
    /// made, flushed, deleted; rules of the shapes in [`rules`]); `None`
    /// otherwise.
    pub fn ops(&self, batch: &Value) -> Option<Vec<Op>> {
        batch
            .get("nftables")?
            .as_array()?
            .iter()
            .map(|c| self.op(c))
            .collect()
    }

    fn op(&self, cmd: &Value) -> Option<Op> {
        if let Some(e) = self.element_op(cmd) {
            return Some(Op::Elements(e));
        }
        let m = cmd.as_object()?;
        if m.len() != 1 {
            return None;
        }
        let (verb, body) = m.iter().next()?;
        let b = body.as_object()?;
        if b.len() != 1 {
            return None;
        }
        let (what, o) = b.iter().next()?;
        let o = o.as_object()?;
        let at = |chain_key: &str| {
            Some(ChainRef {
                family: family_number(o.get("family")?.as_str()?)?,
                table: o.get("table")?.as_str()?.to_string(),
                chain: o.get(chain_key)?.as_str()?.to_string(),
            })
        };
        // Only the keys named: a base chain's hook, a rule's position or
        // comment, a handle, each go to nft.
        let only = |keys: &[&str]| o.keys().all(|k| keys.contains(&k.as_str()));
        match (verb.as_str(), what.as_str()) {
            ("add", "chain") if only(&["family", "table", "name"]) => {
                Some(Op::AddChain(at("name")?))
            }
            ("flush", "chain") if only(&["family", "table", "name"]) => {
                Some(Op::FlushChain(at("name")?))
            }
            ("delete", "chain") if only(&["family", "table", "name"]) => {
                Some(Op::DeleteChain(at("name")?))
            }
            ("add", "rule") if only(&["family", "table", "chain", "expr"]) => {
                let exprs = rules::parse(o.get("expr")?.as_array()?)?;
                Some(Op::AddRule(at("chain")?, exprs))
            }
            _ => None,
        }
    }

    /// One command as an element operation, if it is an element add or
    /// delete that can be encoded.
    pub fn element_op(&self, cmd: &Value) -> Option<ElementOp> {
        let m = cmd.as_object()?;
        if m.len() != 1 {
            return None;
        }
        let (verb, body) = m.iter().next()?;
        let add = match verb.as_str() {
            "add" => true,
            "delete" => false,
            _ => return None,
        };
        let o = body.as_object()?.get("element")?;
        let k = id(o)?;
        let d = self.sets.get(&k)?.as_ref()?;
        let elems = o
            .get("elem")?
            .as_array()?
            .iter()
            .map(|e| element(d, e, add))
            .collect::<Option<Vec<_>>>()?;
        Some(ElementOp {
            add,
            family: family_number(&k.0)?,
            table: k.1,
            set: k.2,
            elems,
        })
    }

    /// Split a batch that builds a table into what `nft` must write (every
    /// command but encodable element adds) and the element adds, for
    /// netlink afterwards. `self` must already have observed the batch.
    pub fn split_elements(&self, batch: Value) -> (Value, Vec<ElementOp>) {
        let Value::Object(mut top) = batch else {
            return (batch, Vec::new());
        };
        let Some(Value::Array(cmds)) = top.remove("nftables") else {
            return (Value::Object(top), Vec::new());
        };
        let mut rest = Vec::with_capacity(cmds.len());
        let mut ops = Vec::new();
        for c in cmds {
            let is_add = c.get("add").is_some();
            match self.element_op(&c).filter(|_| is_add) {
                Some(op) => ops.push(op),
                None => rest.push(c),
            }
        }
        top.insert("nftables".into(), Value::Array(rest));
        (Value::Object(top), ops)
    }
}

/// One element of a batch: a key for a set; `[key, value]` for a map (a
/// delete may give the key alone).
fn element(d: &Decl, e: &Value, add: bool) -> Option<Elem> {
    let (key, value) = match (&d.value, e.as_array()) {
        (Some(_), Some(pair)) if pair.len() == 2 => (&pair[0], Some(&pair[1])),
        (Some(_), _) if !add => (e, None),
        (None, _) => (e, None),
        _ => return None,
    };
    let data = match (add, d.value, value) {
        (false, _, _) | (true, None, None) => None,
        (true, Some(ValueType::Verdict), Some(v)) => Some(Data::Verdict(Verdict::parse(v)?)),
        (true, Some(ValueType::Data(t)), Some(v)) => Some(Data::Bytes(t.encode(v)?)),
        _ => return None,
    };
    Some(Elem {
        key: d.key.encode(key)?,
        data,
    })
}

#[cfg(test)]
mod tests;
