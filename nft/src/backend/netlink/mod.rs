//! The netlink backend: a [`Transaction`] written straight to nf_tables
//! over netlink, skipping the `nft` program.
//!
//! With a large table in the kernel, every `nft` run costs 10–25 ms before
//! it applies anything (process start, reading the table into its cache,
//! parsing JSON), while the kernel commits a few elements or rules in
//! microseconds. So a batch made only of commands encoded here (element
//! adds and deletes on sets whose types are known, plain and interval
//! sets of the policy table's types declared and deleted, regular chains,
//! rules of the shapes in [`rules`]) goes over netlink as one
//! transaction; anything else goes to `nft` whole ([`super::program`]).
//! Every encoding here is the one nft 1.0.6 sends for the same commands,
//! so what the kernel holds does not depend on the path. The encoder
//! reads the model's typed commands; no JSON is involved.
//!
//! No crate writes set elements with map values over netlink (rustables
//! writes keys only), hence the small encoder in [`message`].

mod attrs;
pub mod commit;
pub mod expr;
mod expr_attrs;
mod fields;
pub mod message;
pub mod ops;
mod ranges;
pub mod rules;
pub mod socket;
pub mod stream;
pub mod types;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use nftables::expr::Expression;
use nftables::schema::{FlushObject, Map, NfCmd, NfListObject, Set, SetFlag, SetTypeValue};
use nftables::types::NfFamily;

use crate::Transaction;
use crate::model::{Command, VerdictMap, family_name};
use message::{ChainRef, Data, Elem, ElementOp, Op, RangeElem, RangeElementOp, SetDecl, SetRef};
use ranges::Ranges;
use rules::SetInfo;
use types::{DataType, KeyType, ValueType, Verdict};

/// A set or map as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Decl {
    key: KeyType,
    /// `None` for a set.
    value: Option<ValueType>,
    /// An interval set of a concatenated type: each element is a box,
    /// a start key and an end key.
    interval: bool,
    /// An interval set of one type: each range is a start element and
    /// an end element ([`ranges`]).
    ranges: bool,
}

/// (family, table, set).
type SetId = (String, String, String);

/// The declarations of the sets felix has written, learnt from the
/// transactions themselves, so that element keys can be encoded.
#[derive(Debug, Default, Clone)]
pub struct Declarations {
    sets: HashMap<SetId, Option<Decl>>,
    /// The elements of the one-type interval sets whose content is
    /// known: made in a table observed removed, or flushed, and every
    /// change since observed.
    content: HashMap<SetId, Ranges>,
    /// (family, table): tables observed removed, so that every set they
    /// have now was made by a transaction observed since.
    fresh: HashSet<(String, String)>,
}

/// NFPROTO_* of a family nft names `f`.
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

fn nfproto(f: NfFamily) -> u8 {
    crate::model::family_number(f)
}

/// A declaration felix can encode elements for: known key and value
/// types, and no flags that change the element format but `interval` on
/// a set (not a map) of a concatenated type or of one of the types
/// [`ranges::ranged`] names, and that without `timeout` (elements that
/// expire leave the content unknown).
fn decl(
    key: &SetTypeValue,
    flags: Option<&std::collections::HashSet<SetFlag>>,
    value: Option<ValueType>,
) -> Option<Decl> {
    let key = KeyType::of(key)?;
    let (mut interval, mut ranges, mut expires) = (false, false, false);
    for f in flags.into_iter().flatten() {
        match (f, key.0.as_slice()) {
            (SetFlag::Timeout, _) => expires = true,
            (SetFlag::Interval, [one]) if value.is_none() && ranges::ranged(*one) => ranges = true,
            (SetFlag::Interval, parts) if value.is_none() && parts.len() > 1 => interval = true,
            _ => return None,
        }
    }
    if ranges && expires {
        return None;
    }
    Some(Decl {
        key,
        value,
        interval,
        ranges,
    })
}

fn set_decl(s: &Set) -> Option<Decl> {
    // A default timeout makes elements expire as the flag does.
    decl(&s.set_type, s.flags.as_ref(), None).filter(|d| !(d.ranges && s.timeout.is_some()))
}

