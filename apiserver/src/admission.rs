//! What the API server does to a built-in object (Service, Pod,
//! NetworkPolicy, …) between decoding a write and storing it, as Tartan's
//! own stores do (`tartan_api::store::connect::Checked`): the defaults,
//! an update prepared against the stored version (a Service's), then the
//! checks of `tartan_api::validate`, refused 422 Invalid in the API
//! server's words. A Namespace gets what its strategy gives it. Custom
//! resources pass as they are: on a real cluster only their CRD's schema
//! checks them, and the stand-in keeps to that.

use axum::response::Response;
use serde_json::{Value, json};
use tartan_api::kind::{Kind, TARTAN_GROUP};
use tartan_api::store::DynamicObject;

use crate::objects::bad_request;
use crate::resources::Served;
use crate::wire::{status, to_wire};

/// Which write an object is about to be stored by.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    Create,
    /// An update of the stored object given (wire JSON).
    Update(&'a Value),
    /// A write of the `status` subresource.
    Status,
}

/// The namespaces a cluster has from its start. Creates into them are
/// served even before their Namespace objects are stored (tests seed
/// their stores directly, and may write these objects themselves).
pub const SYSTEM_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// The built-in kind `served` is, if it is one (not a custom resource,
/// not a CRD).
pub fn builtin(served: &Served) -> Option<Kind> {
    served.kind.filter(|k| k.info().group != TARTAN_GROUP)
}

/// Whether PUT may leave out `metadata.resourceVersion` (last write
/// wins): the kinds whose strategy in the API server allows an
/// unconditional update. Leases, custom resources and CRDs do not.
pub fn unconditional_update(served: &Served) -> bool {
    matches!(
        served.kind,
        Some(
            Kind::ConfigMap
                | Kind::Secret
                | Kind::Service
                | Kind::EndpointSlice
                | Kind::KubeNetworkPolicy
                | Kind::Node
                | Kind::Namespace
                | Kind::Pod
                | Kind::ServiceAccount
        )
    )
}

/// Give `obj`, about to be written by `write`, the API server's defaults
/// and check it; built-in kinds only. `Err`: the answer (422 Invalid, or
/// 400 for what is not an object at all).
pub fn admit(served: &Served, obj: &mut Value, write: Write<'_>) -> Result<(), Response> {
    let Some(kind) = builtin(served) else {
        return Ok(());
    };
    let mut typed = decode(obj)?;
    let stored = match write {
        Write::Update(live) if tartan_api::validate::depends_on_stored(kind) => Some(decode(live)?),
        _ => None,
    };
    if let Err(e) = tartan_api::validate::admit(&mut typed, stored.as_ref()) {
        let name = typed.metadata.name.as_deref().unwrap_or_default();
        return Err(invalid(served, name, &e.problems));
    }
    *obj = to_wire(&typed);
    if kind == Kind::Namespace {
        namespace_strategy(obj, write);
    }
    Ok(())
}

fn decode(obj: &Value) -> Result<DynamicObject, Response> {
    serde_json::from_value(obj.clone()).map_err(|e| bad_request(&e.to_string()))
}

/// What the namespace strategy sets beyond the defaults (which give the
/// `kubernetes.io/metadata.name` label, and the finalizer and phase when
/// unset): on create the `kubernetes` finalizer and phase Active
/// whatever was given; on an update the stored finalizers and status
/// (they change through their own subresources).
fn namespace_strategy(obj: &mut Value, write: Write<'_>) {
    let Some(o) = obj.as_object_mut() else { return };
    match write {
        Write::Create => {
            o.insert("status".into(), json!({"phase": "Active"}));
            let spec = o.entry("spec").or_insert_with(|| json!({}));
            if !spec.is_object() {
                *spec = json!({});
            }
            let finalizers = spec
                .as_object_mut()
                .map(|s| s.entry("finalizers").or_insert_with(|| json!([])));
            if let Some(Value::Array(list)) = finalizers
                && !list.iter().any(|f| f == "kubernetes")
            {
                list.push("kubernetes".into());
            }
        }
        Write::Update(live) => {
            keep(o, live, "status");
            let spec = o.entry("spec").or_insert_with(|| json!({}));
            if let (Some(s), Some(f)) = (
                spec.as_object_mut(),
                live.pointer("/spec/finalizers").cloned(),
            ) {
                s.insert("finalizers".into(), f);
            }
        }
        Write::Status => {}
    }
}

/// `o[key]` as `live` has it (removed when `live` has none).
fn keep(o: &mut serde_json::Map<String, Value>, live: &Value, key: &str) {
    match live.get(key) {
        Some(v) => o.insert(key.into(), v.clone()),
        None => o.remove(key),
    };
}

/// 422 Invalid as the API server answers it: `Service "web" is invalid:
/// spec.ports[0].port: Invalid value: 0: …` for one problem, the
/// problems in brackets, comma-separated, for several; one cause each.
pub fn invalid(served: &Served, name: &str, problems: &[(String, String)]) -> Response {
    let mut messages: Vec<String> = Vec::new();
    for (field, why) in problems {
        let m = format!("{field}: {why}");
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    let all = match messages.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    let kind = if served.group.is_empty() {
        served.name.clone()
    } else {
        format!("{}.{}", served.name, served.group)
    };
    let causes: Vec<Value> = problems
        .iter()
        .map(|(field, why)| json!({"reason": cause(why), "message": why, "field": field}))
        .collect();
    status(
        422,
        "Invalid",
        &format!("{kind} \"{name}\" is invalid: {all}"),
        Some(json!({"name": name, "group": served.group, "kind": served.name, "causes": causes})),
    )
}

/// The cause type of a problem, read from how its text starts (the API
/// server's field error types), `FieldValueInvalid` otherwise.
fn cause(why: &str) -> &'static str {
    const TYPES: [(&str, &str); 7] = [
        ("Required value", "FieldValueRequired"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Forbidden", "FieldValueForbidden"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
    ];
    TYPES
        .iter()
        .find(|(start, _)| why.starts_with(start))
        .map_or("FieldValueInvalid", |(_, t)| t)
}

/// 404 for a write into a namespace that does not exist.
pub fn no_namespace(ns: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("namespaces \"{ns}\" not found"),
        Some(json!({"name": ns, "kind": "namespaces"})),
    )
}

/// `generateName` followed by five random characters, from the API
/// server's alphabet (lowercase consonants and digits, so that no word
/// is spelled by chance).
pub fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..5]
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect();
    format!("{prefix}{suffix}")
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
