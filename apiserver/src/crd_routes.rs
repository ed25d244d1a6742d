//! Requests for CustomResourceDefinitions
//! (`/apis/apiextensions.k8s.io/v1/customresourcedefinitions`): get,
//! list, watch, create, replace, patch and delete as the API server
//! answers them.

use axum::response::Response;
use serde_json::{Value, json};

use crate::crds::{CrdObjects, Crds};
use crate::request::Attributes;
use crate::route::no_such_resource;
use crate::table::table;
use crate::watch::Shape;
use crate::wire::{json_response, status};
use crate::writes::{self, Ctx};

pub async fn serve(
    crds: &Crds,
    attrs: &Attributes,
    body: &[u8],
    content_type: &str,
    ctx: &Ctx<'_>,
    shape: &Shape,
    cap: std::time::Duration,
) -> Response {
    let Some(r) = attrs.resource.as_ref() else {
        return no_such_resource();
    };
    if r.subresource.is_some() {
        return no_such_resource();
    }
    let objects = CrdObjects::new(crds);
    let name = r.name.as_deref().filter(|_| r.object_path);
    let body_json = || serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
    let now = crate::clock::now();
    match (attrs.verb.as_str(), name) {
        ("get", Some(n)) => {
            let found = crds.get(n);
            match (found, &shape.table) {
                (None, _) => crate::objects::not_found(&objects.served, n),
                (Some(c), Some((served, whole))) => {
                    let rv = c
                        .pointer("/metadata/resourceVersion")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    json_response(200, &table(served, &[c], &rv, now, *whole))
                }
                (Some(c), None) => json_response(200, &c),
            }
        }
        ("list", _) => {
            let (mut items, rv) = crds.list();
            items.retain(|c| shape.fields.matches(c) && shape.labels.matches(c));
            match &shape.table {
                Some((served, whole)) => {
                    json_response(200, &table(served, &items, &rv, now, *whole))
                }
                None => json_response(
                    200,
                    &json!({"kind": "CustomResourceDefinitionList", "apiVersion": "apiextensions.k8s.io/v1",
                            "metadata": {"resourceVersion": rv}, "items": items}),
                ),
            }
        }
        ("watch", _) => crate::crd_watch::watch(
            crds,
            ctx.query.get("resourceVersion").map(String::as_str),
            shape.clone(),
            cap,
        ),
        ("create", None) => writes::create(&objects, body_json(), ctx).await,
        ("update", Some(n)) => writes::replace(&objects, n, body_json(), ctx).await,
        ("patch", Some(n)) => {
            crate::patch_request::patch(&objects, n, content_type, body, ctx).await
        }
        ("delete", Some(n)) if ctx.dry_run => match crds.get(n) {
            Some(c) => json_response(200, &c),
            None => crate::objects::not_found(&objects.served, n),
        },
        ("delete", Some(n)) => {
            let rv = body_json()
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            match crds.delete(&objects.served, n, rv.as_deref()) {
                Ok(gone) => json_response(200, &gone),
                Err(resp) => resp,
            }
        }
        _ => status(
            405,
            "MethodNotAllowed",
            "the stand-in does not serve this method on customresourcedefinitions (deletecollection is not served)",
            None,
        ),
    }
}
