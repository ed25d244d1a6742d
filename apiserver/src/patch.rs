//! The three patch formats of PATCH requests, applied to an object as
//! JSON: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and
//! Kubernetes' strategic merge patch for the built-in kinds (a subset:
//! maps merge as in a merge patch; lists of the fields in
//! [`merge_key`]'s table merge element by element on their key, and
//! `finalizers` as a set; the directives `$patch` (replace, delete,
//! merge), `$retainKeys` and `$deleteFromPrimitiveList/…` are obeyed and
//! `$setElementOrder/…` is accepted without reordering; every other list
//! is replaced whole). A JSON patch is bounded as the API server bounds
//! it ([`limits`]); the other formats build nothing deeper or larger than
//! their two inputs. Pure.

use serde_json::{Map, Value};

#[path = "patch_limits.rs"]
pub mod limits;

use limits::{CopyBudget, MAX_OPERATIONS, fits};

/// A patch that cannot be applied, in words for a `Status`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// It does not apply to the object (the API server's 422).
    #[error("{0}")]
    Invalid(String),
    /// It asks for more work than the API server allows (413).
    #[error("{0}")]
    TooLarge(String),
}

fn err<T>(m: impl Into<String>) -> Result<T, PatchError> {
    Err(PatchError::Invalid(m.into()))
}

/// RFC 7386: `patch` merged into `target`.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(p) = patch else {
        return patch.clone();
    };
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => Map::new(),
    };
    for (k, v) in p {
        if v.is_null() {
            out.remove(k);
        } else {
            let merged = merge_patch(out.get(k).unwrap_or(&Value::Null), v);
            out.insert(k.clone(), merged);
        }
    }
    Value::Object(out)
}

/// The reference tokens of a JSON pointer (RFC 6901).
fn pointer(p: &str) -> Result<Vec<String>, PatchError> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return err(format!("invalid JSON pointer {p:?}: it must start with /"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn index(token: &str, len: usize, allow_end: bool) -> Result<usize, PatchError> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let ok = !token.is_empty()
        && token.bytes().all(|b| b.is_ascii_digit())
        && (token == "0" || !token.starts_with('0'));
    match token.parse::<usize>() {
        Ok(i) if ok && (i < len || (allow_end && i == len)) => Ok(i),
        _ => err(format!("array index {token:?} out of range")),
    }
}

fn parent<'a>(doc: &'a mut Value, path: &[String]) -> Result<&'a mut Value, PatchError> {
    let mut at = doc;
    for t in path {
        at = match at {
            Value::Object(m) => match m.get_mut(t) {
                Some(v) => v,
                None => return err(format!("missing value at {t:?}")),
            },
            Value::Array(a) => {
                let i = index(t, a.len(), false)?;
                &mut a[i]
            }
            _ => return err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(at)
}

fn get<'a>(doc: &'a Value, path: &[String]) -> Result<&'a Value, PatchError> {
    let mut at = doc;
    for t in path {
        at = match at {
            Value::Object(m) => m
                .get(t)
                .ok_or_else(|| PatchError::Invalid(format!("missing value at {t:?}")))?,
            Value::Array(a) => &a[index(t, a.len(), false)?],
            _ => return err(format!("cannot descend into a scalar at {t:?}")),
        };
    }
    Ok(at)
}

fn add(doc: &mut Value, path: &[String], v: Value) -> Result<(), PatchError> {
    let Some((last, head)) = path.split_last() else {
        *doc = v;
        return Ok(());
    };
    match parent(doc, head)? {
        Value::Object(m) => {
            m.insert(last.clone(), v);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true)?;
            a.insert(i, v);
        }
        _ => return err(format!("cannot add {last:?} to a scalar")),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, PatchError> {
    let Some((last, head)) = path.split_last() else {
        return err("cannot remove the whole document");
    };
    match parent(doc, head)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| PatchError::Invalid(format!("missing value at {last:?}"))),
        Value::Array(a) => {
            let i = index(last, a.len(), false)?;
            Ok(a.remove(i))
        }
        _ => err(format!("cannot remove {last:?} from a scalar")),
    }
}

/// RFC 6902: `ops` (an array of operations) applied in order to `doc`;
/// any failing operation fails the whole patch, as does one that would
/// break a [`limits`] bound. The result is no deeper than
/// [`limits::MAX_DEPTH`] or `doc`, whichever is deeper.
pub fn json_patch(doc: &Value, ops: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = ops else {
        return err("a JSON patch must be an array of operations");
    };
    if ops.len() > MAX_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    let mut doc = doc.clone();
    let mut copied = CopyBudget::default();
    for op in ops {
        let field = |k: &str| op.get(k).and_then(Value::as_str);
        let Some(path) = field("path") else {
            return err("operation has no path");
        };
        let path = pointer(path)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| PatchError::Invalid("operation has no value".into()))
        };
        let from = || -> Result<Vec<String>, PatchError> {
            pointer(
                field("from").ok_or_else(|| PatchError::Invalid("operation has no from".into()))?,
            )
        };
        match field("op") {
            Some("add") => {
                let v = value()?;
                fits(&path, &v)?;
                add(&mut doc, &path, v)?;
            }
            Some("remove") => {
                remove(&mut doc, &path)?;
            }
            Some("replace") => {
                let v = value()?;
                fits(&path, &v)?;
                if path.is_empty() {
                    doc = v;
                } else {
                    remove(&mut doc, &path)?;
                    add(&mut doc, &path, v)?;
                }
            }
            Some("move") => {
                let from = from()?;
                if path.len() > from.len() && path.starts_with(&from) {
                    return err("cannot move a value into itself");
                }
                let v = remove(&mut doc, &from)?;
                // Only a longer path than `from` can nest `v` deeper.
                if path.len() > from.len() {
                    fits(&path, &v)?;
                }
                add(&mut doc, &path, v)?;
            }
            Some("copy") => {
                let v = get(&doc, &from()?)?;
                copied.spend(v)?;
                fits(&path, v)?;
                let v = v.clone();
                add(&mut doc, &path, v)?;
            }
            Some("test") => {
                if *get(&doc, &path)? != value()? {
                    return err(format!(
                        "testing value {} failed",
                        field("path").unwrap_or_default()
                    ));
                }
            }
            other => return err(format!("unknown operation {other:?}")),
        }
    }
    Ok(doc)
}

