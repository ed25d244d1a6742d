//! The API server's answers on the wire: `Status` bodies for failures (in
//! its words), JSON responses, and objects as it sends them.

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};
use tartan_api::kind::Kind;
use tartan_api::store::DynamicObject;

/// A `Status` object for a failed request.
pub fn status_body(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut v = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}

/// A failure answered with its `Status` body.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    json_response(code, &status_body(code, reason, message, details))
}

pub fn json_response(code: u16, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    r
}

pub fn to_wire(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

/// List items of built-in kinds come without apiVersion and kind, as the
/// API server sends them; custom resources carry theirs.
pub fn item_wire(kind: Kind, o: &DynamicObject) -> Value {
    let mut v = to_wire(o);
    if kind.info().group.is_empty()
        && let Some(m) = v.as_object_mut()
    {
        m.remove("apiVersion");
        m.remove("kind");
    }
    v
}
