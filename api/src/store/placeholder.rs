//! The stand-in a backend hands out for a stored value that is not an
//! object of its kind at all (not JSON, metadata of the wrong shape), so
//! that readers see it and report it instead of skipping it. See
//! [`super::readable`] for how agents treat it.

use super::{DynamicObject, ObjectKey};

/// The annotation a placeholder carries: why the stored value is not an
/// object. Only backends set it; no stored object has it.
pub const UNREADABLE_ANNOTATION: &str = "tartan.dev/unreadable";

/// An object standing for a stored value that is not an object of `key`'s
/// kind at all (not JSON, metadata of the wrong shape).
pub fn placeholder(key: &ObjectKey, reason: &str) -> DynamicObject {
    let mut o = DynamicObject::new(&key.name, &key.kind.api_resource());
    o.metadata.namespace = key.namespace.clone();
    o.metadata.annotations = Some([(UNREADABLE_ANNOTATION.to_string(), reason.to_string())].into());
    o
}

/// Why `o` is a placeholder; `None` for an object read from the store.
pub fn placeholder_reason(o: &DynamicObject) -> Option<&str> {
    o.metadata
        .annotations
        .as_ref()?
        .get(UNREADABLE_ANNOTATION)
        .map(String::as_str)
}
