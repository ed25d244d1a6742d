//! Resource commands against the datastore: get, apply, create, replace,
//! delete, label. Pure parts (documents, tables, merges, label edits) are
//! in their own files and tested there; this file opens the store, reads
//! input files and turns store errors into messages.

pub mod columns;
pub mod delete;
pub mod docs;
pub mod get;
pub mod label;
pub mod names;
pub mod objects;
pub mod pools;
pub mod selector;
pub mod updates;
pub mod write;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use tartan_api::Kind;
use tartan_api::store::{Datastore, StoreError};

use crate::cli::GlobalArgs;
use docs::DocError;
use objects::{Check, Prepared};

/// An open datastore and the namespace the command line chose.
pub struct Ctx {
    pub store: Arc<dyn Datastore>,
    pub namespace: Option<String>,
}

impl Ctx {
    /// Opens the store named by `--datastore`/`TARTAN_DATASTORE`, giving up
    /// after `--timeout` if it does not answer.
    pub async fn open(global: &GlobalArgs) -> anyhow::Result<Ctx> {
        let spec = datastore_spec(global)?;
        let limit = Duration::from_secs(global.timeout.max(1));
        let store = tokio::time::timeout(limit, tartan_api::store::connect(spec, Some(limit)))
            .await
            .map_err(|_| anyhow!("cannot reach the datastore {spec} (gave up after {limit:?})"))?
            .map_err(|e| anyhow!("cannot open the datastore {spec}: {}", describe(&e)))?;
        Ok(Ctx {
            store,
            namespace: global.namespace.clone(),
        })
    }

    /// The namespace to use for `kind`: `None` for cluster-scoped kinds,
    /// else `-n` or `default`.
    pub fn namespace_for(&self, kind: Kind) -> Option<String> {
        kind.info()
            .namespaced
            .then(|| self.namespace.clone().unwrap_or_else(|| "default".into()))
    }
}

pub fn datastore_spec(global: &GlobalArgs) -> anyhow::Result<&str> {
    global
        .datastore
        .as_deref()
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            anyhow!(
                "no datastore given: pass --datastore etcd://HOST:PORT (or kubernetes), or set TARTAN_DATASTORE"
            )
        })
}

/// A store error as a person should read it.
pub fn describe(e: &StoreError) -> String {
    use names::display;
    match e {
        StoreError::NotFound(key) => format!("{} not found", display(key)),
        StoreError::AlreadyExists(key) => format!("{} already exists", display(key)),
        StoreError::Conflict { key, expected } => format!(
            "{} has been changed by someone else since resourceVersion {expected}: read it again (tartanctl get) and retry",
            display(key)
        ),
        StoreError::Invalid(m) => m.clone(),
        StoreError::Unavailable(m) => {
            // The retrying layer wraps the backend's own Unavailable text.
            let mut m = m.as_str();
            for prefix in ["datastore unavailable: ", "Unavailable: "] {
                m = m.strip_prefix(prefix).unwrap_or(m);
            }
            format!("cannot reach the datastore: {m}")
        }
        other => other.to_string(),
    }
}

pub fn describe_error(e: StoreError) -> anyhow::Error {
    anyhow!(describe(&e))
}

/// One input: its name for messages and its text.
pub struct Source {
    pub name: String,
    pub text: String,
}

/// Reads `-f` arguments: files, directories (their `.yaml`, `.yml` and
/// `.json` files, in name order) and `-` for stdin.
pub fn read_sources(paths: &[PathBuf]) -> anyhow::Result<Vec<Source>> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .take(docs::MAX_SOURCE_BYTES + 1)
                .read_to_string(&mut text)
                .context("reading stdin")?;
            docs::check_source_size("stdin", text.len() as u64)?;
            out.push(Source {
                name: "stdin".into(),
                text,
            });
        } else if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read directory {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    f.is_file()
                        && matches!(
                            f.extension().and_then(|e| e.to_str()),
                            Some("yaml" | "yml" | "json")
                        )
                })
                .collect();
            files.sort();
            for f in files {
                out.push(read_file(&f)?);
            }
        } else {
            out.push(read_file(p)?);
        }
    }
    Ok(out)
}

fn read_file(p: &Path) -> anyhow::Result<Source> {
    let len = std::fs::metadata(p)
        .with_context(|| format!("cannot read {}", p.display()))?
        .len();
    docs::check_source_size(&p.display().to_string(), len)?;
    let text =
        std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    Ok(Source {
        name: p.display().to_string(),
        text,
    })
}

