//! `apply`, `create` and `replace`: every document is read and checked
//! first ([`super::load`]); only then are objects written, in file order.

use tartan_api::store::{DynamicObject, StoreError, same_content};

use super::objects::{Check, Prepared};
use super::{Ctx, Progress, describe, load, names, pools, updates};
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
    let items = load(
        &args.files,
        ctx.namespace.as_deref(),
        Check::ValidateUnlessStored,
    )?;
    updates::check_against_stored(ctx.store.as_ref(), mode, &items).await?;
    let refs = items.iter().map(|p| names::reference(&p.key)).collect();
    let mut progress = Progress::new(refs, mode.verb(), args.continue_on_error);
    // Checks across pools, made before anything is written: a file with
    // one refused pool writes nothing (unless going on past errors).
    let refused = if pools::concern(&items) {
        let (stored_pools, stored_lb) = pools::stored(ctx.store.as_ref())
            .await
            .map_err(|e| anyhow::anyhow!(describe(&e)))?;
        pools::problems(mode, &items, &stored_pools, &stored_lb)
    } else {
        Vec::new()
    };
    if !refused.is_empty() && !args.continue_on_error {
        let lines: Vec<String> = refused
            .iter()
            .map(|(i, why)| format!("{}: {why}", names::reference(&items[*i].key)))
            .collect();
        anyhow::bail!("{}\nnothing was written", lines.join("\n"));
    }
    for (i, p) in items.iter().enumerate() {
        let why: Vec<&str> = refused
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, w)| w.as_str())
            .collect();
        if !why.is_empty() {
            if let Some(stop) = progress.failed(i, &why.join("; ")) {
                return Err(stop);
            }
            continue;
        }
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
            let desired = updates::prepared(&p.obj, &stored);
            store.update(for_replace(&desired, &stored)).await?;
            Ok("replaced")
        }
        Mode::Apply => match store.get(&p.key).await {
            Err(StoreError::NotFound(_)) => {
                store.create(for_create(&p.obj)).await?;
                Ok("created")
            }
            Err(e) => Err(e),
            Ok(stored) => match for_apply(&updates::prepared(&p.obj, &stored), &stored) {
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
        // natOutgoing, not cidr or blockSize: those cannot change
        // (`pools::problems`).
        let f = file(
            json!({"cidr": "10.0.0.0/16", "blockSize": 26, "natOutgoing": true}),
            None,
        );
        let o = for_apply(&f, &stored()).expect("a change");
        assert_eq!(o.data["spec"]["natOutgoing"], true);
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

#[cfg(test)]
mod store_tests {
    use std::sync::Arc;

    use tartan_api::Kind;
    use tartan_api::store::memory::MemoryStore;
    use tartan_api::store::{Datastore, ObjectKey};

    use super::*;

    /// The files one test writes, removed when it ends (also when it fails).
    #[derive(Default)]
    struct Files(std::cell::RefCell<Vec<std::path::PathBuf>>);

    impl Files {
        fn of(&self, text: &str) -> FileArgs {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("tartanctl-write-{}-{n}.yaml", std::process::id()));
            std::fs::write(&path, text).unwrap();
            self.0.borrow_mut().push(path.clone());
            FileArgs {
                files: vec![path],
                continue_on_error: false,
            }
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            for p in self.0.borrow().iter() {
                let _ = std::fs::remove_file(p);
            }
        }
    }

    const POOL_A: &str = "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: a}, spec: {cidr: 10.0.0.0/16}}\n";

    #[tokio::test]
    async fn pools_that_overlap_or_change_their_cidr_are_not_written() {
        let files = Files::default();
        let store = Arc::new(MemoryStore::new());
        let ctx = Ctx {
            store: store.clone(),
            namespace: None,
        };
        run(&ctx, Mode::Apply, files.of(POOL_A)).await.unwrap();
        let key = ObjectKey::new(Kind::IpPool, None, "a");
        let before = store.get(&key).await.unwrap();
        // A second pool inside the first, with a good one before it in
        // the file: nothing is written.
        let text = "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: c}, spec: {cidr: 10.9.0.0/16}}\n---\n{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: b}, spec: {cidr: 10.0.64.0/18}}\n";
        let e = run(&ctx, Mode::Apply, files.of(text)).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("IPPool(b) CIDR 10.0.64.0/18 overlaps with IPPool(a) CIDR 10.0.0.0/16"),
            "{e}"
        );
        assert_eq!(store.list(Kind::IpPool, None).await.unwrap().items.len(), 1);
        // blockSize of a stored pool.
        let text = "{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {name: a}, spec: {cidr: 10.0.0.0/16, blockSize: 28}}\n";
        let e = run(&ctx, Mode::Apply, files.of(text)).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("IPPool BlockSize cannot be modified"),
            "{e}"
        );
        let after = store.get(&key).await.unwrap();
        assert_eq!(
            before.metadata.resource_version,
            after.metadata.resource_version
        );
        // A LoadBalancerIPPool inside it.
        let text = "{apiVersion: tartan.dev/v1, kind: LoadBalancerIPPool, metadata: {name: lb}, spec: {cidrs: [10.0.200.0/28]}}\n";
        let e = run(&ctx, Mode::Create, files.of(text)).await.unwrap_err();
        assert!(e.to_string().contains("overlaps with IPPool(a)"), "{e}");
        assert!(
            store
                .list(Kind::LoadBalancerIpPool, None)
                .await
                .unwrap()
                .items
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_service_turned_external_name_loses_the_address_it_left_behind() {
        let files = Files::default();
        let store = Arc::new(MemoryStore::new());
        let ctx = Ctx {
            store: store.clone(),
            namespace: None,
        };
        let web = |spec: &str| {
            format!("{{apiVersion: v1, kind: Service, metadata: {{name: web}}, spec: {spec}}}\n")
        };
        let alias = |ip: &str| {
            web(&format!(
                "{{type: ExternalName, externalName: db.example.com, clusterIP: {ip}, ports: [{{port: 80}}]}}"
            ))
        };
        let text = web("{clusterIP: 10.96.0.10, ports: [{port: 80}]}");
        run(&ctx, Mode::Apply, files.of(&text)).await.unwrap();
        let key = ObjectKey::new(Kind::Service, Some("default"), "web");
        // Another address is the user's own: refused, nothing written.
        let e = run(&ctx, Mode::Apply, files.of(&alias("10.96.0.11")))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("nothing was written"), "{e}");
        assert_eq!(
            store.get(&key).await.unwrap().data["spec"]["clusterIP"],
            "10.96.0.10"
        );
        // The stored one, left in the file: dropped (apply and replace).
        for mode in [Mode::Apply, Mode::Replace] {
            run(&ctx, mode, files.of(&alias("10.96.0.10")))
                .await
                .unwrap();
            let s = store.get(&key).await.unwrap();
            assert_eq!(s.data["spec"]["type"], "ExternalName", "{mode:?}");
            assert!(s.data["spec"].get("clusterIP").is_none(), "{mode:?}: {s:?}");
            // Back to ClusterIP for the next round.
            run(&ctx, Mode::Replace, files.of(&text)).await.unwrap();
        }
        // A create drops nothing.
        let other = alias("10.96.0.12").replace("name: web", "name: other");
        let e = run(&ctx, Mode::Create, files.of(&other)).await.unwrap_err();
        assert!(e.to_string().contains("nothing was written"), "{e}");
    }
}
