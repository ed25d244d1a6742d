//! The policy benchmark's options: the cluster's size and shape, runs and
//! connections.

pub struct PolicyBenchOptions {
    /// Policies in all (Kubernetes, Tartan namespaced and global).
    pub policies: usize,
    pub pods: usize,
    pub namespaces: usize,
    /// One pod in this many is on the benchmarked node.
    pub local_every: usize,
    pub runs: usize,
    /// Connections per latency run (0: no latency measurement).
    pub connections: usize,
    pub seed: u64,
}

impl Default for PolicyBenchOptions {
    fn default() -> Self {
        PolicyBenchOptions {
            policies: 2000,
            pods: 500,
            namespaces: 50,
            local_every: 10,
            runs: 9,
            connections: 2000,
            seed: 1,
        }
    }
}
