//! The Services benchmark's options: sizes, endpoints, runs, connections
//! and the real felix's load.

use std::time::Duration;

pub struct ServiceBenchOptions {
    /// Numbers of Services timed (sync, changes, check).
    pub sizes: Vec<usize>,
    /// Ready endpoints per Service.
    pub endpoints: usize,
    pub runs: usize,
    /// Connections per latency run (0: no latency measurement).
    pub connections: usize,
    /// The two tables the connection latency compares (Services in each).
    pub latency_sizes: [usize; 2],
    /// Services (with their slices) loaded into a real tartan-felix
    /// through etcd for its RSS (0: not measured).
    pub felix_services: usize,
    /// How long felix runs after its table is complete before its RSS is
    /// read (longer than its 5 s periodic check).
    pub felix_settle: Duration,
}

impl Default for ServiceBenchOptions {
    fn default() -> Self {
        ServiceBenchOptions {
            sizes: vec![10, 1_000, 10_000],
            endpoints: 10,
            runs: 9,
            connections: 2000,
            latency_sizes: [10, 10_000],
            felix_services: 10_000,
            felix_settle: Duration::from_secs(6),
        }
    }
}
