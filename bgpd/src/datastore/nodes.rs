//! What bgpd uses of a Node, kept instead of the whole object: its name,
//! its labels (peer and node selectors match them) and its Tartan
//! annotations (BGP addresses, AS number, route reflector cluster ID).
//! Kubelets write their Node every few seconds (status conditions,
//! heartbeat times, resourceVersion); such a write leaves this view as it
//! was, so comparing views decides cheaply that no rebuild is due.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tartan_api::resources::NodeBgp;
use tartan_api::validate::Invalid;

/// The annotations bgpd may read all carry this prefix.
const TARTAN_PREFIX: &str = "tartan.dev/";

/// What bgpd keeps of a Node. Not a `Node`: that type is 1.5 KB before
/// anything is in it, and bgpd keeps one per Node of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The annotations under `tartan.dev/`.
    pub annotations: BTreeMap<String, String>,
}

impl NodeView {
    /// The node's BGP settings; an error lists every bad annotation.
    pub fn bgp(&self) -> Result<NodeBgp, Invalid> {
        NodeBgp::from_annotations(&self.name, &self.annotations)
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
    NodeView {
        name: meta.name.unwrap_or_default(),
        labels: meta.labels.unwrap_or_default(),
        annotations: meta
            .annotations
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(TARTAN_PREFIX))
            .collect(),
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
}
