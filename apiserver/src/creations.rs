//! The resourceVersion each object was created at, by uid, so that a
//! watch tells ADDED (the creating write) from MODIFIED (every later one)
//! as the API server does. Objects written into the store directly (not
//! through the stand-in) are not here; watches guess for those.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default, Debug)]
pub struct Creations(Arc<Mutex<HashMap<String, String>>>);

impl Creations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object `uid` was created at `resource_version`.
    pub fn created(&self, uid: &str, resource_version: &str) {
        self.lock()
            .insert(uid.to_string(), resource_version.to_string());
    }

    /// The object `uid` is gone.
    pub fn deleted(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Whether the version `resource_version` of `uid` is its creation;
    /// `None`: not known here.
    pub fn is_creation(&self, uid: &str, resource_version: &str) -> Option<bool> {
        self.lock().get(uid).map(|rv| rv == resource_version)
    }
}
