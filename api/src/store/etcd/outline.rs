//! Outlines: beside each object of a kind in [`super::OUTLINED_KINDS`]
//! (Nodes), a second key ([`keys::outline_key`]) holding what a reader of
//! metadata reads of it: its type and metadata whole, its other fields as
//! their shape ([`shape::metadata_from_slice`]). Each write of the object
//! writes the outline in the same transaction, and only when it changed.
//!
//! A kubelet rewrites its Node's status every few seconds (500 puts a
//! second in a 5,000-node cluster); felix and bgpd read only the Node's
//! metadata, so they watch the outlines instead (a metadata-only watch,
//! [`crate::store::WatchScope::metadata_only`]), and a heartbeat reaches
//! neither: etcd sends them nothing for it. Listings still read the
//! objects' own keys, so a reader starts from every object, outline or
//! not.
//!
//! An object written before outlines existed (or put into etcd by hand,
//! past the store) has none, or a stale one, until the store next writes
//! it: its changes reach a metadata-only watch only with that write, or
//! at the watch's next listing.

use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use super::keys;
use crate::kind::Kind;
use crate::store::{Result, StoreError, shape};

/// The outline of one object: its key and value.
pub(super) struct Outline {
    key: String,
    value: Vec<u8>,
}

/// Whether objects of `kind` have outlines.
pub(super) fn kept_for(kind: Kind) -> bool {
    super::OUTLINED_KINDS.contains(&kind)
}

/// The outline of the object stored at `key` as `value` (the stored JSON),
/// if its kind has outlines.
pub(super) fn of(kind: Kind, key: &str, value: &[u8]) -> Result<Option<Outline>> {
    if !kept_for(kind) {
        return Ok(None);
    }
    let outline = shape::metadata_from_slice(value)
        .and_then(shape::to_value)
        .and_then(|v| serde_json::to_vec(&v))
        .map_err(|e| StoreError::BadObject(format!("{key}: no outline: {e}")))?;
    Ok(Some(Outline {
        key: keys::outline_key(key),
        value: outline,
    }))
}

impl Outline {
    /// Put the outline.
    pub(super) fn put(&self) -> TxnOp {
        TxnOp::put(self.key.clone(), self.value.clone(), None)
    }

    /// Put the outline unless the one stored is the same (a nested
    /// transaction), so that a write that leaves it as it was reaches no
    /// watcher of outlines. One that is missing is put.
    pub(super) fn put_if_changed(&self) -> TxnOp {
        TxnOp::txn(
            Txn::new()
                .when([Compare::value(
                    self.key.clone(),
                    CompareOp::Equal,
                    self.value.clone(),
                )])
                .or_else([self.put()]),
        )
    }
}

/// Delete the outline of the object at `key`, if its kind has outlines.
pub(super) fn delete(kind: Kind, key: &str) -> Option<TxnOp> {
    kept_for(kind).then(|| TxnOp::delete(keys::outline_key(key), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outline_is_what_a_metadata_reader_reads_and_ignores_status() {
        let node = br#"{"apiVersion":"v1","kind":"Node",
            "metadata":{"name":"n1","labels":{"a":"b"},"annotations":{"x":"y"}},
            "spec":{"podCIDR":"10.0.0.0/24"},"mode":"x",
            "status":{"conditions":[{"type":"Ready","lastHeartbeatTime":"2026-01-01T00:00:01Z"}]}}"#;
        let o = of(Kind::Node, "/tartan/k8s/nodes/n1", node)
            .unwrap()
            .unwrap();
        assert_eq!(o.key, "/tartan/outlines/k8s/nodes/n1");
        let read = shape::metadata_from_slice(&o.value).unwrap();
        assert_eq!(read, shape::metadata_from_slice(node).unwrap());
        assert_eq!(read.data["status"], serde_json::json!({}));
        assert_eq!(read.data["mode"], "x");
        // A heartbeat: the same outline, byte for byte.
        let beat = String::from_utf8_lossy(node).replace("00:00:01", "00:00:11");
        let o2 = of(Kind::Node, "/tartan/k8s/nodes/n1", beat.as_bytes())
            .unwrap()
            .unwrap();
        assert_eq!(o.value, o2.value);
        // A label changed: another outline.
        let relabel = String::from_utf8_lossy(node).replace(r#""b""#, r#""c""#);
        let o3 = of(Kind::Node, "/tartan/k8s/nodes/n1", relabel.as_bytes())
            .unwrap()
            .unwrap();
        assert_ne!(o.value, o3.value);
    }

    #[test]
    fn only_outlined_kinds_have_outlines() {
        let pool = br#"{"apiVersion":"tartan.dev/v1","kind":"IPPool","metadata":{"name":"p"}}"#;
        assert!(
            of(Kind::IpPool, "/tartan/ippools/p", pool)
                .unwrap()
                .is_none()
        );
        assert!(delete(Kind::IpPool, "/tartan/ippools/p").is_none());
        assert!(delete(Kind::Node, "/tartan/k8s/nodes/n1").is_some());
    }
}
