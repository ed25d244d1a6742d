//! A bare HTTP/1.1 client for the stand-in's tests: one request on its
//! own connection, exactly the headers given, the answer read whole.

// Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `method path` to the server at `url` (`http://HOST:PORT`) with
/// `headers` and `body`: the status and the whole response as text.
pub async fn request(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, out)
}

/// The JSON body of a whole response (Null when it has none).
pub fn body_json(response: &str) -> Value {
    response
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null)
}

/// `Authorization: Bearer …` for `token`, if any.
pub fn bearer(token: Option<&str>) -> Option<(&'static str, String)> {
    token.map(|t| ("Authorization", format!("Bearer {t}")))
}
