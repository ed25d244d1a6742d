//! Tells the cluster that this node's pod network is up: the Node's
//! condition `NetworkUnavailable` set `False` (reason `TartanIsUp`) once
//! felix has written the node's routes and policy. A kubelet on some
//! clouds registers its Node with the condition `True`, and the Node
//! lifecycle controller then taints it `node.kubernetes.io/network-unavailable`,
//! so that no pod is scheduled there until the network plugin says
//! otherwise. Written after felix's first pass that wrote the routes and
//! policy (a Node that already says `False` is not written), through the
//! `status` subresource, and again on a Node registered anew (another
//! UID) while felix runs.

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tartan_api::Kind;
use tartan_api::store::{Datastore, ObjectKey, StoreError};

pub(super) const CONDITION: &str = "NetworkUnavailable";
pub(super) const REASON: &str = "TartanIsUp";
const MESSAGE: &str = "Tartan is running on this node";

/// Sets the condition among `conditions` as of `now`; false when it
/// already said `False` for Tartan (nothing to write).
pub(super) fn set_network_available(conditions: &mut Vec<NodeCondition>, now: Timestamp) -> bool {
    let fresh = NodeCondition {
        type_: CONDITION.to_string(),
        status: "False".to_string(),
        reason: Some(REASON.to_string()),
        message: Some(MESSAGE.to_string()),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    };
    match conditions.iter_mut().find(|c| c.type_ == CONDITION) {
        Some(c) if c.status == "False" && c.reason.as_deref() == Some(REASON) => false,
        Some(c) => {
            // Another writer's False keeps its transition time.
            let since = if c.status == "False" {
                c.last_transition_time.clone()
            } else {
                Some(Time(now))
            };
            *c = NodeCondition {
                last_transition_time: since,
                ..fresh
            };
            true
        }
        None => {
            conditions.push(fresh);
            true
        }
    }
}

/// The same on a Node as stored (its JSON, less `metadata`): only
/// `status.conditions` is read and rewritten, so that status fields this
/// build's Node type does not know (a newer API server's) go back as
/// they came.
pub(super) fn set_in_node(data: &mut Value, now: Timestamp) -> Result<bool, serde_json::Error> {
    let Some(node) = data.as_object_mut() else {
        return Ok(false);
    };
    let status = node
        .entry("status")
        .or_insert_with(|| Value::Object(Default::default()));
    if !status.is_object() {
        *status = Value::Object(Default::default());
    }
    let slot = status
        .as_object_mut()
        .expect("made an object above")
        .entry("conditions")
        .or_insert(Value::Null);
    let mut conditions: Vec<NodeCondition> = match &*slot {
        Value::Null => vec![],
        v => serde_json::from_value(v.clone())?,
    };
    if !set_network_available(&mut conditions, now) {
        return Ok(false);
    }
    *slot = serde_json::to_value(conditions)?;
    Ok(true)
}