/// How a list field merges under a strategic merge patch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListMerge {
    /// Elements are objects matched on this key.
    Key(&'static str),
    /// Scalars merged as a set.
    Set,
}

/// The merge strategy of a list at `path` (field names, no indices) of
/// a built-in `kind`; `None`: the list is replaced.
pub fn merge_key(kind: &str, path: &[&str]) -> Option<ListMerge> {
    let last = *path.last()?;
    let under = |f: &str| path[..path.len() - 1].contains(&f);
    let in_pod = kind == "Pod" || under("template");
    match last {
        "finalizers" if path.len() == 2 && path[0] == "metadata" => Some(ListMerge::Set),
        "ownerReferences" if path.len() == 2 => Some(ListMerge::Key("uid")),
        "containers" | "initContainers" | "ephemeralContainers" if in_pod => {
            Some(ListMerge::Key("name"))
        }
        "volumes" | "imagePullSecrets" if in_pod => Some(ListMerge::Key("name")),
        "env" if under("containers") || under("initContainers") => Some(ListMerge::Key("name")),
        "volumeMounts" => Some(ListMerge::Key("mountPath")),
        "ports" if under("containers") || under("initContainers") => {
            Some(ListMerge::Key("containerPort"))
        }
        "ports" if kind == "Service" && path == ["spec", "ports"] => Some(ListMerge::Key("port")),
        "addresses" if kind == "Node" => Some(ListMerge::Key("type")),
        "conditions" if path.first() == Some(&"status") => Some(ListMerge::Key("type")),
        _ => None,
    }
}

/// A strategic merge patch of an object of the built-in `kind`.
pub fn strategic_merge(kind: &str, target: &Value, patch: &Value) -> Result<Value, PatchError> {
    smp(kind, &mut Vec::new(), target, patch)
}

fn smp<'a>(
    kind: &str,
    path: &mut Vec<&'a str>,
    target: &Value,
    patch: &'a Value,
) -> Result<Value, PatchError> {
    let Value::Object(p) = patch else {
        return Ok(patch.clone());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Ok(Value::Null),
        Some("replace") => {
            let mut m = p.clone();
            m.remove("$patch");
            return Ok(Value::Object(m));
        }
        Some("merge") | None => {}
        Some(other) => return err(format!("unknown patch type: {other}")),
    }
    let mut out = match target {
        Value::Object(t) => t.clone(),
        _ => Map::new(),
    };
    if let Some(keep) = p.get("$retainKeys") {
        let Value::Array(keep) = keep else {
            return err("$retainKeys must be a list");
        };
        out.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let Value::Array(gone) = v else {
                return err(format!("{k} must be a list"));
            };
            if let Some(Value::Array(list)) = out.get_mut(field) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if v.is_null() {
            out.remove(k);
            continue;
        }
        path.push(k.as_str());
        let current = out.get(k).cloned().unwrap_or(Value::Null);
        let merged = match (v, merge_key(kind, path)) {
            (Value::Array(items), Some(how)) => merge_list(kind, path, &current, items, how)?,
            (Value::Array(_), None) => v.clone(),
            _ => smp(kind, path, &current, v)?,
        };
        path.pop();
        if merged.is_null() {
            out.remove(k);
        } else {
            out.insert(k.clone(), merged);
        }
    }
    Ok(Value::Object(out))
}

fn merge_list<'a>(
    kind: &str,
    path: &mut Vec<&'a str>,
    current: &Value,
    items: &'a [Value],
    how: ListMerge,
) -> Result<Value, PatchError> {
    let mut out: Vec<Value> = match current {
        Value::Array(a) => a.clone(),
        _ => Vec::new(),
    };
    // A lone `{"$patch": "replace"}` element replaces the whole list.
    if items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Ok(Value::Array(
            items
                .iter()
                .filter(|i| i.get("$patch").is_none())
                .cloned()
                .collect(),
        ));
    }
    match how {
        ListMerge::Set => {
            for i in items {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
        ListMerge::Key(key) => {
            for item in items {
                let Some(id) = item.get(key) else {
                    return err(format!(
                        "map: {item} does not contain declared merge key: {key}"
                    ));
                };
                let at = out.iter().position(|o| o.get(key) == Some(id));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (at, delete) {
                    (Some(i), true) => {
                        out.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => out[i] = smp(kind, path, &out[i], item)?,
                    (None, false) => out.push(smp(kind, path, &Value::Null, item)?),
                }
            }
        }
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
#[path = "patch_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "patch_limit_tests.rs"]
mod limit_tests;

#[cfg(test)]
#[path = "patch_props.rs"]
mod props;
