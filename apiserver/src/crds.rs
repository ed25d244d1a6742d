//! CustomResourceDefinitions kept as objects: `kubectl apply -f
//! deploy/crds/` creates, reads, patches, lists and deletes them as on a
//! real cluster, and watches hear of each change (the last
//! [`HISTORY`] changes are kept to resume from). They are records only:
//! what the stand-in serves is its kind table, whatever CRDs are stored.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::response::Response;
use serde_json::{Value, json};

use crate::objects::{Objects, already_exists, bad_request, conflict, not_found};
use crate::resources::{Served, crd_resource};

/// How many changes are kept for watches to resume from.
pub const HISTORY: usize = 1000;

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    revision: u64,
    /// Recent changes: revision, event type, object.
    history: VecDeque<(u64, &'static str, Value)>,
}

impl State {
    fn changed(&mut self, kind: &'static str, obj: &Value) {
        self.history.push_back((self.revision, kind, obj.clone()));
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }
}

/// The stored CustomResourceDefinitions.
#[derive(Clone)]
pub struct Crds(Arc<Mutex<State>>, Arc<tokio::sync::watch::Sender<u64>>);

impl Default for Crds {
    fn default() -> Self {
        Crds(Arc::default(), Arc::new(tokio::sync::watch::channel(0).0))
    }
}

/// What a watch reads: the changes after a revision, or that it is too
/// old (the oldest revision still kept).
pub enum Since {
    Changes(Vec<(u64, &'static str, Value)>),
    Expired(u64),
}

impl Crds {
    /// The changes after revision `from`.
    pub fn since(&self, from: u64) -> Since {
        let s = self.lock();
        match s.history.front() {
            Some((oldest, _, _)) if *oldest > from.saturating_add(1) => Since::Expired(*oldest),
            _ => Since::Changes(
                s.history
                    .iter()
                    .filter(|(r, _, _)| *r > from)
                    .cloned()
                    .collect(),
            ),
        }
    }

    /// Woken at every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.1.subscribe()
    }

    fn notify(&self, revision: u64) {
        self.1.send_replace(revision);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every CRD, by name, and the revision they were read at.
    pub fn list(&self) -> (Vec<Value>, String) {
        let s = self.lock();
        (
            s.objects.values().cloned().collect(),
            s.revision.to_string(),
        )
    }

    /// The CRD `name`.
    pub fn get(&self, name: &str) -> Option<Value> {
        self.lock().objects.get(name).cloned()
    }

    /// Delete `name` (with the resourceVersion a precondition asks for);
    /// the deleted object.
    pub fn delete(&self, served: &Served, name: &str, rv: Option<&str>) -> Result<Value, Response> {
        let mut s = self.lock();
        let Some(current) = s.objects.get(name) else {
            return Err(not_found(served, name));
        };
        if let Some(rv) = rv
            && current
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                != Some(rv)
        {
            return Err(conflict(served, name));
        }
        s.revision += 1;
        let gone = s.objects.remove(name).unwrap_or(Value::Null);
        s.changed("DELETED", &gone);
        let rev = s.revision;
        drop(s);
        self.notify(rev);
        Ok(gone)
    }
}

/// The CRDs as a resource's objects.
pub struct CrdObjects {
    pub crds: Crds,
    pub served: Served,
}

impl CrdObjects {
    pub fn new(crds: &Crds) -> Self {
        CrdObjects {
            crds: crds.clone(),
            served: crd_resource(),
        }
    }
}

fn name_of(obj: &Value) -> Result<String, Response> {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            bad_request("metadata.name: Required value: name or generateName is required")
        })
}

impl Objects for CrdObjects {
    fn served(&self) -> &Served {
        &self.served
    }

    fn namespace(&self) -> Option<&str> {
        None
    }

    async fn get(&self, name: &str) -> Result<Option<Value>, Response> {
        Ok(self.crds.lock().objects.get(name).cloned())
    }

    async fn create(&self, mut obj: Value) -> Result<Value, Response> {
        let name = name_of(&obj)?;
        let mut s = self.crds.lock();
        if s.objects.contains_key(&name) {
            return Err(already_exists(&self.served, &name));
        }
        s.revision += 1;
        let rev = s.revision.to_string();
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), rev.into());
            m.insert("uid".into(), format!("crd-{}", uuid::Uuid::new_v4()).into());
        }
        // Established at once: there is nothing to wait for.
        obj["status"] = json!({
            "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or_default(),
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                            "message": "the initial names have been accepted"}],
            "storedVersions": ["v1"],
        });
        s.objects.insert(name, obj.clone());
        s.changed("ADDED", &obj);
        let rev = s.revision;
        drop(s);
        self.crds.notify(rev);
        Ok(obj)
    }

    async fn update(&self, mut obj: Value) -> Result<Value, Response> {
        let name = name_of(&obj)?;
        let mut s = self.crds.lock();
        let Some(current) = s.objects.get(&name) else {
            return Err(not_found(&self.served, &name));
        };
        let want = obj.pointer("/metadata/resourceVersion").cloned();
        if want != current.pointer("/metadata/resourceVersion").cloned() {
            return Err(conflict(&self.served, &name));
        }
        let kept = [
            ("uid", current.pointer("/metadata/uid").cloned()),
            ("status", current.get("status").cloned()),
        ];
        s.revision += 1;
        let rev = s.revision.to_string();
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), rev.into());
            if let Some(uid) = kept[0].1.clone() {
                m.insert("uid".into(), uid);
            }
        }
        if let Some(st) = kept[1].1.clone() {
            obj["status"] = st;
        }
        s.objects.insert(name, obj.clone());
        s.changed("MODIFIED", &obj);
        let rev = s.revision;
        drop(s);
        self.crds.notify(rev);
        Ok(obj)
    }
}
