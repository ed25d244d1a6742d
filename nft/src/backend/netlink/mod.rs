//! Changes to felix's tables written straight to nf_tables over
//! netlink, skipping the `nft` program.
//!
//! With a large table in the kernel, every `nft` run costs 10–25 ms before
//! it applies anything (process start, reading the table into its cache,
//! parsing JSON), while the kernel commits a few elements or rules in
//! microseconds. So a batch made only of commands encoded here (element
//! adds and deletes on sets whose types are known, plain and interval
//! sets of the policy table's types declared and deleted, regular chains,
//! rules of the shapes in [`rules`]) goes over netlink as one
//! transaction; anything else goes to `nft` whole, as before. Every
//! encoding here is the one nft 1.0.6 sends for the same JSON, so what
//! the kernel holds does not depend on the path.
//!
//! No crate writes set elements with map values over netlink (rustables
//! writes keys only), hence the small encoder in [`message`].

pub mod message;
pub mod rules;
pub mod socket;
pub mod types;

use std::collections::HashMap;

use serde_json::Value;

use message::{ChainRef, Data, Elem, ElementOp, Op, RangeElem, RangeElementOp, SetDecl, SetRef};
use rules::SetInfo;
use types::{KeyType, ValueType, Verdict};

/// A set or map as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decl {
    key: KeyType,
    /// `None` for a set.
    value: Option<ValueType>,
    /// An interval set of a concatenated type: each element is a box,
    /// a start key and an end key.
    interval: bool,
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

/// A declaration felix can encode elements for: known key and value
/// types, and no flags that change the element format but `interval` on
/// a set of a concatenated type (a one-type interval set stores ranges
/// as pairs of elements, which is not encoded here).
fn decl(o: &serde_json::Map<String, Value>, map: bool) -> Option<Decl> {
    let key = KeyType::parse(o.get("type")?)?;
    let mut interval = false;
    if let Some(flags) = o.get("flags") {
        for f in flags.as_array()? {
            match f.as_str()? {
                "timeout" => {}
                "interval" if !map && key.0.len() > 1 => interval = true,
                _ => return None,
            }
        }
    }
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
    Some(Decl {
        key,
        value,
        interval,
    })
}

/// A set as a batch being encoded sees it.
#[derive(Debug, Clone)]
enum Local {
    /// Declared earlier in the batch (with its NFTA_SET_ID).
    Declared(Decl, u32),
    /// Deleted earlier in the batch.
    Deleted,
}

/// The sets a batch declares and deletes, over those already known.
struct Batch<'a> {
    known: &'a Declarations,
    local: HashMap<SetId, Local>,
    next_id: u32,
}

impl Batch<'_> {
    /// A set's declaration, and its NFTA_SET_ID if this batch made it.
    fn get(&self, k: &SetId) -> Option<(&Decl, Option<u32>)> {
        match self.local.get(k) {
            Some(Local::Declared(d, id)) => Some((d, Some(*id))),
            Some(Local::Deleted) => None,
            None => self.known.sets.get(k)?.as_ref().map(|d| (d, None)),
        }
    }
}

