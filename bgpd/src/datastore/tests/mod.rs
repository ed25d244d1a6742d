//! Tests of the datastore mode's building of bgpd's configuration, and
//! the fixtures they share (nodes, blocks, a three-node cluster).

mod bfd;
mod peering;
mod publish;
mod rbac;
mod services;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use tartan_api::resources::IpamBlockSpec;

use super::build::Inputs;

pub(super) fn node(name: &str, ip: &str, rr: Option<&str>, labels: &[(&str, &str)]) -> Node {
    let mut ann = BTreeMap::from([(
        "tartan.dev/bgp-ipv4-address".to_string(),
        format!("{ip}/24"),
    )]);
    if let Some(c) = rr {
        ann.insert("tartan.dev/route-reflector-cluster-id".into(), c.into());
    }
    let mut n = Node::default();
    n.metadata.name = Some(name.into());
    n.metadata.annotations = Some(ann);
    n.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    n
}

pub(super) fn block(cidr: &str, node: &str) -> IpamBlockSpec {
    let mut b = IpamBlockSpec::empty(&cidr.parse().unwrap());
    b.affinity = Some(format!("host:{node}"));
    b
}

/// [`node`] as bgpd keeps it.
pub(super) fn view(
    name: &str,
    ip: &str,
    rr: Option<&str>,
    labels: &[(&str, &str)],
) -> std::sync::Arc<super::NodeView> {
    std::sync::Arc::new(node(name, ip, rr, labels).into())
}

pub(super) fn three() -> Inputs {
    Inputs {
        node: "n1".into(),
        nodes: vec![
            view("n1", "10.0.0.1", None, &[]),
            view("n2", "10.0.0.2", None, &[]),
            view("n3", "10.0.0.3", None, &[]),
        ],
        ..Default::default()
    }
}

pub(super) fn addrs(c: &crate::config::Config) -> Vec<String> {
    c.neighbors.iter().map(|n| n.address.to_string()).collect()
}
