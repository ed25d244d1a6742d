//! From parsed documents to objects ready to write: each must name a known
//! kind and itself, sit in a namespace exactly when its kind is namespaced,
//! and (for writes) pass validation. Every problem is collected, so one run
//! reports all bad documents before anything is written.

use std::collections::HashMap;

use serde_json::Value;
use tartan_api::Kind;
use tartan_api::store::{DynamicObject, ObjectKey};

use super::docs::{DocError, Document, Origin};
use super::names;

/// A document turned into an object.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub origin: Origin,
    pub key: ObjectKey,
    pub obj: DynamicObject,
}

/// Whether to run validation (writes do; deletes only need the key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Every object as sent.
    Validate,
    /// Every object as sent, except those whose checks depend on their
    /// stored version (a Service being updated first loses what its old
    /// type left behind, `tartan_api::validate::prepare_update`): the
    /// caller checks those once it has read the store.
    ValidateUnlessStored,
    KeyOnly,
}

/// Prepares every document; the objects, or every problem found.
pub fn prepare(
    docs: Vec<Document>,
    namespace: Option<&str>,
    check: Check,
) -> Result<Vec<Prepared>, Vec<DocError>> {
    let mut ready = Vec::new();
    let mut errors = Vec::new();
    let mut seen: HashMap<ObjectKey, Origin> = HashMap::new();
    for doc in docs {
        match prepare_one(doc, namespace, check) {
            Ok(p) => {
                if let Some(first) = seen.get(&p.key) {
                    errors.push(DocError {
                        origin: p.origin.clone(),
                        object: Some(names::display(&p.key)),
                        message: format!("the same object as {first}"),
                    });
                    continue;
                }
                seen.insert(p.key.clone(), p.origin.clone());
                ready.push(p);
            }
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(ready)
    } else {
        Err(errors)
    }
}

fn prepare_one(doc: Document, namespace: Option<&str>, check: Check) -> Result<Prepared, DocError> {
    let Document { origin, mut value } = doc;
    let fail = |object: Option<String>, message: String| DocError {
        origin: origin.clone(),
        object,
        message,
    };
    let text = |field: &str| value.get(field).and_then(Value::as_str).map(str::to_string);
    let api_version = text("apiVersion").filter(|s| !s.is_empty());
    let kind_name = text("kind").filter(|s| !s.is_empty());
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let (api_version, kind_name) = match (api_version, kind_name) {
        (Some(a), Some(k)) => (a, k),
        (None, None) => return Err(fail(None, "apiVersion and kind are missing".into())),
        (None, Some(_)) => return Err(fail(None, "apiVersion is missing".into())),
        (Some(_), None) => return Err(fail(None, "kind is missing".into())),
    };
    let kind = Kind::from_type(&api_version, &kind_name)
        .ok_or_else(|| fail(None, unknown_type(&api_version, &kind_name)))?;
    // Metadata as written: a namespace or name of the wrong type is refused
    // here, never replaced by a default.
    let meta = tartan_api::validate::raw_metadata_problems(&value);
    if !meta.is_empty() {
        let what: Vec<String> = meta.iter().map(|(f, w)| format!("{f}: {w}")).collect();
        let object = match name.as_deref() {
            Some(n) => format!("{kind} {n:?}"),
            None => kind.to_string(),
        };
        return Err(fail(
            Some(object),
            format!("is invalid: {}", what.join("; ")),
        ));
    }
    let Some(name) = name else {
        return Err(fail(
            Some(kind.to_string()),
            "metadata.name is missing".into(),
        ));
    };
    let file_ns = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    let namespace = if kind.info().namespaced {
        match (file_ns, namespace) {
            (Some(f), Some(flag)) if f != flag => {
                return Err(fail(
                    Some(format!("{kind} {name:?}")),
                    format!("its namespace {f:?} differs from --namespace {flag:?}"),
                ));
            }
            (Some(f), _) => Some(f),
            (None, Some(flag)) => Some(flag.to_string()),
            (None, None) => Some("default".to_string()),
        }
    } else {
        // Cluster-scoped: a namespace in the file means nothing (as kubectl).
        None
    };
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        match &namespace {
            Some(ns) => meta.insert("namespace".into(), Value::String(ns.clone())),
            None => meta.remove("namespace"),
        };
    }
    let key = ObjectKey::new(kind, namespace.as_deref(), &name);
    let object = names::display(&key);
    let obj: DynamicObject = serde_json::from_value(value)
        .map_err(|e| fail(Some(object.clone()), format!("malformed: {e}")))?;
    let validate = match check {
        Check::Validate => true,
        Check::ValidateUnlessStored => !tartan_api::validate::depends_on_stored(kind),
        Check::KeyOnly => false,
    };
    if validate {
        tartan_api::validate::validate(&obj).map_err(|e| fail(None, e.to_string()))?;
    }
    Ok(Prepared { origin, key, obj })
}

