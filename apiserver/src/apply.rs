//! Server-side apply over an object as JSON: the applied configuration
//! merged into the live object (maps merge, lists and scalars are
//! replaced: the stand-in treats every list as atomic), fields the
//! manager applied before and leaves out now removed unless someone else
//! owns them, and conflicts with other managers refused unless forced
//! (then those fields change hands). The messages are the API server's.
//! Pure.

use serde_json::{Map, Value};

use crate::fields::{self, Entry, Path, Writer, at, display, entries, leaves, overlaps};

/// A refused apply: the conflicts, each with the manager that owns the
/// field, as the `Status` says them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflicts(pub Vec<(String, Path)>);

impl Conflicts {
    /// `Apply failed with 1 conflict: conflict with "kubectl": .spec.cidr`.
    pub fn message(&self) -> String {
        let n = self.0.len();
        if n == 1 {
            let (who, p) = &self.0[0];
            return format!(
                "Apply failed with 1 conflict: conflict with {who}: {}",
                display(p)
            );
        }
        let mut by: Vec<(&String, Vec<&Path>)> = Vec::new();
        for (who, p) in &self.0 {
            match by.iter_mut().find(|(w, _)| *w == who) {
                Some((_, ps)) => ps.push(p),
                None => by.push((who, vec![p])),
            }
        }
        by.sort();
        let mut lines = Vec::new();
        for (who, ps) in by {
            lines.push(format!("conflicts with {who}:"));
            lines.extend(ps.into_iter().map(|p| format!("- {}", display(p))));
        }
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    }

    /// The `details.causes` of the `Status`.
    pub fn causes(&self) -> Vec<Value> {
        self.0
            .iter()
            .map(|(who, p)| {
                serde_json::json!({"type": "FieldManagerConflict",
                    "message": format!("conflict with {who}"), "field": display(p)})
            })
            .collect()
    }
}

fn deep_merge(target: &mut Value, config: &Value) {
    match (target, config) {
        (Value::Object(t), Value::Object(c)) => {
            for (k, v) in c {
                match t.get_mut(k) {
                    Some(slot) if v.is_object() && slot.is_object() => deep_merge(slot, v),
                    _ => {
                        t.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (t, c) => *t = c.clone(),
    }
}

/// The object after `w` applies `config` to `live` (`None`: absent, so
/// created), or the conflicts that refuse it.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    w: &Writer<'_>,
    force: bool,
) -> Result<Value, Conflicts> {
    let mut list: Vec<Entry> = live.map(entries).unwrap_or_default();
    let applied = leaves(config);
    let is_mine = |e: &Entry| {
        e.manager == w.manager
            && e.operation == "Apply"
            && e.subresource.as_deref() == w.subresource
    };
    // Fields another manager owns whose value this apply would change
    // (compared where the two fields meet: the shorter path).
    let mut clashes: Vec<(usize, Path, Path)> = Vec::new();
    for (i, e) in list.iter().enumerate().filter(|(_, e)| !is_mine(e)) {
        for p in &applied {
            for f in e.fields.iter().filter(|f| overlaps(f, p)) {
                let s = if f.len() <= p.len() { f } else { p };
                if live.and_then(|l| at(l, s)) != at(config, s) {
                    clashes.push((i, f.clone(), s.clone()));
                }
            }
        }
    }
    if !clashes.is_empty() && !force {
        let mut conflicts = Vec::new();
        for (i, _, s) in &clashes {
            let item = (list[*i].describe(), s.clone());
            if !conflicts.contains(&item) {
                conflicts.push(item);
            }
        }
        return Err(Conflicts(conflicts));
    }
    let mut object = match live {
        Some(l) => l.clone(),
        None => Value::Object(Map::new()),
    };
    deep_merge(&mut object, config);
    // What this manager applied before and leaves out now goes, unless
    // another manager owns it too.
    let before = list
        .iter()
        .find(|e| is_mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for p in before.difference(&applied) {
        let shared = list
            .iter()
            .filter(|e| !is_mine(e))
            .any(|e| e.fields.iter().any(|f| overlaps(f, p)));
        if !shared {
            fields::remove(&mut object, p);
        }
    }
    // Forced: the fields in conflict change hands.
    for (i, f, _) in &clashes {
        list[*i].fields.remove(f);
    }
    let mine = fields::entry_of(&mut list, w, "Apply");
    mine.fields = applied;
    fields::set_entries(&mut object, &list);
    Ok(object)
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
