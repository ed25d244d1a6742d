//! Recorded answers served verbatim, for exact byte-level checks of a
//! client: each request whose method and path (with query) starts with a
//! rule's prefix gets that rule's status and body chunks, sent with a
//! pause between them.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

use crate::request::{attributes, parse_query};
use crate::server::Recorded;
use crate::wire::status;

#[derive(Clone, Default)]
pub struct Replay {
    pub rules: Vec<(Method, String, u16, Vec<String>)>,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Replay {
    pub fn on(mut self, method: Method, path_prefix: &str, code: u16, chunks: &[&str]) -> Self {
        self.rules.push((
            method,
            path_prefix.to_string(),
            code,
            chunks.iter().map(|c| c.to_string()).collect(),
        ));
        self
    }

    /// Serve on a new port of 127.0.0.1: the URL, the requests as they
    /// come, and the serving task.
    pub async fn start(
        self,
    ) -> std::io::Result<(
        String,
        Arc<Mutex<Vec<Recorded>>>,
        tokio::task::JoinHandle<()>,
    )> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let requests = self.requests.clone();
        let rules = Arc::new(self.rules);
        let rec = requests.clone();
        let app = axum::Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let rules = rules.clone();
            let rec = rec.clone();
            async move {
                let full = uri
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_default();
                let query = parse_query(uri.query());
                rec.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Recorded {
                        method: method.clone(),
                        path: full.clone(),
                        attributes: attributes(method.as_str(), uri.path(), &query),
                        query,
                        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                        user: None,
                        client: None,
                        allowed: None,
                    });
                let Some((_, _, code, chunks)) = rules
                    .iter()
                    .find(|(m, p, _, _)| *m == method && full.starts_with(p.as_str()))
                else {
                    return status(
                        404,
                        "NotFound",
                        &format!("no recorded answer for {method} {full}"),
                        None,
                    );
                };
                let chunks = chunks.clone();
                let body = futures::stream::iter(chunks).then(|c| async move {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok::<_, Infallible>(Bytes::from(c))
                });
                let mut r = Response::new(Body::from_stream(body));
                *r.status_mut() = StatusCode::from_u16(*code).unwrap_or(StatusCode::OK);
                r.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    axum::http::HeaderValue::from_static("application/json"),
                );
                r
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok((url, requests, task))
    }
}
