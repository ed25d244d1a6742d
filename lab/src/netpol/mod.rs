//! A reusable NetworkPolicy test bed in the style of the upstream
//! Kubernetes netpol e2e suite: a three-node lab cluster with namespaces
//! x, y and z, pods a, b and c in each (label `pod: <name>`) spread over
//! the nodes, TCP and UDP servers on ports 80 and 81 in every pod (named
//! `serve-80-tcp` … in the Pod objects), probes of the whole 9×9 grid in
//! parallel, expected grids, and the objects a case changes (policies,
//! Namespace and Pod labels).
//!
//! A pod reaching its own address stays on its own loopback, never on
//! the host's veth where felix enforces policy: the grids always expect
//! it reachable, as upstream's `AllowLoopback` does.

pub mod cases;
pub mod cluster;
pub mod grid;
pub mod objects;
pub mod probe;
pub mod servers;

pub use cases::Case;
pub use cluster::{NetpolCluster, NetpolPod, POOL_CIDR, enforce_timeout};
pub use grid::Reachability;
pub use objects::{NAMESPACE_NAME_LABEL, global_policy, k8s_policy, network_set, tartan_policy};
pub use probe::{PROBE_TIMEOUT, Protocol, sctp_support};
pub use servers::Servers;

/// The namespaces of the cluster.
pub const NAMESPACES: [&str; 3] = ["x", "y", "z"];
/// The pods of every namespace.
pub const POD_NAMES: [&str; 3] = ["a", "b", "c"];
/// The ports every pod serves (TCP and UDP, SCTP where the kernel has it).
pub const PORTS: [u16; 2] = [80, 81];

/// `x/a`, `x/b` … `z/c`: the grid's order.
pub fn pod_names() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|ns| POD_NAMES.iter().map(move |p| format!("{ns}/{p}")))
        .collect()
}