/// Why an apiVersion/kind pair is not known, with what would be.
fn unknown_type(api_version: &str, kind: &str) -> String {
    let same_name: Vec<String> = Kind::all()
        .filter(|k| k.info().name.eq_ignore_ascii_case(kind))
        .map(|k| k.api_version())
        .collect();
    if !same_name.is_empty() {
        return format!(
            "kind {kind:?} is not served in apiVersion {api_version:?}; it is in {}",
            same_name.join(" or ")
        );
    }
    format!(
        "unknown kind {kind:?} (apiVersion {api_version:?}); known kinds: {}",
        names::known_kinds()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::docs::parse;

    fn prep(text: &str, ns: Option<&str>) -> Result<Vec<Prepared>, Vec<DocError>> {
        let (docs, errors) = parse("f.yaml", text);
        assert!(errors.is_empty(), "{errors:?}");
        prepare(docs, ns, Check::Validate)
    }

    const POOL: &str = "apiVersion: tartan.dev/v1\nkind: IPPool\nmetadata:\n  name: a\nspec:\n  cidr: 10.0.0.0/16\n";

    #[test]
    fn a_good_object_gets_its_key() {
        let p = prep(POOL, None).unwrap();
        assert_eq!(p[0].key, ObjectKey::new(Kind::IpPool, None, "a"));
        assert_eq!(p[0].obj.data["spec"]["cidr"], "10.0.0.0/16");
    }

    #[test]
    fn namespaces_follow_the_kind() {
        let text = "apiVersion: tartan.dev/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {}\n---\napiVersion: tartan.dev/v1\nkind: IPPool\nmetadata: {name: q, namespace: x}\nspec: {cidr: 10.0.0.0/8}\n";
        let p = prep(text, None).unwrap();
        assert_eq!(p[0].key.namespace.as_deref(), Some("default"));
        assert_eq!(p[0].obj.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(p[1].key.namespace, None);
        assert_eq!(p[1].obj.metadata.namespace, None);
        let p = prep(text, Some("team")).unwrap();
        assert_eq!(p[0].key.namespace.as_deref(), Some("team"));
    }

    #[test]
    fn a_namespace_in_the_file_must_agree_with_the_flag() {
        let text = "apiVersion: tartan.dev/v1\nkind: NetworkPolicy\nmetadata: {name: p, namespace: a}\nspec: {selector: all()}\n";
        let errs = prep(text, Some("b")).unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .contains("differs from --namespace \"b\""),
            "{}",
            errs[0]
        );
        assert!(prep(text, Some("a")).is_ok());
    }

    #[test]
    fn every_bad_document_is_reported() {
        let text = format!(
            "{POOL}---\nkind: IPPool\nmetadata: {{name: x}}\n---\napiVersion: tartan.dev/v1\nmetadata: {{name: y}}\n---\napiVersion: tartan.dev/v1\nkind: IPPool\nmetadata: {{}}\n---\napiVersion: tartan.dev/v1\nkind: Frobnicator\nmetadata: {{name: z}}\n---\napiVersion: v1\nkind: IPPool\nmetadata: {{name: w}}\n---\n{POOL}"
        );
        let errs = prep(&text, None).unwrap_err();
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(msgs.len(), 6, "{msgs:#?}");
        assert!(msgs[0].contains("document 2") && msgs[0].contains("apiVersion is missing"));
        assert!(msgs[1].contains("document 3") && msgs[1].contains("kind is missing"));
        assert!(
            msgs[2].contains("document 4") && msgs[2].contains("IPPool: metadata.name is missing")
        );
        assert!(msgs[3].contains("unknown kind \"Frobnicator\"") && msgs[3].contains("IPPool"));
        assert!(msgs[4].contains("it is in tartan.dev/v1"), "{}", msgs[4]);
        assert!(
            msgs[5].contains("document 7") && msgs[5].contains("same object as f.yaml: document 1")
        );
    }

    #[test]
    fn malformed_metadata_is_an_error_not_a_panic() {
        let text =
            "apiVersion: tartan.dev/v1\nkind: IPPool\nmetadata:\n  name: a\n  labels: [1, 2]\n";
        let errs = prep(text, None).unwrap_err();
        assert!(
            errs[0]
                .to_string()
                .contains("IPPool \"a\": is invalid: metadata.labels"),
            "{}",
            errs[0]
        );
    }
}
