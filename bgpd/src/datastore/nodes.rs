//! What bgpd uses of a Node, kept instead of the whole object: its name,
//! its labels (peer and node selectors match them) and the BGP settings
//! its Tartan annotations give (addresses, AS number, route reflector
//! cluster ID), read once when the Node arrives.
//! Kubelets write their Node every few seconds (status conditions,
//! heartbeat times, resourceVersion); such a write leaves this view as it
//! was, so comparing views decides cheaply that no rebuild is due.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tartan_api::resources::NodeBgp;
use tartan_api::validate::Invalid;

/// What bgpd keeps of a Node: its name, labels, and BGP settings read
/// from its annotations when it arrives. Not a `Node` (1.5 KB before
/// anything is in it) nor maps (a B-tree leaf is half a KB even for two
/// labels): bgpd keeps one per Node of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    /// Sorted by key.
    labels: Box<[(Box<str>, Box<str>)]>,
    /// Its `tartan.dev/` annotations read as BGP settings; an error lists
    /// every bad one.
    pub bgp: Result<NodeBgp, Invalid>,
}

impl NodeView {
    /// Its labels, as selectors match them.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

impl From<Node> for NodeView {
    fn from(n: Node) -> NodeView {
        from_metadata(n.metadata)
    }
}

/// What bgpd keeps of a Node with `meta`: what it uses is all in the
/// metadata, so a watched Node is never parsed whole (see
/// [`tartan_api::resources::node::metadata_readable`]).
pub(super) fn from_metadata(meta: ObjectMeta) -> NodeView {
    let name = meta.name.unwrap_or_default();
    let empty = BTreeMap::new();
    let bgp = NodeBgp::from_annotations(&name, meta.annotations.as_ref().unwrap_or(&empty));
    NodeView {
        // A BTreeMap iterates in key order.
        labels: meta
            .labels
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
            .collect(),
        name,
        bgp,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(ip: &str, beat: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.resource_version = Some(beat.into());
        n.metadata.labels = Some(BTreeMap::from([("rack".into(), "a".into())]));
        n.metadata.annotations = Some(BTreeMap::from([
            ("tartan.dev/bgp-ipv4-address".into(), format!("{ip}/24")),
            ("node.alpha.kubernetes.io/ttl".into(), beat.into()),
        ]));
        n.spec = Some(NodeSpec {
            pod_cidr: Some("10.244.0.0/24".into()),
            ..Default::default()
        });
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                message: Some(format!("kubelet is posting ready status {beat}")),
                ..Default::default()
            }]),
            ..Default::default()
        });
        n
    }

    fn used(n: Node) -> NodeView {
        n.into()
    }

    #[test]
    fn a_heartbeat_leaves_the_view_as_it_was_and_an_address_change_does_not() {
        assert_eq!(used(node("10.0.0.1", "1")), used(node("10.0.0.1", "2")));
        assert_ne!(used(node("10.0.0.1", "1")), used(node("10.0.0.2", "1")));
        let mut relabelled = node("10.0.0.1", "1");
        relabelled
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("rack".into(), "b".into());
        assert_ne!(used(node("10.0.0.1", "1")), used(relabelled));
    }

    #[test]
    fn the_view_reads_labels_and_bgp_settings_as_the_node_has_them() {
        let mut n = node("10.0.0.1", "1");
        n.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("a-first".into(), "x".into());
        let labels = n.metadata.labels.clone().unwrap();
        let v = used(n.clone());
        assert_eq!(v.labels(), labels);
        assert_eq!(v.bgp, NodeBgp::from_node(&n));
        assert_eq!(
            v.bgp.unwrap().ipv4_address.unwrap().to_string(),
            "10.0.0.1/24"
        );
        // A bad annotation is kept as the error, and is a change.
        n.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert("tartan.dev/bgp-ipv4-address".into(), "nonsense".into());
        let bad = used(n);
        assert!(bad.bgp.is_err());
        assert_ne!(bad, used(node("10.0.0.1", "1")));
    }
}
