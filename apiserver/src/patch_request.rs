//! PATCH as the API server serves it, in its four media types: JSON patch
//! (RFC 6902), JSON merge patch (RFC 7386), strategic merge patch (the
//! built-in kinds only; 415 for others, in the server's words) and
//! server-side apply (`application/apply-patch+yaml`, `fieldManager`,
//! `force`; created when absent, 409 with the conflicts). Patches that
//! lose a race with another write are tried again on the new version.

use axum::response::Response;
use serde_json::Value;

use crate::admission::Write;
use crate::apply::apply;
use crate::clock::rfc3339;
use crate::fields::{Writer, track_update};
use crate::objects::{Objects, not_found};
use crate::patch::{PatchError, json_patch, merge_patch, strategic_merge};
use crate::strict::{display, unknown_fields};
use crate::wire::{json_response, status, status_body};
use crate::writes::{
    Ctx, address, answer, meta, no_op, parse_body, stamp_create, stamp_update, store, validate,
    writer,
};

/// PATCH of `name` with a body of `content_type`.
pub async fn patch(
    o: &impl Objects,
    name: &str,
    content_type: &str,
    body: &[u8],
    ctx: &Ctx<'_>,
) -> Response {
    let served = o.served();
    let media = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    // Strategic merge patches are for the built-in kinds the kind table
    // holds; custom resources and the CRDs themselves take the others.
    let builtin = served
        .kind
        .is_some_and(|k| k.info().group != tartan_api::kind::TARTAN_GROUP);
    let accepted = if builtin {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    };
    let known = matches!(
        media.as_str(),
        "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/apply-patch+yaml"
    ) || (builtin && media == "application/strategic-merge-patch+json");
    if !known {
        return status(
            415,
            "UnsupportedMediaType",
            &format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
            None,
        );
    }
    let body = match parse_body(body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let (manager, api_version, time) = (ctx.manager(), served.api_version(), rfc3339(ctx.now));
    let w = writer(&manager, &api_version, &time);
    // As the API server does, a write that lost a race with another is
    // tried again on the new version (a patch that names the version it
    // patches is not).
    let mut attempt = 0;
    loop {
        attempt += 1;
        let live = match o.get(name).await {
            Ok(l) => l,
            Err(r) => return r,
        };
        let (resp, retry) = if media == "application/apply-patch+yaml" {
            server_side_apply(o, name, live, body.clone(), ctx, &w).await
        } else {
            once(o, name, live, &media, &body, ctx, &w).await
        };
        if !(retry && resp.status() == 409 && attempt < RETRIES) {
            return resp;
        }
    }
}

/// Whether a patch names the resourceVersion it applies to (then a
/// conflict is its answer, not a race to retry).
fn names_version(media: &str, body: &Value) -> bool {
    match body {
        Value::Array(ops) if media == "application/json-patch+json" => ops
            .iter()
            .any(|op| op.get("path").and_then(Value::as_str) == Some("/metadata/resourceVersion")),
        _ => body
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    }
}

/// Tries of a patch that loses races.
const RETRIES: u32 = 5;

/// One try of a patch other than an apply: the answer, and whether a 409
/// in it is a lost race (so worth another try).
async fn once(
    o: &impl Objects,
    name: &str,
    live: Option<Value>,
    media: &str,
    body: &Value,
    ctx: &Ctx<'_>,
    w: &Writer<'_>,
) -> (Response, bool) {
    let served = o.served();
    let Some(live) = live else {
        return (not_found(served, name), false);
    };
    let patched = match media {
        "application/merge-patch+json" => Ok(merge_patch(&live, body)),
        "application/json-patch+json" => json_patch(&live, body),
        _ => strategic_merge(&served.name, &live, body),
    };
    let mut new = match patched {
        Ok(v) => v,
        Err(PatchError::Invalid(e)) => return (status(422, "Invalid", &e, None), false),
        Err(PatchError::TooLarge(e)) => {
            let message = format!("Request entity too large: {e}");
            return (status(413, "RequestEntityTooLarge", &message, None), false);
        }
    };
    if let Err(r) = address(o, &mut new, Some(name)) {
        return (r, false);
    }
    // A resourceVersion in the patch is a precondition; none: the live one.
    let precondition = names_version(media, body);
    let live_rv = live.pointer("/metadata/resourceVersion").cloned();
    if let Some(m) = meta(&mut new)
        && m.get("resourceVersion").is_none_or(Value::is_null)
        && let Some(rv) = live_rv
    {
        m.insert("resourceVersion".into(), rv);
    }
    let warning = match validate(served, &mut new, ctx) {
        Ok(w) => w,
        Err(r) => return (r, false),
    };
    if let Err(r) = o.admit(&mut new, Write::Update(&live)).await {
        return (r, false);
    }
    stamp_update(&live, &mut new);
    track_update(Some(&live), &mut new, w);
    if no_op(&live, &new) {
        return (answer(200, &live, warning), false);
    }
    (store(o, new, false, 200, ctx, warning).await, !precondition)
}

async fn server_side_apply(
    o: &impl Objects,
    name: &str,
    live: Option<Value>,
    mut config: Value,
    ctx: &Ctx<'_>,
    w: &Writer<'_>,
) -> (Response, bool) {
    let served = o.served();
    if ctx.query.get("fieldManager").is_none_or(String::is_empty) {
        return (
            status(
                422,
                "Invalid",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                None,
            ),
            false,
        );
    }
    if let Err(r) = address(o, &mut config, Some(name)) {
        return (r, false);
    }
    // An applied field the kind does not declare fails the API server's
    // typed conversion whatever the fieldValidation: it answers 500 with
    // no reason (kubernetes/kubernetes#139253), in these words.
    let unknown = unknown_fields(served, &config);
    if !unknown.is_empty() {
        let errors: Vec<String> = unknown
            .iter()
            .map(|f| format!(".{}: field not declared in schema", display(f)))
            .collect();
        let errors = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        let mut body = status_body(
            500,
            "",
            &format!(
                "failed to create typed patch object ({}/{name}; {}, Kind={}): {errors}",
                o.namespace().unwrap_or_default(),
                if served.group.is_empty() {
                    format!("/{}", served.version)
                } else {
                    served.api_version()
                },
                served.name
            ),
            None,
        );
        if let Some(m) = body.as_object_mut() {
            m.remove("reason");
        }
        return (json_response(500, &body), false);
    }
    let warning = None;
    let force = ctx.query.get("force").is_some_and(|f| f == "true");
    let mut new = match apply(live.as_ref(), &config, w, force) {
        Ok(v) => v,
        Err(c) => {
            let causes = serde_json::json!({"causes": c.causes()});
            return (status(409, "Conflict", &c.message(), Some(causes)), false);
        }
    };
    let write = match &live {
        None => Write::Create,
        Some(l) => Write::Update(l),
    };
    if let Err(r) = o.admit(&mut new, write).await {
        return (r, false);
    }
    match live {
        None => {
            stamp_create(served, &mut new, ctx.now);
            (store(o, new, true, 201, ctx, warning).await, true)
        }
        Some(live) => {
            if let (Some(m), Some(rv)) = (meta(&mut new), live.pointer("/metadata/resourceVersion"))
            {
                m.insert("resourceVersion".into(), rv.clone());
            }
            stamp_update(&live, &mut new);
            if no_op(&live, &new) {
                return (answer(200, &live, warning), false);
            }
            (store(o, new, false, 200, ctx, warning).await, true)
        }
    }
}

#[cfg(test)]
#[path = "patch_request_tests.rs"]
mod tests;
