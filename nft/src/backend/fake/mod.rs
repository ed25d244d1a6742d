//! An in-memory ruleset that transactions are applied to as nft applies
//! them (all or nothing), so that tests can assert on the tables felix
//! writes without root or a kernel: tables; chains with their rules;
//! sets and maps with their elements. Rules and elements are kept as
//! text ([`text`]); [`Fake::list`] prints the whole ruleset in a form
//! close to `nft list ruleset`.

pub mod text;

use std::collections::BTreeMap;

use nftables::expr::Expression;
use nftables::schema::{Chain, FlushObject, NfCmd, NfListObject};
use nftables::types::NfFamily;

use super::Backend;
use crate::model::{Command, family_name};
use crate::{Error, Transaction};

/// A chain: its hook line (base chains) and its rules, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeChain {
    pub hook: Option<String>,
    pub rules: Vec<String>,
}

/// A set or map: its declaration line and its elements (key, value).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeSet {
    pub map: bool,
    pub decl: String,
    pub elements: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeTable {
    pub chains: BTreeMap<String, FakeChain>,
    pub sets: BTreeMap<String, FakeSet>,
}

/// The ruleset: tables by (family, name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fake {
    pub tables: BTreeMap<(String, String), FakeTable>,
}

fn refused(what: String) -> Error {
    Error::Refused(what)
}

fn key(family: NfFamily, table: &str) -> (String, String) {
    (family_name(family).to_string(), table.to_string())
}

fn hook(c: &Chain) -> Option<String> {
    let hook = c.hook.as_ref()?;
    Some(format!(
        "type {} hook {} priority {}; policy {};",
        c._type.as_ref().map_or("filter".into(), word),
        word(hook),
        c.prio.unwrap_or(0),
        c.policy.as_ref().map_or("accept".into(), word),
    ))
}

/// A serialisable enum as the word it serialises to.
fn word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .trim_matches('"')
        .to_string()
}

/// An element: key and, for a map, value.
fn element(e: &Expression, map: bool) -> (String, Option<String>) {
    match e {
        Expression::List(kv) if map && kv.len() == 2 => {
            (text::expr(&kv[0]), Some(text::expr(&kv[1])))
        }
        other => (text::expr(other), None),
    }
}

impl FakeTable {
    fn chain(&mut self, name: &str) -> Result<&mut FakeChain, Error> {
        self.chains
            .get_mut(name)
            .ok_or_else(|| refused(format!("no chain {name}")))
    }

    fn set(&mut self, name: &str) -> Result<&mut FakeSet, Error> {
        self.sets
            .get_mut(name)
            .ok_or_else(|| refused(format!("no set {name}")))
    }

    fn declare(&mut self, name: &str, s: FakeSet, elem: Option<&[Expression]>) {
        let map = s.map;
        let set = self.sets.entry(name.to_string()).or_insert(s);
        for e in elem.unwrap_or_default() {
            let (k, v) = element(e, map);
            set.elements.insert(k, v);
        }
    }
}

impl Fake {
    pub fn new() -> Fake {
        Fake::default()
    }

    pub fn table(&self, family: &str, name: &str) -> Option<&FakeTable> {
        self.tables.get(&(family.to_string(), name.to_string()))
    }

    /// A chain's rules, as text.
    pub fn rules(&self, family: &str, table: &str, chain: &str) -> Option<&[String]> {
        Some(&self.table(family, table)?.chains.get(chain)?.rules)
    }

    /// A set's or map's elements: key, and value for a map.
    pub fn elements(
        &self,
        family: &str,
        table: &str,
        set: &str,
    ) -> Option<&BTreeMap<String, Option<String>>> {
        Some(&self.table(family, table)?.sets.get(set)?.elements)
    }

    fn at(&mut self, family: NfFamily, table: &str) -> Result<&mut FakeTable, Error> {
        self.tables
            .get_mut(&key(family, table))
            .ok_or_else(|| refused(format!("no table {} {table}", family_name(family))))
    }

    fn apply(&mut self, c: &Command) -> Result<(), Error> {
        let c = match c {
            Command::Nft(c) => c,
            Command::AddVerdictMap(m) => {
                let s = FakeSet {
                    map: true,
                    decl: format!("type {} : verdict", text::types(&m.key)),
                    elements: BTreeMap::new(),
                };
                self.at(m.family, &m.table)?.declare(&m.name, s, None);
                return Ok(());
            }
        };
        match c {
            NfCmd::Add(o) | NfCmd::Create(o) => self.add(o),
            NfCmd::Delete(o) => self.delete(o),
            NfCmd::Flush(FlushObject::Chain(ch)) => {
                self.at(ch.family, &ch.table)?
                    .chain(&ch.name)?
                    .rules
                    .clear();
                Ok(())
            }
            NfCmd::Flush(FlushObject::Set(s)) => {
                self.at(s.family, &s.table)?.set(&s.name)?.elements.clear();
                Ok(())
            }
            NfCmd::Flush(FlushObject::Map(m)) => {
                self.at(m.family, &m.table)?.set(&m.name)?.elements.clear();
                Ok(())
            }
            other => Err(Error::Unsupported(format!("{other:?}"))),
        }
    }

