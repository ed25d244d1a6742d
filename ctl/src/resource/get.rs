//! `tartanctl get KIND [NAME…]`: a table, or the objects as YAML/JSON
//! (one object as itself, several as a kubectl-style `List`).

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tartan_api::store::{DynamicObject, ObjectKey, StoreError};

use super::columns::{self, TableOptions};
use super::names::{display, resolve_kind};
use super::{Ctx, describe_error, selector};
use crate::cli::{GetArgs, GetFormat};
use crate::output;

pub async fn run(ctx: &Ctx, args: GetArgs) -> anyhow::Result<()> {
    let kind = resolve_kind(&args.kind)?;
    let selector = args.selector.as_deref().map(selector::parse).transpose()?;
    if args.all_namespaces && !args.names.is_empty() {
        bail!("a name cannot be looked up across all namespaces (-A); use -n NAMESPACE");
    }
    let namespace = if args.all_namespaces {
        None
    } else {
        ctx.namespace_for(kind)
    };
    let mut missing = Vec::new();
    let mut objs = Vec::new();
    if args.names.is_empty() {
        objs = ctx
            .store
            .list(kind, namespace.as_deref())
            .await
            .map_err(describe_error)?
            .items;
        objs.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
    } else {
        for name in &args.names {
            let key = ObjectKey::new(kind, namespace.as_deref(), name);
            match ctx.store.get(&key).await {
                Ok(o) => objs.push(o),
                Err(StoreError::NotFound(_)) => {
                    missing.push(format!("{} not found", display(&key)))
                }
                Err(e) => return Err(describe_error(e)),
            }
        }
    }
    if let Some(sel) = &selector {
        objs.retain(|o| sel.matches(&o.metadata.labels.clone().unwrap_or_default()));
    }
    let single = args.names.len() == 1;
    match args.output {
        Some(GetFormat::Yaml) if !(single && objs.is_empty()) => {
            output::print(&to_yaml(&document(&objs, single)?)?)?;
        }
        Some(GetFormat::Json) if !(single && objs.is_empty()) => {
            let mut text = serde_json::to_string_pretty(&document(&objs, single)?)?;
            text.push('\n');
            output::print(&text)?;
        }
        Some(GetFormat::Yaml | GetFormat::Json) => {}
        Some(GetFormat::Wide) | None => {
            let opts = TableOptions {
                wide: args.output == Some(GetFormat::Wide),
                namespace: args.all_namespaces,
                now: now(),
            };
            let text = columns::render(kind, &objs, opts);
            if text.is_empty() && missing.is_empty() {
                match &namespace {
                    Some(ns) => eprintln!("No resources found in namespace {ns:?}."),
                    None => eprintln!("No resources found."),
                }
            }
            output::print(&text)?;
        }
    }
    if !missing.is_empty() {
        bail!("{}", missing.join("; "));
    }
    Ok(())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// One object as itself, or several as a `List`.
pub fn document(objs: &[DynamicObject], single: bool) -> anyhow::Result<Value> {
    let mut items = objs
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()
        .context("formatting objects")?;
    if single && items.len() == 1 {
        return Ok(items.remove(0));
    }
    Ok(json!({"apiVersion": "v1", "kind": "List", "items": items}))
}

pub fn to_yaml(v: &Value) -> anyhow::Result<String> {
    let mut text = serde_saphyr::to_string(v).context("formatting YAML")?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::Kind;
    use tartan_api::examples::example;

    #[test]
    fn one_object_is_itself_and_several_are_a_list() {
        let a = example(Kind::IpPool, "a");
        let b = example(Kind::IpPool, "b");
        let one = document(std::slice::from_ref(&a), true).unwrap();
        assert_eq!(one["kind"], "IPPool");
        assert_eq!(one["metadata"]["name"], "a");
        let list = document(&[a.clone(), b], false).unwrap();
        assert_eq!(list["kind"], "List");
        assert_eq!(list["apiVersion"], "v1");
        assert_eq!(list["items"][1]["metadata"]["name"], "b");
        // A listing of one is still a list, as with kubectl.
        assert_eq!(document(&[a], false).unwrap()["kind"], "List");
    }

    #[test]
    fn yaml_output_reads_back_as_the_same_objects() {
        let objs: Vec<DynamicObject> = Kind::tartan().map(|k| example(k, "x")).collect();
        let doc = document(&objs, false).unwrap();
        let text = to_yaml(&doc).unwrap();
        let back: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(back, doc);
        // And `apply -f` of that output finds every object again.
        let (docs, errors) = crate::resource::docs::parse("out.yaml", &text);
        assert!(errors.is_empty());
        assert_eq!(docs.len(), objs.len());
    }
}
