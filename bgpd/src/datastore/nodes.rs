//! What bgpd uses of a Node, kept instead of the whole object: its name,
//! its labels (peer and node selectors match them) and its Tartan
//! annotations (BGP addresses, AS number, route reflector cluster ID).
//! Kubelets write their Node every few seconds (status conditions,
//! heartbeat times, resourceVersion); such a write leaves this view as it
//! was, so comparing views decides cheaply that no rebuild is due.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotations bgpd may read all carry this prefix.
const TARTAN_PREFIX: &str = "tartan.dev/";

/// The part of `n` bgpd's configuration is built from, as a Node holding
/// nothing else.
#[cfg(test)]
pub(super) fn used(n: Node) -> Node {
    from_metadata(n.metadata)
}

/// The Node bgpd keeps of a Node with `meta`: what it uses is all in the
/// metadata, so a watched Node is never parsed whole (see
/// [`tartan_api::resources::node::metadata_readable`]).
pub(super) fn from_metadata(meta: ObjectMeta) -> Node {
    let mut out = Node::default();
    out.metadata.name = meta.name;
    out.metadata.labels = meta.labels.filter(|l| !l.is_empty());
    let ann: BTreeMap<String, String> = meta
        .annotations
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(TARTAN_PREFIX))
        .collect();
    out.metadata.annotations = (!ann.is_empty()).then_some(ann);
    out
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
