//! What every backend must do, as checks its tests share: the round trip
//! of every kind with compare-and-swap, and a watch consumer that verifies
//! each event against what it already holds. Test support: these panic on
//! the first thing that is wrong, with a message saying what.

use std::collections::BTreeMap;

use super::watch::WatchEvent;
use super::{Datastore, DynamicObject, ObjectKey, StoreError};
use crate::examples::{example, modified};
use crate::kind::Kind;

/// An object's place within one kind: (namespace, name).
pub type Place = (Option<String>, String);

/// What a consumer believes is stored: each object's resourceVersion.
pub type View = BTreeMap<Place, u64>;

pub fn place(o: &DynamicObject) -> Place {
    (
        o.metadata.namespace.clone(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// The object's resourceVersion as a number (every backend here counts).
pub fn version(o: &DynamicObject) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("{:?} has no numeric resourceVersion", place(o)))
}

/// A watch consumer that checks every event against what it already has:
/// no Added twice, no Modified going backwards or repeating, no Deleted of
/// something it does not have.
#[derive(Default)]
pub struct ViewChecker {
    pub view: View,
    pub events: u64,
    pub synced: u32,
}

impl ViewChecker {
    pub fn apply(&mut self, e: WatchEvent) {
        self.events += 1;
        match e {
            WatchEvent::Added(o) => {
                let prev = self.view.insert(place(&o), version(&o));
                assert!(prev.is_none(), "Added twice: {:?}", place(&o));
            }
            WatchEvent::Modified(o) => {
                let new = version(&o);
                let prev = self.view.insert(place(&o), new);
                let prev = prev.unwrap_or_else(|| panic!("Modified unknown {:?}", place(&o)));
                assert!(new > prev, "Modified {:?}: {prev} -> {new}", place(&o));
            }
            WatchEvent::Deleted(o) => {
                assert!(
                    self.view.remove(&place(&o)).is_some(),
                    "Deleted unknown {:?}",
                    place(&o)
                );
            }
            WatchEvent::Synced { .. } => self.synced += 1,
            WatchEvent::Relisting => panic!("Relisting from a watch that keeps its record"),
        }
    }
}

/// The store's own view of `kind`, and the revision it was read at.
pub async fn store_view(store: &dyn Datastore, kind: Kind) -> (View, u64) {
    let l = store.list(kind, None).await.expect("list");
    let view = l.items.iter().map(|o| (place(o), version(o))).collect();
    let revision = l.revision.parse().expect("numeric list revision");
    (view, revision)
}

/// Every kind through `store`: create (twice: AlreadyExists), get and list
/// (content, apiVersion/kind, uid), update, a stale update and a stale
/// delete (Conflict, nothing changed), delete, and NotFound after. The
/// store must be empty of objects named `round-trip`.
pub async fn round_trip_every_kind(store: &dyn Datastore) {
    for kind in Kind::all() {
        // As the API server would store it: a store that gives the
        // defaults ([`crate::defaults`]) then changes nothing.
        let mut obj = example(kind, "round-trip");
        crate::defaults::apply(&mut obj);
        let created = store
            .create(obj.clone())
            .await
            .unwrap_or_else(|e| panic!("create {kind}: {e}"));
        assert!(created.metadata.uid.is_some(), "{kind}: no uid");
        let key = ObjectKey::of(&created).unwrap();
        match store.create(obj.clone()).await {
            Err(StoreError::AlreadyExists(k)) => assert_eq!(k, key),
            other => panic!("{kind}: second create gave {other:?}"),
        }

        let got = store.get(&key).await.expect("get");
        assert_eq!(got.data, obj.data, "{kind}: content changed on the way");
        assert_eq!(got.types, obj.types, "{kind}: apiVersion/kind");
        assert_eq!(got.metadata.labels, obj.metadata.labels);
        assert_eq!(got.metadata.annotations, obj.metadata.annotations);
        assert_eq!(
            got.metadata.resource_version,
            created.metadata.resource_version
        );
        assert_eq!(got.metadata.uid, created.metadata.uid);
        let listed = store.list(kind, None).await.expect("list");
        assert_eq!(listed.items.len(), 1, "{kind}");
        assert_eq!(
            listed.items[0].types, obj.types,
            "{kind}: list items get apiVersion/kind"
        );
        assert!(listed.revision.parse::<u64>().unwrap() >= version(&created));

        let updated = store.update(modified(&got, 1)).await.expect("update");
        assert!(version(&updated) > version(&got));
        assert_eq!(
            updated.metadata.uid, created.metadata.uid,
            "update kept uid"
        );
        let reread = store.get(&key).await.unwrap();
        assert_eq!(
            reread
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tartan.dev/revision")),
            Some(&"1".to_string())
        );

        // The stale version loses, for update and delete alike.
        match store.update(modified(&got, 2)).await {
            Err(StoreError::Conflict { key: k, expected }) => {
                assert_eq!(k, key);
                assert_eq!(expected, version(&got).to_string());
            }
            other => panic!("{kind}: stale update gave {other:?}"),
        }
        let stale = version(&got).to_string();
        assert!(matches!(
            store.delete(&key, Some(&stale)).await,
            Err(StoreError::Conflict { .. })
        ));
        assert!(store.get(&key).await.is_ok(), "a failed delete deleted");

        let current = version(&updated).to_string();
        store.delete(&key, Some(&current)).await.expect("delete");
        assert!(matches!(
            store.get(&key).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.delete(&key, None).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            store.update(updated.clone()).await,
            Err(StoreError::NotFound(_))
        ));
    }
}

/// A narrowed listing ([`super::Narrow`]) returns exactly the objects
/// with the name prefix and the label, whichever half the backend reads
/// by. The store must be empty of BlockAffinities named `narrow-*`.
pub async fn narrow_listing(store: &dyn Datastore) {
    let put = |name: &str, label: Option<&str>| {
        let mut o = example(Kind::BlockAffinity, name);
        o.metadata.labels = label.map(|v| [("tartan.dev/node".to_string(), v.to_string())].into());
        o
    };
    let objects = [
        put("narrow-a.b1", Some("narrow-a")),
        put("narrow-a.b2", Some("narrow-a")),
        put("narrow-a.b3", None),
        put("narrow-a.x.b1", Some("narrow-a.x")),
        put("narrow-b.b1", Some("narrow-b")),
    ];
    for o in objects {
        store.create(o).await.expect("create");
    }
    let narrow = super::Narrow {
        name_prefix: "narrow-a.",
        label: ("tartan.dev/node", "narrow-a"),
    };
    let got = store
        .list_narrow(Kind::BlockAffinity, None, narrow)
        .await
        .expect("narrowed list");
    let mut names: Vec<String> = got.items.iter().map(|o| place(o).1).collect();
    names.sort();
    assert_eq!(names, ["narrow-a.b1", "narrow-a.b2"]);
    for o in &got.items {
        assert!(o.metadata.resource_version.is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    #[tokio::test]
    async fn the_memory_store_conforms() {
        round_trip_every_kind(&MemoryStore::new()).await;
        narrow_listing(&MemoryStore::new()).await;
    }
}