fn map_decl(m: &Map) -> Option<Decl> {
    let SetTypeValue::Single(v) = &m.map else {
        return None;
    };
    let value = ValueType::Data(DataType::of(*v)?);
    decl(&m.set_type, m.flags.as_ref(), Some(value))
}

fn verdict_map_decl(m: &VerdictMap) -> Option<Decl> {
    Some(Decl {
        key: KeyType::of_parts(&m.key)?,
        value: Some(ValueType::Verdict),
        interval: false,
        ranges: false,
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
    /// One-type interval sets changed in the batch: their content so
    /// far, and whether they were bare when it began.
    ranges: HashMap<SetId, (Ranges, bool)>,
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

fn id_of(family: NfFamily, table: &str, name: &str) -> SetId {
    (
        family_name(family).to_string(),
        table.to_string(),
        name.to_string(),
    )
}

/// An element add or delete: (add, the element command).
fn element_cmd(cmd: &Command) -> Option<(bool, &nftables::schema::Element<'static>)> {
    match cmd {
        Command::Nft(NfCmd::Add(NfListObject::Element(e))) => Some((true, e)),
        Command::Nft(NfCmd::Delete(NfListObject::Element(e))) => Some((false, e)),
        _ => None,
    }
}

/// The sets a transaction both adds (`add set`, `create set`) and names
/// in element commands. nft sends what such a set is given in the
/// transaction with each of those commands, and the end element at 0
/// by its own view of the set (its elements added with `add set` and
/// by separate commands in one batch leave none when one command
/// starts at 0): not followed, their content is forgotten.
fn added_and_changed(tx: &Transaction) -> HashSet<SetId> {
    let (mut added, mut changed) = (HashSet::new(), HashSet::new());
    for c in tx.commands() {
        let Command::Nft(c) = c else {
            continue;
        };
        match c {
            NfCmd::Add(NfListObject::Set(s)) | NfCmd::Create(NfListObject::Set(s)) => {
                added.insert(id_of(s.family, &s.table, &s.name));
            }
            NfCmd::Add(NfListObject::Element(e))
            | NfCmd::Create(NfListObject::Element(e))
            | NfCmd::Insert(NfListObject::Element(e))
            | NfCmd::Delete(NfListObject::Element(e)) => {
                changed.insert(id_of(e.family, &e.table, &e.name));
            }
            _ => {}
        }
    }
    added.retain(|k| changed.contains(k));
    added
}

impl Declarations {
    /// Take note of the declarations in a transaction the kernel accepted.
    pub fn observe(&mut self, tx: &Transaction) {
        // Whether each one-type interval set was bare as nft saw it when
        // the transaction began (or when it flushed it).
        let mut bare = HashMap::new();
        for c in tx.commands() {
            if let Command::Nft(c) = c {
                self.observe_ranges(c, &mut bare);
            }
            let c = match c {
                Command::AddVerdictMap(m) => {
                    let k = id_of(m.family, &m.table, &m.name);
                    self.sets.entry(k).or_insert(verdict_map_decl(m));
                    continue;
                }
                Command::Nft(c) => c,
            };
            match c {
                // A set already declared keeps its declaration: nft
                // treats a repeated `add set` as a no-op.
                NfCmd::Add(o) | NfCmd::Create(o) => match o {
                    NfListObject::Set(s) => {
                        let k = id_of(s.family, &s.table, &s.name);
                        self.sets.entry(k).or_insert(set_decl(s));
                    }
                    NfListObject::Map(m) => {
                        let k = id_of(m.family, &m.table, &m.name);
                        self.sets.entry(k).or_insert(map_decl(m));
                    }
                    _ => {}
                },
                NfCmd::Delete(o) => match o {
                    NfListObject::Set(s) => {
                        self.sets.remove(&id_of(s.family, &s.table, &s.name));
                    }
                    NfListObject::Map(m) => {
                        self.sets.remove(&id_of(m.family, &m.table, &m.name));
                    }
                    NfListObject::Table(t) => {
                        let family = family_name(t.family);
                        self.forget(family, &t.name);
                        self.fresh.insert((family.to_string(), t.name.to_string()));
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        for k in added_and_changed(tx) {
            self.content.remove(&k);
        }
    }

    /// Forget a table's sets (its state in the kernel is unknown).
    pub fn forget(&mut self, family: &str, table: &str) {
        let other = |(sf, st, _): &SetId| !(sf == family && st == table);
        self.sets.retain(|k, _| other(k));
        self.content.retain(|k, _| other(k));
        self.fresh.remove(&(family.to_string(), table.to_string()));
    }

    /// The one-type interval set `k`'s declaration's type, if it is one.
    fn ranged_type(&self, k: &SetId) -> Option<DataType> {
        match self.sets.get(k) {
            Some(Some(d)) if d.ranges => Some(d.key.0[0]),
            _ => None,
        }
    }

    /// Follow the content of one-type interval sets through `c` (before
    /// [`Declarations::observe`] takes note of its declarations).
    fn observe_ranges(&mut self, c: &NfCmd<'static>, bare: &mut HashMap<SetId, bool>) {
        match c {
            NfCmd::Add(NfListObject::Set(s)) | NfCmd::Create(NfListObject::Set(s)) => {
                let k = id_of(s.family, &s.table, &s.name);
                let absent =
                    !self.sets.contains_key(&k) && self.fresh.contains(&(k.0.clone(), k.1.clone()));
                let Some(d) = set_decl(s).filter(|d| d.ranges) else {
                    return;
                };
                let elem = s.elem.as_ref().filter(|e| !e.is_empty());
                if absent {
                    self.content.insert(k.clone(), Ranges::bare());
                    bare.insert(k.clone(), true);
                } else if self.ranged_type(&k) != Some(d.key.0[0]) || elem.is_some() {
                    // Elements given with a set already there: nft sends
                    // the end element at 0 even when the set holds
                    // ranges; not followed.
                    self.content.remove(&k);
                    return;
                }
                if let Some(elem) = elem {
                    self.change_ranges(k, d.key.0[0], true, elem, bare);
                }
            }
            NfCmd::Add(NfListObject::Element(e)) | NfCmd::Delete(NfListObject::Element(e)) => {
                let k = id_of(e.family, &e.table, &e.name);
                if let Some(t) = self.ranged_type(&k) {
                    self.change_ranges(k, t, matches!(c, NfCmd::Add(_)), &e.elem, bare);
                }
            }
            NfCmd::Flush(FlushObject::Set(s)) => {
                let k = id_of(s.family, &s.table, &s.name);
                if self.ranged_type(&k).is_some() {
                    self.content.insert(k.clone(), Ranges::bare());
                    bare.insert(k, true);
                }
            }
            NfCmd::Flush(FlushObject::Table(t)) => {
                let family = family_name(t.family);
                self.content
                    .retain(|(sf, st, _), _| !(sf == family && st == &t.name));
            }
            NfCmd::Flush(FlushObject::Ruleset(_)) => {
                self.content.clear();
                self.fresh.clear();
            }
            NfCmd::Delete(NfListObject::Set(s)) => {
                self.content.remove(&id_of(s.family, &s.table, &s.name));
            }
            // Anything else that names a set's elements: their content
            // is no longer known.
            NfCmd::Create(NfListObject::Element(e)) | NfCmd::Insert(NfListObject::Element(e)) => {
                self.content.remove(&id_of(e.family, &e.table, &e.name));
            }
            _ => {}
        }
    }

    /// An add or delete of `elem` on a one-type interval set of type
    /// `t`: its content changed, or forgotten when it cannot be followed.
    fn change_ranges(
        &mut self,
        k: SetId,
        t: DataType,
        add: bool,
        elem: &[Expression],
        bare: &mut HashMap<SetId, bool>,
    ) {
        let Some(content) = self.content.get_mut(&k) else {
            return;
        };
        let was_bare = *bare.entry(k.clone()).or_insert(content.is_bare());
        let spans = elem
            .iter()
            .map(|e| ranges::span(t, e))
            .collect::<Option<Vec<_>>>();
        if spans
            .and_then(|s| content.apply(add, was_bare, &s))
            .is_none()
        {
            self.content.remove(&k);
        }
    }

    /// `tx` as netlink operations, when every command is one that can
    /// be encoded (element adds and deletes on known sets; sets declared
    /// and deleted; regular chains made, flushed, deleted; rules of the
    /// shapes in [`rules`]); `None` otherwise.
    pub fn ops(&self, tx: &Transaction) -> Option<Vec<Op>> {
        let mut b = Batch {
            known: self,
            local: HashMap::new(),
            next_id: 1,
            ranges: HashMap::new(),
        };
        let mut out = Vec::new();
        for c in tx.commands() {
            b.op(c, &mut out)?;
        }
        Some(out)
    }

    /// One command as an element operation, if it is an element add or
    /// delete on a set without intervals that can be encoded.
    pub fn element_op(&self, cmd: &Command) -> Option<ElementOp> {
        let (add, e) = element_cmd(cmd)?;
        let k = id_of(e.family, &e.table, &e.name);
        let d = self.sets.get(&k)?.as_ref()?;
        (!d.interval && !d.ranges).then_some(())?;
        element_op(d, k, add, &e.elem)
    }

    /// Split a transaction that builds a table into what `nft` must
    /// write (every command but encodable element adds) and the element
    /// adds, for netlink afterwards. `self` must already have observed
    /// the transaction.
    pub fn split_elements(&self, tx: Transaction) -> (Transaction, Vec<ElementOp>) {
        let mut rest = Vec::with_capacity(tx.len());
        let mut ops = Vec::new();
        for c in tx.into_commands() {
            let is_add = element_cmd(&c).is_some_and(|(add, _)| add);
            match self.element_op(&c).filter(|_| is_add) {
                Some(op) => ops.push(op),
                None => rest.push(c),
            }
        }
        (rest.into_iter().collect(), ops)
    }
}

/// A chain named by its table, with none of a base chain's keys.
fn regular(c: &nftables::schema::Chain) -> Option<ChainRef> {
    let plain = c.newname.is_none()
        && c.handle.is_none()
        && c._type.is_none()
        && c.hook.is_none()
        && c.prio.is_none()
        && c.dev.is_none()
        && c.policy.is_none();
    plain.then(|| ChainRef {
        family: nfproto(c.family),
        table: c.table.to_string(),
        chain: c.name.to_string(),
    })
}

/// A set command with no key but its type, flags and elements.
fn plain_set(s: &Set) -> bool {
    s.handle.is_none()
        && s.policy.is_none()
        && s.timeout.is_none()
        && s.gc_interval.is_none()
        && s.size.is_none()
        && s.comment.is_none()
}

impl Batch<'_> {
    /// Append the operations of one command to `out`; `None` when it
    /// cannot be encoded. Only the keys named: a base chain's hook, a
    /// rule's position or comment, a handle, a set's policy or size,
    /// each go to nft.
    fn op(&mut self, cmd: &Command, out: &mut Vec<Op>) -> Option<()> {
        let Command::Nft(c) = cmd else {
            return None;
        };
        match c {
            NfCmd::Add(NfListObject::Element(e)) | NfCmd::Delete(NfListObject::Element(e)) => {
                let add = matches!(c, NfCmd::Add(_));
                let k = id_of(e.family, &e.table, &e.name);
                let (d, _) = self.get(&k)?;
                if d.ranges {
                    let t = d.key.0[0];
                    out.push(Op::Bounds(self.bounds(k, t, add, &e.elem)?));
                    return Some(());
                }
                out.push(if d.interval {
                    Op::RangeElements(range_op(d, k, add, &e.elem)?)
                } else {
                    Op::Elements(element_op(d, k, add, &e.elem)?)
                });
            }
            NfCmd::Add(NfListObject::Set(s)) if plain_set(s) => self.add_set(s, out)?,
            NfCmd::Delete(NfListObject::Set(s)) if plain_set(s) && s.elem.is_none() => {
                let k = id_of(s.family, &s.table, &s.name);
                out.push(Op::DeleteSet(SetRef {
                    family: nfproto(s.family),
                    table: k.1.clone(),
                    name: k.2.clone(),
                }));
                self.local.insert(k, Local::Deleted);
            }
            NfCmd::Add(NfListObject::Chain(ch)) => out.push(Op::AddChain(regular(ch)?)),
            NfCmd::Flush(FlushObject::Chain(ch)) => out.push(Op::FlushChain(regular(ch)?)),
            NfCmd::Delete(NfListObject::Chain(ch)) => out.push(Op::DeleteChain(regular(ch)?)),
            NfCmd::Add(NfListObject::Rule(r))
                if r.handle.is_none() && r.index.is_none() && r.comment.is_none() =>
            {
                let c = ChainRef {
                    family: nfproto(r.family),
                    table: r.table.to_string(),
                    chain: r.chain.to_string(),
                };
                let sets = |name: &str| {
                    let (d, id) = self.get(&id_of(r.family, &r.table, name))?;
                    // Lookups in one-type interval sets are left to nft.
                    (d.value.is_none() && !d.ranges).then(|| SetInfo {
                        key: d.key.0.clone(),
                        interval: d.interval,
                        id,
                    })
                };
                let exprs = rules::parse(&r.expr, r.family, &sets)?;
                out.push(Op::AddRule(c, exprs));
            }
            _ => return None,
        }
        Some(())
    }

    /// `add set`: NEWSET, then its elements if it has some.
    fn add_set(&mut self, s: &Set, out: &mut Vec<Op>) -> Option<()> {
        let k = id_of(s.family, &s.table, &s.name);
        // One-type interval sets are declared by nft.
        let d = set_decl(s).filter(|d| !d.ranges)?;
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
        // Flags: none, or `interval` alone (on a concatenation).
        match &s.flags {
            None => {}
            Some(f) if d.interval && f.len() == 1 => {}
            Some(_) => return None,
        }
        let id = self.next_id;
        self.next_id = self.next_id.checked_add(1)?;
        let family = nfproto(s.family);
        out.push(Op::AddSet(SetDecl::new(
            family,
            &k.1,
            &k.2,
            d.key.clone(),
            d.interval,
            id,
        )?));
        if let Some(elem) = &s.elem {
            // An empty list is left to nft.
            (!elem.is_empty()).then_some(())?;
            out.push(if d.interval {
                Op::RangeElements(range_op(&d, k.clone(), true, elem)?)
            } else {
                Op::Elements(element_op(&d, k.clone(), true, elem)?)
            });
        }
        self.local.insert(k, Local::Declared(d, id));
        Some(())
    }

    /// An add or delete of `elem` on the one-type interval set `k` of
    /// type `t`, as nft would send it; `None` when its content is not
    /// known or nft would refuse the change.
    fn bounds(
        &mut self,
        k: SetId,
        t: DataType,
        add: bool,
        elem: &[Expression],
    ) -> Option<ElementOp<message::Bound>> {
        let spans = elem
            .iter()
            .map(|e| ranges::span(t, e))
            .collect::<Option<Vec<_>>>()?;
        let (content, bare) = match self.ranges.entry(k.clone()) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                let known = self.known.content.get(&k)?;
                v.insert((known.clone(), known.is_bare()))
            }
        };
        content.apply(add, *bare, &spans)?;
        Some(ElementOp {
            add,
            family: family_number(&k.0)?,
            table: k.1,
            set: k.2,
            elems: ranges::bounds(add, *bare, &spans),
        })
    }
}

/// Element adds or deletes on a set or map without intervals.
fn element_op(d: &Decl, k: SetId, add: bool, elem: &[Expression]) -> Option<ElementOp> {
    let elems = elem
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
/// each element a concatenation, each part a value or a range. A delete
/// names the element by both keys, as nft does.
fn range_op(d: &Decl, k: SetId, add: bool, elem: &[Expression]) -> Option<RangeElementOp> {
    let elems = elem
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

/// One element: a key for a set; a list `[key, value]` for a map (a
/// delete may give the key alone).
fn element(d: &Decl, e: &Expression, add: bool) -> Option<Elem> {
    let (key, value) = match (&d.value, e) {
        (Some(_), Expression::List(pair)) if pair.len() == 2 => (&pair[0], Some(&pair[1])),
        (Some(_), _) if !add => (e, None),
        (None, _) => (e, None),
        _ => return None,
    };
    let data = match (add, d.value, value) {
        (false, _, _) | (true, None, None) => None,
        (true, Some(ValueType::Verdict), Some(v)) => Some(Data::Verdict(Verdict::of_expr(v)?)),
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