/// Reads `node` and writes the condition where it is missing or not
/// `False`; a write that lost a race with another writer of the Node
/// (the kubelet's heartbeats) is tried again on the Node as it is now.
/// Returns whether a write was made, and the Node's UID.
pub(super) async fn mark_network_available(
    store: &dyn Datastore,
    node: &str,
) -> Result<(bool, Option<String>), StoreError> {
    let key = ObjectKey::new(Kind::Node, None, node);
    let mut tries = 0;
    loop {
        let mut obj = store.get(&key).await?;
        let uid = obj.metadata.uid.clone();
        let changed = set_in_node(&mut obj.data, Timestamp::now())
            .map_err(|e| StoreError::Invalid(format!("Node {node}: status.conditions: {e}")))?;
        if !changed {
            return Ok((false, uid));
        }
        match store.update_status(obj).await {
            Ok(_) => return Ok((true, uid)),
            Err(StoreError::Conflict { .. }) if tries < 4 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{Node, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use tartan_api::store::memory::MemoryStore;
    use tartan_api::store::typed::{TypedStore, to_dynamic};

    /// [`set_in_node`] on a typed Node, through its JSON.
    fn set(n: &mut Node, now: Timestamp) -> bool {
        let mut v = serde_json::to_value(&*n).unwrap();
        let changed = set_in_node(&mut v, now).unwrap();
        *n = serde_json::from_value(v).unwrap();
        changed
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn condition(n: &Node) -> Vec<&NodeCondition> {
        let cs = n.status.as_ref().and_then(|s| s.conditions.as_ref());
        cs.map(|c| c.iter().filter(|c| c.type_ == CONDITION).collect())
            .unwrap_or_default()
    }

    fn node_with(cond: Option<NodeCondition>) -> Node {
        let ready = NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        };
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                conditions: Some([Some(ready), cond].into_iter().flatten().collect()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_the_cloud_registered_unavailable_is_made_available() {
        let mut n = node_with(Some(NodeCondition {
            type_: CONDITION.into(),
            status: "True".into(),
            reason: Some("NoRouteCreated".into()),
            last_transition_time: Some(Time(at(0))),
            ..Default::default()
        }));
        assert!(set(&mut n, at(5)));
        let c = condition(&n);
        assert_eq!(c.len(), 1, "one condition of the type");
        assert_eq!(c[0].status, "False");
        assert_eq!(c[0].reason.as_deref(), Some(REASON));
        assert_eq!(c[0].last_transition_time, Some(Time(at(5))));
        // The kubelet's own conditions are left alone.
        let all = n.status.as_ref().unwrap().conditions.as_ref().unwrap();
        assert!(all.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    }

    #[test]
    fn a_node_without_the_condition_gets_it_and_then_nothing_changes() {
        let mut n = node_with(None);
        assert!(set(&mut n, at(1)));
        assert_eq!(condition(&n)[0].status, "False");
        let before = n.clone();
        assert!(!set(&mut n, at(9)), "already False for Tartan");
        assert_eq!(n, before);
    }

    #[test]
    fn another_plugins_false_becomes_tartans_keeping_its_transition_time() {
        let mut n = node_with(Some(NodeCondition {
            type_: CONDITION.into(),
            status: "False".into(),
            reason: Some("RouteCreated".into()),
            last_transition_time: Some(Time(at(0))),
            ..Default::default()
        }));
        assert!(set(&mut n, at(7)));
        let c = condition(&n);
        assert_eq!(c[0].reason.as_deref(), Some(REASON));
        assert_eq!(c[0].last_transition_time, Some(Time(at(0))));
        assert_eq!(c[0].last_heartbeat_time, Some(Time(at(7))));
    }

    #[tokio::test]
    async fn the_store_is_written_once_through_the_status() {
        let store: Arc<dyn Datastore> = Arc::new(MemoryStore::new());
        store
            .create(to_dynamic(&node_with(None)).unwrap())
            .await
            .unwrap();
        assert!(
            mark_network_available(store.as_ref(), "n1")
                .await
                .unwrap()
                .0
        );
        let n: Node = store.get_typed(None, "n1").await.unwrap();
        assert_eq!(condition(&n)[0].status, "False");
        let rv = n.metadata.resource_version.clone();
        assert!(
            !mark_network_available(store.as_ref(), "n1")
                .await
                .unwrap()
                .0
        );
        let again: Node = store.get_typed(None, "n1").await.unwrap();
        assert_eq!(again.metadata.resource_version, rv, "no second write");
    }

    #[tokio::test]
    async fn status_fields_this_build_does_not_know_are_written_back_as_they_came() {
        let store: Arc<dyn Datastore> = Arc::new(MemoryStore::new());
        let mut obj = to_dynamic(&node_with(None)).unwrap();
        obj.data["status"]["runtimeHandlers"] = serde_json::json!([{"name": "kata"}]);
        obj.data["status"]["someFutureField"] = serde_json::json!({"x": 1});
        store.create(obj).await.unwrap();
        assert!(
            mark_network_available(store.as_ref(), "n1")
                .await
                .unwrap()
                .0
        );
        let got = store
            .get(&ObjectKey::new(Kind::Node, None, "n1"))
            .await
            .unwrap();
        assert_eq!(
            got.data["status"]["someFutureField"],
            serde_json::json!({"x": 1})
        );
        assert_eq!(
            got.data["status"]["runtimeHandlers"],
            serde_json::json!([{"name": "kata"}])
        );
        let types: Vec<&str> = got.data["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, ["Ready", CONDITION]);
    }

    #[test]
    fn a_node_without_a_status_gets_one() {
        let mut v = serde_json::json!({"spec": {}});
        assert!(set_in_node(&mut v, at(3)).unwrap());
        assert_eq!(v["status"]["conditions"][0]["type"], CONDITION);
        assert_eq!(v["status"]["conditions"][0]["status"], "False");
    }
}
