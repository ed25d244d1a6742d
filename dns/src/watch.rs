//! Following the datastore: Services, EndpointSlices and Namespaces through
//! `tartan_api`'s watch (list, then watch from the list's revision,
//! resumed — relisting if need be — after any break), each event applied
//! to the [`Records`] as it comes. Ready once all three kinds have been
//! listed in full.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tartan_api::Kind;
use tartan_api::store::typed::from_dynamic;
use tartan_api::store::watch::{WatchEvent, watch};
use tartan_api::store::{Datastore, DynamicObject, WatchScope};
use tracing::{error, info};

use crate::metrics::Metrics;
use crate::model::{Key, ServiceRec, SliceRec};
use crate::records::Records;

fn key(o: &DynamicObject) -> Key {
    (
        o.metadata
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// What one event does: `Some(obj)` to set, `None` to remove; `synced` for
/// a full listing.
fn split(ev: WatchEvent) -> (Option<(Key, Option<DynamicObject>)>, bool) {
    match ev {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => (Some((key(&o), Some(o))), false),
        WatchEvent::Deleted(o) => (Some((key(&o), None)), false),
        WatchEvent::Synced { .. } => (None, true),
        // Only from a watch whose consumer keeps the record; these keep
        // theirs.
        WatchEvent::Relisting => (None, false),
    }
}

/// Apply one Service event. An object that does not parse is logged at
/// ERROR (once: the watch reports changes only) and its names withdrawn
/// (an unreadable Service answers nothing stale).
pub fn apply_service(records: &mut Records, k: &Key, o: Option<DynamicObject>) {
    let rec = o.and_then(|o| match from_dynamic::<Service>(o) {
        Ok(s) => ServiceRec::from_service(&s),
        Err(e) => {
            error!(service = %format!("{}/{}", k.0, k.1), error = %e, "unreadable Service; its names are withdrawn");
            None
        }
    });
    records.set_service(k, rec);
}

pub fn apply_slice(records: &mut Records, k: &Key, o: Option<DynamicObject>) {
    let rec = o.and_then(|o| match from_dynamic::<EndpointSlice>(o) {
        Ok(s) => SliceRec::from_slice(&s),
        Err(e) => {
            error!(slice = %format!("{}/{}", k.0, k.1), error = %e, "unreadable EndpointSlice; its names are withdrawn");
            None
        }
    });
    records.set_slice(k, rec);
}

pub fn apply_namespace(records: &mut Records, k: &Key, o: Option<DynamicObject>) {
    let present = o.is_some_and(|o| from_dynamic::<Namespace>(o).is_ok());
    records.set_namespace(&k.1, present);
}

/// Hand the memory the first listing used and freed back to the system:
/// glibc's allocator otherwise keeps it (in every thread's arena) as
/// resident memory the records never use.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it
    // touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Follow the store for ever.
pub async fn follow(
    store: Arc<dyn Datastore>,
    records: Arc<RwLock<Records>>,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
) {
    let all = |kind| {
        watch(
            store.clone(),
            WatchScope {
                kind,
                namespace: None,
                metadata_only: false,
            },
        )
    };
    let mut services = all(Kind::Service);
    let mut slices = all(Kind::EndpointSlice);
    let mut namespaces = all(Kind::Namespace);
    let mut synced = [false; 3];
    type Apply = fn(&mut Records, &Key, Option<DynamicObject>);
    loop {
        let (ev, which, apply): (WatchEvent, usize, Apply) = tokio::select! {
            ev = services.next() => (ev, 0, apply_service),
            ev = slices.next() => (ev, 1, apply_slice),
            ev = namespaces.next() => (ev, 2, apply_namespace),
        };
        let (change, full) = split(ev);
        if let Some((k, o)) = change {
            let mut r = records.write().unwrap_or_else(|e| e.into_inner());
            apply(&mut r, &k, o);
            let (s, e) = r.counts();
            metrics.services.set(i64::try_from(s).unwrap_or(i64::MAX));
            metrics
                .endpoint_slices
                .set(i64::try_from(e).unwrap_or(i64::MAX));
        }
        if full && !synced[which] {
            synced[which] = true;
            if synced.iter().all(|s| *s) {
                let (s, e) = records.read().unwrap_or_else(|e| e.into_inner()).counts();
                info!(
                    services = s,
                    endpoint_slices = e,
                    "first full listing in; ready"
                );
                ready.store(true, Ordering::Release);
                release_freed_memory();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: serde_json::Value) -> DynamicObject {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_unreadable_service_withdraws_its_names() {
        let mut r = Records::new();
        let good = obj(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.80"},
        }));
        let k = key(&good);
        assert_eq!(k, ("default".to_string(), "web".to_string()));
        apply_service(&mut r, &k, Some(good));
        assert!(r.service("default", "web").is_some());
        let bad = obj(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": 7, "ports": "many"},
        }));
        apply_service(&mut r, &k, Some(bad));
        assert!(r.service("default", "web").is_none());
    }

    #[test]
    fn namespaces_come_and_go() {
        let mut r = Records::new();
        let ns =
            obj(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}));
        let k = key(&ns);
        apply_namespace(&mut r, &k, Some(ns));
        assert!(r.namespace_exists("team"));
        apply_namespace(&mut r, &k, None);
        assert!(!r.namespace_exists("team"));
    }
}
