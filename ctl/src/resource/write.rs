//! `apply`, `create` and `replace`: every document is read and checked
//! first ([`super::load`]); only then are objects written, in file order.

use tartan_api::store::{DynamicObject, StoreError, same_content};

use super::objects::{Check, Prepared};
use super::{Ctx, Progress, describe, load, names};
use crate::cli::FileArgs;
use crate::output;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Apply,
    Create,
    Replace,
}

impl Mode {
    fn verb(self) -> &'static str {
        match self {
            Mode::Apply => "applied",
            Mode::Create => "created",
            Mode::Replace => "replaced",
        }
    }
}

pub async fn run(ctx: &Ctx, mode: Mode, args: FileArgs) -> anyhow::Result<()> {
    let items = load(&args.files, ctx.namespace.as_deref(), Check::Validate)?;
    let refs = items.iter().map(|p| names::reference(&p.key)).collect();
    let mut progress = Progress::new(refs, mode.verb(), args.continue_on_error);
    for (i, p) in items.iter().enumerate() {
        match write_one(ctx, mode, p).await {
            Ok(outcome) => {
                progress.succeeded();
                output::print(&format!("{} {outcome}\n", names::reference(&p.key)))?;
            }
            Err(e) => {
                if let Some(stop) = progress.failed(i, &describe(&e)) {
                    return Err(stop);
                }
            }
        }
    }
    progress.finish()
}

async fn write_one(ctx: &Ctx, mode: Mode, p: &Prepared) -> Result<&'static str, StoreError> {
    let store = &ctx.store;
    match mode {
        Mode::Create => {
            store.create(for_create(&p.obj)).await?;
            Ok("created")
        }
        Mode::Replace => {
            let stored = store.get(&p.key).await?;
            store.update(for_replace(&p.obj, &stored)).await?;
            Ok("replaced")
        }
        Mode::Apply => match store.get(&p.key).await {
            Err(StoreError::NotFound(_)) => {
                store.create(for_create(&p.obj)).await?;
                Ok("created")
            }
            Err(e) => Err(e),
            Ok(stored) => match for_apply(&p.obj, &stored) {
                None => Ok("unchanged"),
                Some(obj) => {
                    store.update(obj).await?;
                    Ok("configured")
                }
            },
        },
    }
}

/// A new object carries no store-assigned fields.
fn for_create(desired: &DynamicObject) -> DynamicObject {
    let mut o = desired.clone();
    o.metadata.resource_version = None;
    o.metadata.uid = None;
    o.metadata.creation_timestamp = None;
    o.metadata.generation = None;
    o
}

/// `desired` over `stored` for `replace`: everything as the file says,
/// with the stored identity (uid, creation time) and the file's
/// resourceVersion if it has one (compare-and-swap against what the user
/// read), else the stored one. A status the file leaves out is kept: it
/// belongs to whoever reports it.
pub fn for_replace(desired: &DynamicObject, stored: &DynamicObject) -> DynamicObject {
    let mut o = desired.clone();
    o.metadata.uid = stored.metadata.uid.clone();
    o.metadata.creation_timestamp = stored.metadata.creation_timestamp.clone();
    o.metadata.generation = stored.metadata.generation;
    if o.metadata
        .resource_version
        .as_deref()
        .is_none_or(str::is_empty)
    {
        o.metadata.resource_version = stored.metadata.resource_version.clone();
    }
    if o.data.get("status").is_none()
        && let (Some(status), Some(map)) = (stored.data.get("status"), o.data.as_object_mut())
    {
        map.insert("status".into(), status.clone());
    }
    o
}

/// What `apply` writes over `stored`, or `None` when nothing would change.
/// As [`for_replace`], except that labels and annotations the file does
/// not mention at all are kept (so `tartanctl label` survives a re-apply).
pub fn for_apply(desired: &DynamicObject, stored: &DynamicObject) -> Option<DynamicObject> {
    let mut o = for_replace(desired, stored);
    if o.metadata.labels.is_none() {
        o.metadata.labels = stored.metadata.labels.clone();
    }
    if o.metadata.annotations.is_none() {
        o.metadata.annotations = stored.metadata.annotations.clone();
    }
    (!same_content(&o, stored)).then_some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    fn obj(v: Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    fn stored() -> DynamicObject {
        obj(json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "a", "uid": "u-1", "resourceVersion": "42",
                         "creationTimestamp": "2024-01-01T00:00:00Z",
                         "labels": {"env": "prod"}},
            "spec": {"cidr": "10.0.0.0/16", "blockSize": 26},
            "status": {"allocated": 3}
        }))
    }

    fn file(spec: Value, labels: Option<Value>) -> DynamicObject {
        let mut v = json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": "a"}, "spec": spec
        });
        if let Some(l) = labels {
            v["metadata"]["labels"] = l;
        }
        obj(v)
    }

    #[test]
    fn same_content_is_unchanged() {
        let f = file(json!({"cidr": "10.0.0.0/16", "blockSize": 26}), None);
        assert!(for_apply(&f, &stored()).is_none());
        let f = file(
            json!({"cidr": "10.0.0.0/16", "blockSize": 26}),
            Some(json!({"env": "prod"})),
        );
        assert!(for_apply(&f, &stored()).is_none());
    }

    #[test]
    fn a_changed_spec_is_written_with_stored_identity_and_version() {
        let f = file(json!({"cidr": "10.0.0.0/16", "blockSize": 24}), None);
        let o = for_apply(&f, &stored()).expect("a change");
        assert_eq!(o.data["spec"]["blockSize"], 24);
        assert_eq!(o.data["status"]["allocated"], 3, "status kept");
        assert_eq!(o.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(o.metadata.uid.as_deref(), Some("u-1"));
        assert!(o.metadata.creation_timestamp.is_some());
        assert_eq!(o.metadata.labels, stored().metadata.labels, "labels kept");
    }

    #[test]
    fn labels_given_replace_the_stored_ones() {
        let f = file(
            json!({"cidr": "10.0.0.0/16", "blockSize": 26}),
            Some(json!({})),
        );
        let o = for_apply(&f, &stored()).expect("labels removed");
        assert_eq!(o.metadata.labels, Some(BTreeMap::new()));
    }

    #[test]
    fn a_resource_version_in_the_file_is_kept_for_compare_and_swap() {
        let mut f = file(json!({"cidr": "10.1.0.0/16"}), None);
        f.metadata.resource_version = Some("7".into());
        assert_eq!(
            for_apply(&f, &stored())
                .unwrap()
                .metadata
                .resource_version
                .as_deref(),
            Some("7")
        );
        assert_eq!(
            for_replace(&f, &stored())
                .metadata
                .resource_version
                .as_deref(),
            Some("7")
        );
    }

    #[test]
    fn created_objects_carry_no_store_fields() {
        let c = for_create(&stored());
        assert!(c.metadata.uid.is_none() && c.metadata.resource_version.is_none());
        assert!(c.metadata.creation_timestamp.is_none());
    }
}
