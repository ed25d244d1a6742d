//! The errors every backend reports, so callers handle them once.

use thiserror::Error;

use super::ObjectKey;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{0} not found")]
    NotFound(ObjectKey),
    #[error("{0} already exists")]
    AlreadyExists(ObjectKey),
    /// The compare-and-swap failed: someone else wrote the object first.
    #[error(
        "conflict on {key}: it has changed since resourceVersion {expected:?}; read it again and retry"
    )]
    Conflict { key: ObjectKey, expected: String },
    /// The watch revision was compacted away (etcd) or is too old (410 Gone).
    #[error("revision {0} is no longer available; relist")]
    Expired(String),
    /// The object is malformed for storage (no kind, no name, bad JSON).
    #[error("bad object: {0}")]
    BadObject(String),
    /// The object failed validation.
    #[error("{0}")]
    Invalid(String),
    /// The store is unreachable or overloaded; the call may be retried.
    #[error("datastore unavailable: {0}")]
    Unavailable(String),
    /// The store refused the call (permissions, a server error).
    #[error("datastore error: {0}")]
    Backend(String),
}

impl StoreError {
    /// Worth retrying the same call later.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}
