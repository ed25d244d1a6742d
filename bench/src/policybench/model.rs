//! The generated cluster's vocabulary (apps, teams, environments), its
//! seeded random numbers, and what it holds: namespaces, pods, and felix's
//! view of both with the policies.

use std::net::Ipv4Addr;

use tartan_felix::calc::policy::Converted;
use tartan_felix::calc::state::{Labels, State};

/// splitmix64: small, deterministic, good enough to shape a cluster.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub(super) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(super) fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// (app, tier, http port) of ordinary workloads.
pub(super) const APPS: [(&str, &str, u16); 10] = [
    ("web", "frontend", 80),
    ("orders", "backend", 8080),
    ("worker", "batch", 8080),
    ("cache", "data", 6379),
    ("db", "data", 5432),
    ("auth", "backend", 8080),
    ("search", "backend", 9200),
    ("cart", "backend", 8080),
    ("billing", "backend", 8080),
    ("notify", "backend", 8080),
];
pub(super) const TEAMS: [&str; 10] = [
    "payments", "search", "catalog", "checkout", "identity", "media", "ads", "ml", "data", "infra",
];
pub(super) const ENVS: [&str; 3] = ["prod", "staging", "dev"];
/// The benchmark's own namespace, with the measured client and server.
pub const BENCH_NS: &str = "bench";
pub(super) const SERVER_PORT: u16 = 8080;

pub(super) struct Ns {
    pub(super) name: String,
    pub(super) labels: Labels,
    pub(super) apps: Vec<String>,
}

/// One pod as generated.
#[derive(Clone)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub addr: Ipv4Addr,
    /// The host end of its veth when it is on the benchmarked node.
    pub interface: Option<String>,
}

/// What was generated, in felix's state, and the changes to time.
pub struct Synthetic {
    pub state: State,
    pub node: String,
    pub namespaces: usize,
    pub pods: usize,
    pub local_pods: usize,
    pub kube: usize,
    pub tartan: usize,
    pub global: usize,
    pub client: PodInfo,
    pub server: PodInfo,
    /// The Kubernetes policy that changes: key, and its two versions.
    pub change_key: String,
    pub change: [Converted; 2],
    /// The pod relabelled: `namespace/name`, and its two label sets.
    pub relabel_key: String,
    pub relabel: [Labels; 2],
    /// The last bench policy, and a copy without its final rule.
    pub last_bench_key: String,
    pub last_bench_cut: Converted,
}