/// Reads, parses and checks every document of every file. Each bad
/// document is reported on stderr; if there is any, nothing is returned
/// (so nothing gets written).
pub fn load(
    paths: &[PathBuf],
    namespace: Option<&str>,
    check: Check,
) -> anyhow::Result<Vec<Prepared>> {
    let sources = read_sources(paths)?;
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for s in &sources {
        let (d, e) = docs::parse(&s.name, &s.text);
        docs.extend(d);
        errors.extend(e);
    }
    let total = docs.len() + errors.len();
    let prepared = match objects::prepare(docs, namespace, check) {
        Ok(p) => p,
        Err(e) => {
            errors.extend(e);
            Vec::new()
        }
    };
    if !errors.is_empty() {
        // In file order, whichever check found them.
        let position = |e: &DocError| {
            let file = sources.iter().position(|s| s.name == e.origin.source);
            (file, e.origin.index, e.origin.item)
        };
        errors.sort_by_key(position);
        for e in &errors {
            eprintln!("error: {e}");
        }
        let n = errors.len();
        bail!(
            "{n} of {total} document{} invalid; nothing was written",
            if total == 1 { " is" } else { "s are" }
        );
    }
    if prepared.is_empty() {
        bail!("no objects found in {}", names_of(&sources));
    }
    Ok(prepared)
}

fn names_of(sources: &[Source]) -> String {
    if sources.is_empty() {
        return "the given directories".into();
    }
    sources
        .iter()
        .map(|s| s.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Keeps count of a run of writes, to say what was done and what was not
/// when one fails.
pub struct Progress {
    /// Every object in order, as `ippool.tartan.dev/a`.
    refs: Vec<String>,
    done: usize,
    failed: Vec<String>,
    /// `applied`, `created`, `deleted`…
    verb: &'static str,
    continue_on_error: bool,
}

impl Progress {
    pub fn new(refs: Vec<String>, verb: &'static str, continue_on_error: bool) -> Self {
        Progress {
            refs,
            done: 0,
            failed: Vec::new(),
            verb,
            continue_on_error,
        }
    }

    pub fn succeeded(&mut self) {
        self.done += 1;
    }

    /// Records a failure of the object at `index`; an error to stop with,
    /// unless going on past errors.
    pub fn failed(&mut self, index: usize, message: &str) -> Option<anyhow::Error> {
        let what = &self.refs[index];
        if self.continue_on_error {
            eprintln!("error: {what}: {message}");
            self.failed.push(what.clone());
            return None;
        }
        if self.refs.len() == 1 {
            return Some(anyhow!("{message}"));
        }
        Some(anyhow!(
            "{}",
            stop_message(&self.refs, index, message, self.verb)
        ))
    }

    /// The result of the whole run.
    pub fn finish(self) -> anyhow::Result<()> {
        if self.failed.is_empty() {
            return Ok(());
        }
        bail!(
            "{} of {} failed ({}); the other {} {}",
            self.failed.len(),
            self.refs.len(),
            self.failed.join(", "),
            self.done,
            self.verb
        )
    }
}

/// `<what>: <why>; stopped: 2 of 4 applied (a, b); not applied: c, d`.
pub fn stop_message(refs: &[String], index: usize, why: &str, verb: &str) -> String {
    let (done, rest) = refs.split_at(index.min(refs.len()));
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    format!(
        "{}: {why}; stopped: {} of {} {verb} ({}); not {verb}: {} (--continue-on-error goes on past failures)",
        refs.get(index).map_or("?", String::as_str),
        done.len(),
        refs.len(),
        list(done),
        list(rest),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_names_what_was_and_was_not_written() {
        let refs: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(
            stop_message(&refs, 2, "boom", "applied"),
            "c: boom; stopped: 2 of 4 applied (a, b); not applied: c, d (--continue-on-error goes on past failures)"
        );
        assert!(stop_message(&refs, 0, "x", "created").contains("0 of 4 created (none)"));
    }

    #[test]
    fn store_errors_read_well() {
        use tartan_api::store::ObjectKey;
        let key = ObjectKey::new(Kind::IpPool, None, "x");
        assert_eq!(
            describe(&StoreError::NotFound(key.clone())),
            "IPPool \"x\" not found"
        );
        let c = describe(&StoreError::Conflict {
            key,
            expected: "7".into(),
        });
        assert!(c.contains("read it again") && c.contains("retry"), "{c}");
        let u = StoreError::Unavailable(
            "datastore unavailable: Unavailable: tcp connect error (gave up after 5s of retries)"
                .into(),
        );
        assert_eq!(
            describe(&u),
            "cannot reach the datastore: tcp connect error (gave up after 5s of retries)"
        );
    }
}
