//! `tartanctl label`: the edit rules (pure) and the read-modify-write loop.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use tartan_api::store::{ObjectKey, StoreError};

use super::names::{display, reference, resolve_kind};
use super::{Ctx, describe_error};
use crate::cli::LabelArgs;
use crate::output;

/// One requested change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelEdit {
    Set(String, String),
    Remove(String),
}

/// Splits the words after KIND into names and edits (`k=v`, `k-`), as
/// kubectl does. Keys and values must be valid Kubernetes label syntax.
pub fn parse_words(words: &[String]) -> anyhow::Result<(Vec<String>, Vec<LabelEdit>)> {
    let mut names = Vec::new();
    let mut edits: Vec<LabelEdit> = Vec::new();
    for w in words {
        let edit = if let Some((k, v)) = w.split_once('=') {
            check_key(k)?;
            check_value(k, v)?;
            LabelEdit::Set(k.to_string(), v.to_string())
        } else if let Some(k) = w.strip_suffix('-') {
            check_key(k)?;
            LabelEdit::Remove(k.to_string())
        } else {
            if !edits.is_empty() {
                bail!("{w:?}: names come before label changes (key=value or key-)");
            }
            names.push(w.clone());
            continue;
        };
        let key = match &edit {
            LabelEdit::Set(k, _) | LabelEdit::Remove(k) => k,
        };
        if edits
            .iter()
            .any(|e| matches!(e, LabelEdit::Set(k, _) | LabelEdit::Remove(k) if k == key))
        {
            bail!("label {key:?} is changed twice");
        }
        edits.push(edit);
    }
    if names.is_empty() {
        bail!("name the object(s) to label: tartanctl label KIND NAME key=value");
    }
    if edits.is_empty() {
        bail!("no label changes given: use key=value to set, key- to remove");
    }
    Ok((names, edits))
}

/// The result of applying edits: the new labels, whether they differ, and
/// notes for the user (labels to remove that were not there).
#[derive(Debug, PartialEq, Eq)]
pub struct Edited {
    pub labels: BTreeMap<String, String>,
    pub changed: bool,
    pub notes: Vec<String>,
}

/// Applies `edits` to `labels`. Changing a value already set needs
/// `overwrite`; setting the value it already has is fine.
pub fn apply_edits(
    labels: &BTreeMap<String, String>,
    edits: &[LabelEdit],
    overwrite: bool,
) -> anyhow::Result<Edited> {
    let mut out = labels.clone();
    let mut notes = Vec::new();
    for e in edits {
        match e {
            LabelEdit::Set(k, v) => {
                if let Some(old) = out.get(k)
                    && old != v
                    && !overwrite
                {
                    bail!(
                        "label {k:?} already has the value {old:?}; use --overwrite to change it"
                    );
                }
                out.insert(k.clone(), v.clone());
            }
            LabelEdit::Remove(k) => {
                if out.remove(k).is_none() {
                    notes.push(format!("label {k:?} not found"));
                }
            }
        }
    }
    let changed = &out != labels;
    Ok(Edited {
        labels: out,
        changed,
        notes,
    })
}

/// A name part: 1-63 of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn is_name(s: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(ok_char)
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A DNS subdomain: lower-case labels of `[a-z0-9-]` joined by dots.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn check_key(key: &str) -> anyhow::Result<()> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) || !is_name(name) {
        bail!(
            "invalid label key {key:?}: an optional DNS-subdomain prefix and '/', then 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        );
    }
    Ok(())
}

