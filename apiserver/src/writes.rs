//! Writes as the API server makes them, over any [`Objects`]: create and
//! replace (PATCH is [`crate::patch_request`]), with what the server adds
//! to each write: `creationTimestamp` and
//! `generation` (bumped when anything outside metadata and status
//! changes), `managedFields` for the write's field manager, and field
//! validation when the request asks for it.

use std::collections::HashMap;

use axum::http::HeaderValue;
use axum::response::Response;
use serde_json::Value;

use tartan_api::kind::Kind;

use crate::admission::{Write, generated_name, invalid, unconditional_update};
use crate::clock::rfc3339;
use crate::fields::{Writer, track_update};
use crate::objects::{Objects, bad_request, not_found};
use crate::resources::Served;
use crate::strict::{display, prune, unknown_fields};
use crate::wire::{json_response, status};

/// What a write request says besides its body.
pub struct Ctx<'a> {
    pub query: &'a HashMap<String, String>,
    pub user_agent: &'a str,
    /// Seconds since the epoch.
    pub now: i64,
    /// `dryRun=All`: everything but the write.
    pub dry_run: bool,
}

/// The `dryRun` parameter, or a DELETE's `DeleteOptions.dryRun` in
/// `body`: `Ok(true)` for `All`, refused for anything else.
pub fn dry_run(query: &HashMap<String, String>, body: &Value) -> Result<bool, Response> {
    let in_body: Vec<&str> = body
        .get("dryRun")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().unwrap_or("?")).collect())
        .unwrap_or_default();
    let asked = query
        .get("dryRun")
        .map(String::as_str)
        .into_iter()
        .chain(in_body);
    let mut dry = false;
    for v in asked {
        if v != "All" {
            return Err(bad_request(&format!(
                "dryRun: Unsupported value: \"{v}\": supported values: \"All\""
            )));
        }
        dry = true;
    }
    Ok(dry)
}

/// Store `obj` (created, or replacing the version it carries) and
/// answer `code` with what was stored; a dry run stores nothing and
/// answers with `obj`.
pub(crate) async fn store(
    o: &impl Objects,
    obj: Value,
    create: bool,
    code: u16,
    ctx: &Ctx<'_>,
    warning: Option<String>,
) -> Response {
    if ctx.dry_run {
        return answer(code, &obj, warning);
    }
    let written = if create {
        o.create(obj).await
    } else {
        o.update(obj).await
    };
    match written {
        Ok(v) => answer(code, &v, warning),
        Err(r) => r,
    }
}

impl Ctx<'_> {
    /// `fieldManager`, or as the API server defaults it, the user agent
    /// up to its first `/`.
    pub(crate) fn manager(&self) -> String {
        match self.query.get("fieldManager").filter(|m| !m.is_empty()) {
            Some(m) => m.clone(),
            None => self
                .user_agent
                .split('/')
                .next()
                .unwrap_or_default()
                .to_string(),
        }
    }
}

pub(crate) fn writer<'a>(manager: &'a str, api_version: &'a str, time: &'a str) -> Writer<'a> {
    Writer {
        manager,
        api_version,
        subresource: None,
        time,
    }
}

/// Field validation of `obj`, when the request asks for it
/// (`fieldValidation`): `Strict` refuses undeclared fields (400), `Warn`
/// and `Ignore` drop them as the API server does (`Warn` with a warning
/// each). Without the parameter nothing is checked. `Ok(warnings)`.
pub(crate) fn validate(
    served: &Served,
    obj: &mut Value,
    ctx: &Ctx<'_>,
) -> Result<Option<String>, Response> {
    let mode = ctx.query.get("fieldValidation").map(String::as_str);
    match mode {
        None => return Ok(None),
        Some("Strict") | Some("Warn") | Some("Ignore") => {}
        Some(other) => {
            return Err(bad_request(&format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            )));
        }
    }
    let unknown = unknown_fields(served, obj);
    if unknown.is_empty() {
        return Ok(None);
    }
    let each: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{}\"", display(f)))
        .collect();
    if mode == Some("Strict") {
        return Err(bad_request(&format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            each.join(", "),
            kind = served.name,
            v = served.version
        )));
    }
    for f in &unknown {
        prune(obj, f);
    }
    Ok((mode == Some("Warn")).then(|| each.join("\n")))
}

