//! Where the server's record of requests goes. In memory (the default)
//! every [`Recorded`] request is kept for tests that run the server in
//! their own process and read them back; a long-lived server (the
//! `tartan-apiserver` program, a lab's API server) streams each request
//! as one JSON line to a file as it comes and keeps only counts, so its
//! memory does not grow with the requests it serves.

use std::collections::HashMap;
use std::fs::File;
use std::io::{LineWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::Method;
use serde_json::{Value, json};

use crate::request::Attributes;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    /// The path (for [`crate::Replay`], with the query).
    pub path: String,
    pub query: HashMap<String, String>,
    pub body: Value,
    /// The user its token named; `None` when no token was needed or the
    /// token was not valid (unknown, expired, revoked, or its Pod gone:
    /// answered 401).
    pub user: Option<String>,
    /// The client the token was issued to.
    pub client: Option<String>,
    pub attributes: Attributes,
    /// The policy's verdict, when the server has one.
    pub allowed: Option<bool>,
}

/// Requests seen, by the policy's verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    pub allowed: u64,
    pub refused: u64,
    /// Judged by no policy.
    pub unjudged: u64,
}

impl Verdicts {
    fn count(&mut self, allowed: Option<bool>) {
        match allowed {
            Some(true) => self.allowed += 1,
            Some(false) => self.refused += 1,
            None => self.unjudged += 1,
        }
    }
}

enum Sink {
    Memory(Vec<Recorded>),
    File {
        path: PathBuf,
        out: LineWriter<File>,
        /// Lines that could not be written (each failure is logged).
        lost: u64,
    },
}

struct Inner {
    sink: Sink,
    verdicts: Verdicts,
}

/// The record of requests; clones share it.
#[derive(Clone)]
pub struct RequestLog(Arc<Mutex<Inner>>);

impl Default for RequestLog {
    fn default() -> Self {
        RequestLog(Arc::new(Mutex::new(Inner {
            sink: Sink::Memory(Vec::new()),
            verdicts: Verdicts::default(),
        })))
    }
}

/// One request as a line of the file: who, the RBAC verb and request,
/// the HTTP method and path, the verdict.
pub fn line(r: &Recorded) -> Value {
    json!({
        "user": r.user, "client": r.client, "verb": r.attributes.verb,
        "request": r.attributes.to_string(), "method": r.method.as_str(),
        "path": r.path, "allowed": r.allowed,
    })
}

impl RequestLog {
    /// A log that writes each request to `path` (created or emptied) as
    /// it comes, flushed line by line, and keeps none in memory.
    pub fn to_file(path: &Path) -> std::io::Result<RequestLog> {
        let out = LineWriter::new(File::create(path)?);
        Ok(RequestLog(Arc::new(Mutex::new(Inner {
            sink: Sink::File {
                path: path.to_path_buf(),
                out,
                lost: 0,
            },
            verdicts: Verdicts::default(),
        }))))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, r: Recorded) {
        let mut inner = self.lock();
        inner.verdicts.count(r.allowed);
        match &mut inner.sink {
            Sink::Memory(v) => v.push(r),
            Sink::File { path, out, lost } => {
                let mut text = line(&r).to_string();
                text.push('\n');
                if let Err(e) = out.write_all(text.as_bytes()) {
                    *lost += 1;
                    tracing::error!(file = %path.display(), error = %e, lost = *lost, "cannot write a request to the log; it is lost");
                }
            }
        }
    }

    /// The requests kept in memory: all of them in memory mode, none when
    /// they go to a file (read the file).
    pub fn requests(&self) -> Vec<Recorded> {
        match &self.lock().sink {
            Sink::Memory(v) => v.clone(),
            Sink::File { .. } => Vec::new(),
        }
    }

    /// How many requests were seen, by verdict.
    pub fn verdicts(&self) -> Verdicts {
        self.lock().verdicts
    }

    /// Lines lost to write errors (0 in memory mode).
    pub fn lost(&self) -> u64 {
        match &self.lock().sink {
            Sink::Memory(_) => 0,
            Sink::File { lost, .. } => *lost,
        }
    }

    /// Writes out what is buffered (a line is written whole as it comes;
    /// this is for a line cut short by a failed write).
    pub fn flush(&self) -> std::io::Result<()> {
        match &mut self.lock().sink {
            Sink::Memory(_) => Ok(()),
            Sink::File { out, .. } => out.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::attributes;
    use axum::http::Method;

    fn recorded(path: &str, allowed: Option<bool>) -> Recorded {
        Recorded {
            method: Method::GET,
            path: path.to_string(),
            query: Default::default(),
            body: Value::Null,
            user: Some("u".into()),
            client: None,
            attributes: attributes("GET", path, &Default::default()),
            allowed,
        }
    }

    #[test]
    fn memory_keeps_every_request_and_counts_verdicts() {
        let log = RequestLog::default();
        log.push(recorded("/api/v1/nodes", Some(true)));
        log.push(recorded("/api/v1/pods", Some(false)));
        log.push(recorded("/api/v1/services", None));
        assert_eq!(log.requests().len(), 3);
        assert_eq!(
            log.verdicts(),
            Verdicts {
                allowed: 1,
                refused: 1,
                unjudged: 1
            }
        );
    }

    #[test]
    fn a_file_gets_each_request_as_it_comes_and_memory_keeps_none() {
        let dir = std::env::temp_dir().join(format!("tartan-reqlog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("requests.jsonl");
        let log = RequestLog::to_file(&path).unwrap();
        for i in 0..1000 {
            log.push(recorded(&format!("/api/v1/nodes/n{i}"), Some(i % 2 == 0)));
        }
        // Readable now, without a flush or a stop.
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[7]["path"], "/api/v1/nodes/n7");
        assert_eq!(lines[7]["verb"], "get");
        assert_eq!(lines[7]["allowed"], false);
        assert!(log.requests().is_empty());
        assert_eq!(log.verdicts().refused, 500);
        assert_eq!(log.lost(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