/// The commands a batch may hold, split into verb, object kind, object.
fn command(cmd: &Value) -> Option<(&str, &str, &serde_json::Map<String, Value>)> {
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
    Some((verb, what, o.as_object()?))
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
                    if let Some(k) = o.as_object().and_then(id_of) {
                        // A set already declared keeps its declaration: nft
                        // treats a repeated `add set` as a no-op.
                        let d = o.as_object().and_then(|m| decl(m, what == "map"));
                        self.sets.entry(k).or_insert(d);
                    }
                }
                ("delete" | "destroy", "set" | "map") => {
                    if let Some(k) = o.as_object().and_then(id_of) {
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
    /// be encoded (element adds and deletes on known sets; sets declared
    /// and deleted; regular chains made, flushed, deleted; rules of the
    /// shapes in [`rules`]); `None` otherwise.
    pub fn ops(&self, batch: &Value) -> Option<Vec<Op>> {
        let mut b = Batch {
            known: self,
            local: HashMap::new(),
            next_id: 1,
        };
        let mut out = Vec::new();
        for c in batch.get("nftables")?.as_array()? {
            b.op(c, &mut out)?;
        }
        Some(out)
    }

    /// One command as an element operation, if it is an element add or
    /// delete on a set without intervals that can be encoded.
    pub fn element_op(&self, cmd: &Value) -> Option<ElementOp> {
        let (verb, what, o) = command(cmd)?;
        if what != "element" {
            return None;
        }
        let add = match verb {
            "add" => true,
            "delete" => false,
            _ => return None,
        };
        let k = id_of(o)?;
        let d = self.sets.get(&k)?.as_ref()?;
        (!d.interval).then_some(())?;
        element_op(d, k, add, o.get("elem")?)
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

impl Batch<'_> {
    /// Append the operations of one command to `out`; `None` when it
    /// cannot be encoded.
    fn op(&mut self, cmd: &Value, out: &mut Vec<Op>) -> Option<()> {
        let (verb, what, o) = command(cmd)?;
        let family = o.get("family")?.as_str()?;
        let at = |chain_key: &str| {
            Some(ChainRef {
                family: family_number(family)?,
                table: o.get("table")?.as_str()?.to_string(),
                chain: o.get(chain_key)?.as_str()?.to_string(),
            })
        };
        // Only the keys named: a base chain's hook, a rule's position or
        // comment, a handle, a set's policy or size, each go to nft.
        let only = |keys: &[&str]| o.keys().all(|k| keys.contains(&k.as_str()));
        match (verb, what) {
            ("add" | "delete", "element") if only(&["family", "table", "name", "elem"]) => {
                let k = id_of(o)?;
                let (d, _) = self.get(&k)?;
                out.push(if d.interval {
                    Op::RangeElements(range_op(d, k, verb == "add", o.get("elem")?)?)
                } else {
                    Op::Elements(element_op(d, k, verb == "add", o.get("elem")?)?)
                });
            }
            ("add", "set") if only(&["family", "table", "name", "type", "flags", "elem"]) => {
                self.add_set(o, out)?;
            }
            ("delete", "set") if only(&["family", "table", "name", "type", "flags"]) => {
                let k = id_of(o)?;
                out.push(Op::DeleteSet(SetRef {
                    family: family_number(&k.0)?,
                    table: k.1.clone(),
                    name: k.2.clone(),
                }));
                self.local.insert(k, Local::Deleted);
            }
            ("add", "chain") if only(&["family", "table", "name"]) => {
                out.push(Op::AddChain(at("name")?));
            }
            ("flush", "chain") if only(&["family", "table", "name"]) => {
                out.push(Op::FlushChain(at("name")?));
            }
            ("delete", "chain") if only(&["family", "table", "name"]) => {
                out.push(Op::DeleteChain(at("name")?));
            }
            ("add", "rule") if only(&["family", "table", "chain", "expr"]) => {
                let c = at("chain")?;
                let table = c.table.clone();
                let sets = |name: &str| {
                    let (d, id) =
                        self.get(&(family.to_string(), table.clone(), name.to_string()))?;
                    d.value.is_none().then(|| SetInfo {
                        key: d.key.0.clone(),
                        interval: d.interval,
                        id,
                    })
                };
                let exprs = rules::parse(o.get("expr")?.as_array()?, family, &sets)?;
                out.push(Op::AddRule(c, exprs));
            }
            _ => return None,
        }
        Some(())
    }

    /// `add set`: NEWSET, then its elements if it has some.
    fn add_set(&mut self, o: &serde_json::Map<String, Value>, out: &mut Vec<Op>) -> Option<()> {
        let k = id_of(o)?;
        let d = decl(o, false)?;
        // A set already there is kept as it was (nft and the kernel do
        // the same), so its elements would be read by the old type:
        // encode only a declaration that changes nothing.
        if let Some(Some(was)) = self.known.sets.get(&k)
            && *was != d
        {
            return None;
        }
        if let Some(Local::Declared(was, _)) = self.local.get(&k)
            && *was != d
        {
            return None;
        }
        // Flags: none, or `["interval"]` alone (on a concatenation).
        match o.get("flags") {
            None => {}
            Some(f) if d.interval && f.as_array().map(Vec::len) == Some(1) => {}
            Some(_) => return None,
        }
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1)?;
        let family = family_number(&k.0)?;
        out.push(Op::AddSet(SetDecl::new(
            family,
            &k.1,
            &k.2,
            d.key.clone(),
            d.interval,
            id,
        )?));
        if let Some(elem) = o.get("elem") {
            // An empty list is left to nft.
            (!elem.as_array()?.is_empty()).then_some(())?;
            out.push(if d.interval {
                Op::RangeElements(range_op(&d, k.clone(), true, elem)?)
            } else {
                Op::Elements(element_op(&d, k.clone(), true, elem)?)
            });
        }
        self.local.insert(k, Local::Declared(d, id));
        Some(())
    }
}

fn id_of(o: &serde_json::Map<String, Value>) -> Option<SetId> {
    Some((
        o.get("family")?.as_str()?.to_string(),
        o.get("table")?.as_str()?.to_string(),
        o.get("name")?.as_str()?.to_string(),
    ))
}

/// Element adds or deletes on a set or map without intervals.
fn element_op(d: &Decl, k: SetId, add: bool, elem: &Value) -> Option<ElementOp> {
    let elems = elem
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

/// Element adds or deletes on an interval set of a concatenated type:
/// each element `{"concat": [...]}`, each part a value or a range. A
/// delete names the element by both keys, as nft does.
fn range_op(d: &Decl, k: SetId, add: bool, elem: &Value) -> Option<RangeElementOp> {
    let elems = elem
        .as_array()?
        .iter()
        .map(|e| {
            let (key, key_end) = d.key.encode_span(e)?;
            Some(RangeElem { key, key_end })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(RangeElementOp {
        add,
        family: family_number(&k.0)?,
        table: k.1,
        set: k.2,
        elems,
    })
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