pub(crate) fn answer(code: u16, obj: &Value, warning: Option<String>) -> Response {
    let mut r = json_response(code, obj);
    for w in warning.iter().flat_map(|w| w.lines()) {
        // `299 - "unknown field \"spec.x\""`: quoted, quotes escaped.
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        match HeaderValue::from_str(&text) {
            Ok(h) => {
                r.headers_mut().append("Warning", h);
            }
            Err(e) => tracing::warn!(warning = %w, error = %e, "a warning that cannot be a header"),
        }
    }
    r
}

pub(crate) fn meta(obj: &mut Value) -> Option<&mut serde_json::Map<String, Value>> {
    obj.get_mut("metadata").and_then(Value::as_object_mut)
}

/// Whether objects of `served` carry a generation: custom resources,
/// CRDs, and of the built-in kinds the stand-in holds NetworkPolicies and
/// EndpointSlices (their strategies set it).
fn has_generation(served: &Served) -> bool {
    match served.kind {
        None => true,
        Some(k) => {
            k.info().group == tartan_api::kind::TARTAN_GROUP
                || matches!(k, Kind::KubeNetworkPolicy | Kind::EndpointSlice)
        }
    }
}

/// What the server sets on a new object.
pub(crate) fn stamp_create(served: &Served, obj: &mut Value, now: i64) {
    let generation = has_generation(served);
    if let Some(m) = meta(obj) {
        m.insert("creationTimestamp".into(), rfc3339(now).into());
        if generation {
            m.insert("generation".into(), 1.into());
        }
        m.remove("resourceVersion");
    }
}

/// What the server carries over to a new version of `old`: its
/// creation time, and its generation (one more if the content changed).
pub(crate) fn stamp_update(old: &Value, new: &mut Value) {
    let content = |o: &Value| -> Value {
        let mut o = o.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
        }
        o
    };
    let generation = old.pointer("/metadata/generation").and_then(Value::as_i64);
    let bumped = content(old) != content(new);
    let created = old.pointer("/metadata/creationTimestamp").cloned();
    if let Some(m) = meta(new) {
        if let Some(c) = created {
            m.insert("creationTimestamp".into(), c);
        }
        if let Some(g) = generation {
            m.insert("generation".into(), (g + i64::from(bumped)).into());
        }
    }
}

