//! The scale benchmark's options: the simulated cluster's sizes, its
//! kubelets' heartbeat rate, the extra load on the real node, and how long
//! each figure is measured.

use std::time::Duration;

pub struct ScaleBenchOptions {
    /// Cluster sizes in Nodes (the real node included).
    pub sizes: Vec<usize>,
    /// WorkloadEndpoints per simulated node.
    pub pods_per_node: usize,
    /// How often each Node is updated, as a kubelet posts its status.
    pub heartbeat: Duration,
    /// CPU is read over this window, with heartbeats and without.
    pub window: Duration,
    /// CNI ADDs timed on the real node (each followed by its DEL).
    pub adds: usize,
    /// New blocks announced by a reflector, each timed to the kernel.
    pub new_blocks: usize,
    /// Services (with an EndpointSlice of `endpoints` each) in the store.
    pub services: usize,
    pub endpoints: usize,
    /// NetworkPolicies over the real node's pods.
    pub policies: usize,
    /// Pods wired on the real node by the CNI plugin, kept for the run.
    pub local_pods: usize,
}

impl Default for ScaleBenchOptions {
    fn default() -> Self {
        ScaleBenchOptions {
            sizes: vec![100, 1_000, 5_000],
            pods_per_node: 30,
            heartbeat: Duration::from_secs(10),
            window: Duration::from_secs(30),
            adds: 500,
            new_blocks: 30,
            services: 0,
            endpoints: 10,
            policies: 0,
            local_pods: 0,
        }
    }
}
