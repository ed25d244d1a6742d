//! Field ownership as the API server records it in `managedFields`: the
//! set of leaf fields of an object (lists count as one field each: the
//! stand-in treats every list as atomic), its `fieldsV1` encoding
//! (`{"f:spec":{"f:cidr":{}}}`), and the bookkeeping of an update: the
//! fields a write changed pass to its manager. Pure.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// A field: the keys from the object's root.
pub type Path = Vec<String>;
pub type FieldSet = BTreeSet<Path>;

/// Metadata the server sets itself: never owned.
const SERVER_META: [&str; 10] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The owned fields of `obj`: every leaf (a scalar, a list, an empty
/// map) except apiVersion, kind, status and the server's metadata.
pub fn leaves(obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    let Value::Object(m) = obj else {
        return out;
    };
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                if let Value::Object(meta) = v {
                    for (mk, mv) in meta {
                        if !SERVER_META.contains(&mk.as_str()) {
                            collect(mv, &mut vec!["metadata".into(), mk.clone()], &mut out);
                        }
                    }
                }
            }
            _ => collect(v, &mut vec![k.clone()], &mut out),
        }
    }
    out
}

fn collect(v: &Value, path: &mut Path, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                path.push(k.clone());
                collect(c, path, out);
                path.pop();
            }
        }
        Value::Null => {}
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The value at `path`.
pub fn at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// Remove the field at `path`, and the maps that it leaves empty.
pub fn remove(v: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Value::Object(m) = v else {
        return;
    };
    if rest.is_empty() {
        m.remove(first);
        return;
    }
    if let Some(child) = m.get_mut(first) {
        remove(child, rest);
        if child.as_object().is_some_and(Map::is_empty) {
            m.remove(first);
        }
    }
}

/// Whether one path lies at or under the other.
pub fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `.spec.cidr`, as conflict messages name a field.
pub fn display(path: &[String]) -> String {
    path.iter().map(|k| format!(".{k}")).collect()
}

/// The `fieldsV1` encoding of a set.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut at = &mut root;
        for k in path {
            let next = at
                .entry(format!("f:{k}"))
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(m) = next else {
                break;
            };
            at = m;
        }
    }
    Value::Object(root)
}

/// A set from its `fieldsV1` encoding (keys other than `f:` ones, such
/// as list keys of a real server's records, end the path there).
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    fn walk(v: &Value, path: &mut Path, out: &mut FieldSet) {
        let fields: Vec<(&String, &Value)> = v
            .as_object()
            .map(|m| m.iter().filter(|(k, _)| k.starts_with("f:")).collect())
            .unwrap_or_default();
        if fields.is_empty() {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            return;
        }
        for (k, c) in fields {
            path.push(k[2..].to_string());
            walk(c, path, out);
            path.pop();
        }
    }
    walk(v, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    pub api_version: String,
    pub subresource: Option<String>,
    pub time: Option<String>,
    pub fields: FieldSet,
}

impl Entry {
    /// The manager as conflict messages name it: `"kubectl"` for an
    /// applier, `"kubectl-edit" using v1` for an updater.
    pub fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }

    fn same_owner(&self, manager: &str, operation: &str, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }
}

/// The entries of `obj`'s `metadata.managedFields` (unreadable ones
/// skipped).
pub fn entries(obj: &Value) -> Vec<Entry> {
    let Some(Value::Array(list)) = at(obj, &["metadata".into(), "managedFields".into()]) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: s("manager")?,
                operation: s("operation")?,
                api_version: s("apiVersion").unwrap_or_default(),
                subresource: s("subresource"),
                time: s("time"),
                fields: e.get("fieldsV1").map(from_fields_v1).unwrap_or_default(),
            })
        })
        .collect()
}

/// Write `list` into `obj` as `metadata.managedFields` (entries that own
/// nothing dropped; none left: the field removed).
pub fn set_entries(obj: &mut Value, list: &[Entry]) {
    let encoded: Vec<Value> = list
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": e.api_version,
                "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(&e.fields),
            });
            if let Some(t) = &e.time {
                v["time"] = t.clone().into();
            }
            if let Some(s) = &e.subresource {
                v["subresource"] = s.clone().into();
            }
            v
        })
        .collect();
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if encoded.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(encoded));
    }
}

/// Who writes, and when.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
    pub time: &'a str,
}

/// The entry of `w` in `list` with `operation`, added if missing.
pub fn entry_of<'l>(list: &'l mut Vec<Entry>, w: &Writer<'_>, operation: &str) -> &'l mut Entry {
    let i = match list
        .iter()
        .position(|e| e.same_owner(w.manager, operation, w.subresource))
    {
        Some(i) => i,
        None => {
            list.push(Entry {
                manager: w.manager.to_string(),
                operation: operation.to_string(),
                api_version: w.api_version.to_string(),
                subresource: w.subresource.map(str::to_string),
                time: None,
                fields: FieldSet::new(),
            });
            list.len() - 1
        }
    };
    let e = &mut list[i];
    e.api_version = w.api_version.to_string();
    e.time = Some(w.time.to_string());
    e
}

/// The managedFields of `new`, written over `old` (`None`: created) by
/// an update (create, replace or a non-apply patch) of `w`: the fields it
/// changed become its own and no one else's, fields it removed are no
/// one's. A write that sets managedFields itself keeps what it set (an
/// empty list clears them), as the API server lets clients do.
pub fn track_update(old: Option<&Value>, new: &mut Value, w: &Writer<'_>) {
    let mf = ["metadata".to_string(), "managedFields".to_string()];
    let old_mf = old.and_then(|o| at(o, &mf)).cloned();
    let new_mf = at(new, &mf).cloned();
    if let Some(given) = &new_mf
        && old.is_some()
        && Some(given) != old_mf.as_ref()
    {
        if given.as_array().is_some_and(Vec::is_empty) {
            remove(new, &mf);
        }
        return;
    }
    let mut list = old.map(entries).unwrap_or_default();
    let empty = Value::Null;
    let before = leaves(old.unwrap_or(&empty));
    let after = leaves(new);
    let changed: Vec<&Path> = after
        .iter()
        .filter(|p| old.and_then(|o| at(o, p)) != at(new, p))
        .collect();
    let gone: Vec<&Path> = before.difference(&after).collect();
    for e in &mut list {
        e.fields
            .retain(|f| !changed.iter().chain(&gone).any(|p| overlaps(f, p)));
    }
    if !changed.is_empty() {
        let mine = entry_of(&mut list, w, "Update");
        mine.fields.extend(changed.into_iter().cloned());
    }
    set_entries(new, &list);
}

#[cfg(test)]
#[path = "fields_tests.rs"]
mod tests;