    fn add(&mut self, o: &NfListObject<'static>) -> Result<(), Error> {
        match o {
            NfListObject::Table(t) => {
                self.tables.entry(key(t.family, &t.name)).or_default();
            }
            NfListObject::Chain(c) => {
                let t = self.at(c.family, &c.table)?;
                let ch = t.chains.entry(c.name.to_string()).or_default();
                if let Some(h) = hook(c) {
                    ch.hook = Some(h);
                }
            }
            NfListObject::Rule(r) => {
                let rule = text::rule(&r.expr);
                self.at(r.family, &r.table)?
                    .chain(&r.chain)?
                    .rules
                    .push(rule);
            }
            NfListObject::Set(s) => {
                let mut decl = format!("type {}", text::key_type(&s.set_type));
                if let Some(f) = &s.flags {
                    let mut f: Vec<String> = f.iter().map(word).collect();
                    f.sort();
                    decl += &format!("; flags {}", f.join(","));
                }
                if let Some(t) = s.timeout {
                    decl += &format!("; timeout {t}s");
                }
                let fs = FakeSet {
                    map: false,
                    decl,
                    elements: BTreeMap::new(),
                };
                self.at(s.family, &s.table)?
                    .declare(&s.name, fs, s.elem.as_deref());
            }
            NfListObject::Map(m) => {
                let decl = format!(
                    "type {} : {}",
                    text::key_type(&m.set_type),
                    text::key_type(&m.map)
                );
                let fs = FakeSet {
                    map: true,
                    decl,
                    elements: BTreeMap::new(),
                };
                self.at(m.family, &m.table)?
                    .declare(&m.name, fs, m.elem.as_deref());
            }
            NfListObject::Element(e) => {
                let set = self.at(e.family, &e.table)?.set(&e.name)?;
                for x in e.elem.iter() {
                    let (k, v) = element(x, set.map);
                    set.elements.insert(k, v);
                }
            }
            other => return Err(Error::Unsupported(format!("add {other:?}"))),
        }
        Ok(())
    }

    fn delete(&mut self, o: &NfListObject<'static>) -> Result<(), Error> {
        match o {
            NfListObject::Table(t) => {
                self.tables
                    .remove(&key(t.family, &t.name))
                    .ok_or_else(|| refused(format!("no table {}", t.name)))?;
            }
            NfListObject::Chain(c) => {
                let t = self.at(c.family, &c.table)?;
                // The kernel refuses to delete a chain that has rules.
                if !t.chain(&c.name)?.rules.is_empty() {
                    return Err(refused(format!("chain {} is not empty", c.name)));
                }
                t.chains.remove(c.name.as_ref());
            }
            NfListObject::Set(s) => {
                let t = self.at(s.family, &s.table)?;
                t.set(&s.name)?;
                t.sets.remove(s.name.as_ref());
            }
            NfListObject::Map(m) => {
                let t = self.at(m.family, &m.table)?;
                t.set(&m.name)?;
                t.sets.remove(m.name.as_ref());
            }
            NfListObject::Element(e) => {
                let set = self.at(e.family, &e.table)?.set(&e.name)?;
                for x in e.elem.iter() {
                    // A map's element may be named by its key alone.
                    let (k, _) = element(x, set.map);
                    set.elements
                        .remove(&k)
                        .ok_or_else(|| refused(format!("no element {k} in {}", e.name)))?;
                }
            }
            other => return Err(Error::Unsupported(format!("delete {other:?}"))),
        }
        Ok(())
    }

    /// The ruleset as text close to `nft list ruleset`: tables, then in
    /// each its sets and maps and its chains, all by name.
    pub fn list(&self) -> String {
        let mut out = String::new();
        for ((family, name), t) in &self.tables {
            out += &format!("table {family} {name} {{\n");
            for (n, s) in &t.sets {
                let kind = if s.map { "map" } else { "set" };
                out += &format!("\t{kind} {n} {{\n\t\t{}\n", s.decl);
                if !s.elements.is_empty() {
                    let e: Vec<String> = s
                        .elements
                        .iter()
                        .map(|(k, v)| match v {
                            Some(v) => format!("{k} : {v}"),
                            None => k.clone(),
                        })
                        .collect();
                    out += &format!("\t\telements = {{ {} }}\n", e.join(", "));
                }
                out += "\t}\n";
            }
            for (n, c) in &t.chains {
                out += &format!("\tchain {n} {{\n");
                if let Some(h) = &c.hook {
                    out += &format!("\t\t{h}\n");
                }
                for r in &c.rules {
                    out += &format!("\t\t{r}\n");
                }
                out += "\t}\n";
            }
            out += "}\n";
        }
        out
    }
}

impl Backend for Fake {
    /// Every command applied to a copy, which replaces the ruleset only
    /// when all succeeded: a refused transaction changes nothing.
    fn commit(&mut self, tx: &Transaction) -> Result<(), Error> {
        let mut next = self.clone();
        for c in tx.commands() {
            next.apply(c)?;
        }
        *self = next;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
