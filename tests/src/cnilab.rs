//! In-process labs (`tartan_lab::cnilab::CniLab`) as the CNI and cluster
//! tests set them up: a lab with one IP pool, a runtime with settings of
//! its own, and every node's daemons started with a pod on each node.

use serde_json::Value;
use tartan_lab::cni::{Call, Runtime};
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::Netns;
use tartan_lab::{Daemon, TempDir};

/// A lab of `nodes` node namespaces with the IP pool `default` of `cidr`
/// (default block size).
#[track_caller]
pub fn cni_lab(nodes: usize, cidr: &str) -> CniLab {
    cni_lab_with_pool(nodes, "default", cidr, None)
}

/// A lab of `nodes` node namespaces with the IP pool `pool` of `cidr`,
/// its blocks of `block_size` (the default when `None`).
#[track_caller]
pub fn cni_lab_with_pool(nodes: usize, pool: &str, cidr: &str, block_size: Option<u8>) -> CniLab {
    let lab = CniLab::new(nodes).expect("the lab");
    lab.add_pool(pool, cidr, block_size).expect("the IP pool");
    lab
}

/// A runtime on node `i` running `tartan` alone at CNI 1.1.0, its entry
/// the lab's with the keys of `plugin` set and `ipam`'s added to its
/// `ipam` section.
pub fn runtime_with(lab: &CniLab, i: usize, plugin: Value, ipam: Value) -> Runtime {
    let mut entry = lab.tartan_entry(i, ipam);
    if let (Some(e), Some(set)) = (entry.as_object_mut(), plugin.as_object()) {
        e.extend(set.clone());
    }
    lab.runtime(i, CniLab::conflist("1.1.0", vec![entry]))
}

/// A pod made by the plugin: its namespace, the CNI call, the plugin's
/// reply.
pub type Pod = (Netns, Call, String);

/// bgpd and felix on each of the first `nodes` nodes (their files in a
/// directory named from `prefix`), then a pod `p<i>` on each. Bind the
/// three in this order (`let (dir, daemons, pods) = …`): the pods go
/// first, the directory last.
#[track_caller]
pub fn daemons_and_a_pod_each(
    lab: &CniLab,
    nodes: usize,
    prefix: &str,
) -> (TempDir, Vec<(Daemon, Daemon)>, Vec<Pod>) {
    let dir = TempDir::new(prefix).expect("a directory for the daemons");
    let daemons = (0..nodes)
        .map(|i| lab.start_node_daemons(i, &dir).expect("bgpd and felix"))
        .collect();
    let pods = (0..nodes)
        .map(|i| lab.add_pod_on(i, &format!("p{i}")).expect("a pod"))
        .collect();
    (dir, daemons, pods)
}