/// Make `obj` the object the request addresses: its type, name and
/// namespace.
pub(crate) fn address(
    o: &impl Objects,
    obj: &mut Value,
    name: Option<&str>,
) -> Result<(), Response> {
    let served = o.served();
    if !obj.is_object() {
        return Err(bad_request("the object must be a JSON or YAML map"));
    }
    for (k, want) in [
        ("apiVersion", served.api_version()),
        ("kind", served.name.clone()),
    ] {
        match obj.get(k).and_then(Value::as_str) {
            None | Some("") => obj[k] = want.into(),
            Some(have) if have == want => {}
            Some(have) => {
                return Err(bad_request(&format!(
                    "the API version in the data ({have}) does not match the expected API version ({})",
                    if k == "kind" { &served.name } else { &want }
                )));
            }
        }
    }
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = serde_json::json!({});
    }
    let ns = o.namespace().map(str::to_string);
    let Some(m) = meta(obj) else {
        return Ok(());
    };
    if let Some(name) = name {
        match m.get("name").and_then(Value::as_str) {
            None | Some("") => {
                m.insert("name".into(), name.into());
            }
            Some(n) if n == name => {}
            Some(n) => {
                return Err(bad_request(&format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
        }
    }
    if let Some(ns) = ns {
        match m.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                m.insert("namespace".into(), ns.into());
            }
            Some(n) if n == ns => {}
            Some(_) => {
                return Err(bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    }
    Ok(())
}

/// POST: create.
pub async fn create(o: &impl Objects, mut obj: Value, ctx: &Ctx<'_>) -> Response {
    if let Err(r) = address(o, &mut obj, None) {
        return r;
    }
    let generate = match name_or_generate(o.served(), &mut obj) {
        Ok(g) => g,
        Err(r) => return r,
    };
    let warning = match validate(o.served(), &mut obj, ctx) {
        Ok(w) => w,
        Err(r) => return r,
    };
    if let Err(r) = o.admit(&mut obj, Write::Create).await {
        return r;
    }
    let (manager, api_version, time) = (ctx.manager(), o.served().api_version(), rfc3339(ctx.now));
    stamp_create(o.served(), &mut obj, ctx.now);
    track_update(None, &mut obj, &writer(&manager, &api_version, &time));
    let mut attempt = 1;
    loop {
        let r = store(o, obj.clone(), true, 201, ctx, warning.clone()).await;
        // A generated name that is taken: another one, as the API server
        // tries again.
        let Some(prefix) = generate.as_deref().filter(|_| r.status() == 409) else {
            return r;
        };
        if attempt == GENERATE_TRIES {
            return r;
        }
        attempt += 1;
        if let Some(m) = meta(&mut obj) {
            m.insert("name".into(), generated_name(prefix).into());
        }
    }
}

/// Creates with a generated name that are tried before the name taken
/// is the answer.
const GENERATE_TRIES: u32 = 8;

/// The name of a new object: its own, or one made of its
/// `generateName` (`Ok(Some(prefix))`); 422 with neither.
fn name_or_generate(served: &Served, obj: &mut Value) -> Result<Option<String>, Response> {
    let Some(m) = meta(obj) else {
        return Ok(None);
    };
    let named = |k: &str| {
        m.get(k)
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    if named("name").is_some() {
        return Ok(None);
    }
    let Some(prefix) = named("generateName") else {
        let why = "Required value: name or generateName is required".to_string();
        return Err(invalid(served, "", &[("metadata.name".into(), why)]));
    };
    m.insert("name".into(), generated_name(&prefix).into());
    Ok(Some(prefix))
}

/// PUT: replace `name`. The object must carry the resourceVersion it
/// replaces, unless its kind allows an unconditional update (then the
/// stored version is replaced, whichever it is).
pub async fn replace(o: &impl Objects, name: &str, mut obj: Value, ctx: &Ctx<'_>) -> Response {
    if let Err(r) = address(o, &mut obj, Some(name)) {
        return r;
    }
    let rv = obj
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    let unconditional = rv.is_none_or(str::is_empty);
    if unconditional && !unconditional_update(o.served()) {
        return status(
            422,
            "Invalid",
            &format!(
                "{} \"{name}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
                o.served().resource()
            ),
            Some(crate::objects::details(o.served(), name)),
        );
    }
    let warning = match validate(o.served(), &mut obj, ctx) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let live = match o.get(name).await {
        Ok(Some(l)) => l,
        Ok(None) => return not_found(o.served(), name),
        Err(r) => return r,
    };
    if unconditional
        && let (Some(m), Some(rv)) = (meta(&mut obj), live.pointer("/metadata/resourceVersion"))
    {
        m.insert("resourceVersion".into(), rv.clone());
    }
    if let Err(r) = o.admit(&mut obj, Write::Update(&live)).await {
        return r;
    }
    let (manager, api_version, time) = (ctx.manager(), o.served().api_version(), rfc3339(ctx.now));
    stamp_update(&live, &mut obj);
    track_update(
        Some(&live),
        &mut obj,
        &writer(&manager, &api_version, &time),
    );
    if no_op(&live, &obj) {
        return answer(200, &live, warning);
    }
    store(o, obj, false, 200, ctx, warning).await
}

/// Whether writing `new` over `live` would change nothing but the times
/// of managedFields: the API server then writes nothing (the
/// resourceVersion stays, watchers hear nothing).
pub(crate) fn no_op(live: &Value, new: &Value) -> bool {
    let untimed = |o: &Value| {
        let mut o = o.clone();
        if let Some(Value::Array(list)) = o.pointer_mut("/metadata/managedFields") {
            for e in list.iter_mut().filter_map(Value::as_object_mut) {
                e.remove("time");
            }
        }
        o
    };
    untimed(live) == untimed(new)
}

/// A request body in JSON or YAML.
pub(crate) fn parse_body(body: &[u8]) -> Result<Value, Response> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body).map_err(|e| bad_request(&e.to_string()))?;
    serde_saphyr::from_str::<Value>(text).map_err(|e| bad_request(&e.to_string()))
}