fn check_value(key: &str, value: &str) -> anyhow::Result<()> {
    if !value.is_empty() && !is_name(value) {
        bail!(
            "invalid value {value:?} for label {key:?}: at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        );
    }
    Ok(())
}

/// How many times a label change is retried when someone else wrote the
/// object between our read and our write.
const ATTEMPTS: usize = 5;

pub async fn run(ctx: &Ctx, args: LabelArgs) -> anyhow::Result<()> {
    let kind = resolve_kind(&args.kind)?;
    let (names, edits) = parse_words(&args.words)?;
    let namespace = ctx.namespace_for(kind);
    for name in &names {
        let key = ObjectKey::new(kind, namespace.as_deref(), name);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut obj = ctx.store.get(&key).await.map_err(describe_error)?;
            let current = obj.metadata.labels.clone().unwrap_or_default();
            let edited =
                apply_edits(&current, &edits, args.overwrite).with_context(|| display(&key))?;
            for n in &edited.notes {
                eprintln!("warning: {}: {n}", display(&key));
            }
            if !edited.changed {
                output::print(&format!("{} not labeled\n", reference(&key)))?;
                break;
            }
            obj.metadata.labels = Some(edited.labels);
            match ctx.store.update(obj).await {
                Ok(_) => {
                    output::print(&format!("{} labeled\n", reference(&key)))?;
                    break;
                }
                Err(StoreError::Conflict { .. }) if attempt < ATTEMPTS => continue,
                Err(e) => return Err(describe_error(e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn map(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn words_split_into_names_and_edits() {
        let (names, edits) =
            parse_words(&words(&["a", "b", "env=prod", "tartan.dev/zone=", "old-"])).unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            edits,
            [
                LabelEdit::Set("env".into(), "prod".into()),
                LabelEdit::Set("tartan.dev/zone".into(), "".into()),
                LabelEdit::Remove("old".into()),
            ]
        );
    }

    #[test]
    fn bad_words_are_refused() {
        for (w, why) in [
            (vec!["env=prod"], "name the object"),
            (vec!["a"], "no label changes"),
            (vec!["a", "env=x", "b"], "names come before"),
            (vec!["a", "env=x", "env-"], "changed twice"),
            (vec!["a", "-bad=x"], "invalid label key"),
            (vec!["a", "Bad_Prefix/x=1"], "invalid label key"),
            (vec!["a", "k=has space"], "invalid value"),
            (vec!["a", "k="], ""),
        ] {
            let r = parse_words(&words(&w));
            if why.is_empty() {
                assert!(r.is_ok(), "{w:?}");
            } else {
                let e = r.unwrap_err().to_string();
                assert!(e.contains(why), "{w:?}: {e}");
            }
        }
        let long = format!("a={}", "x".repeat(64));
        assert!(parse_words(&words(&["n", &long])).is_err());
    }

    #[test]
    fn setting_and_removing() {
        let before = map(&[("env", "dev"), ("team", "net")]);
        let e = apply_edits(
            &before,
            &[
                LabelEdit::Set("tier".into(), "web".into()),
                LabelEdit::Remove("team".into()),
            ],
            false,
        )
        .unwrap();
        assert_eq!(e.labels, map(&[("env", "dev"), ("tier", "web")]));
        assert!(e.changed && e.notes.is_empty());
    }

    #[test]
    fn changing_a_value_needs_overwrite() {
        let before = map(&[("env", "dev")]);
        let set = [LabelEdit::Set("env".into(), "prod".into())];
        let err = apply_edits(&before, &set, false).unwrap_err().to_string();
        assert!(
            err.contains("already has the value \"dev\"") && err.contains("--overwrite"),
            "{err}"
        );
        let e = apply_edits(&before, &set, true).unwrap();
        assert_eq!(e.labels, map(&[("env", "prod")]));
        // The same value again is not a change and needs no --overwrite.
        let same = apply_edits(
            &before,
            &[LabelEdit::Set("env".into(), "dev".into())],
            false,
        )
        .unwrap();
        assert!(!same.changed);
    }

    #[test]
    fn removing_an_absent_label_is_a_note_not_an_error() {
        let e = apply_edits(&BTreeMap::new(), &[LabelEdit::Remove("x".into())], false).unwrap();
        assert!(!e.changed);
        assert_eq!(e.notes, ["label \"x\" not found"]);
    }
}
