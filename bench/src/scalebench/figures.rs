//! What one cluster size measured.

use std::time::Duration;

#[derive(Debug, Default)]
pub struct SizeFigures {
    pub nodes: usize,
    /// The filesystem type under etcd's data (`tmpfs`, `ext4`, ...).
    pub etcd_storage: String,
    /// WorkloadEndpoints of the simulated nodes.
    pub workloads: usize,
    /// Objects written before the daemons started.
    pub objects: usize,
    pub populate: Duration,
    /// Daemons started until the kernel held every block's route.
    pub routes_in: Duration,
    /// Daemons started until both used < 2 % of a core.
    pub settled: Duration,
    /// They were still above 2 % after 300 s.
    pub never_quiet: bool,
    /// CPU share of one core over the window, without heartbeats and
    /// with them: [bgpd, felix].
    pub cpu_idle: [f64; 2],
    pub cpu_beats: [f64; 2],
    /// Node updates written per second during the heartbeat window.
    pub beat_rate: f64,
    /// etcd reads (Range calls) per Node update in that window.
    pub beat_reads: f64,
    pub beat_failures: u64,
    /// A reflector's UPDATE written until the route was in the kernel.
    pub convergence: Vec<Duration>,
    /// CNI ADD (and its DEL) on the real node, heartbeats running.
    pub adds: Vec<Duration>,
    /// When each ADD started, from the first ADD's start.
    pub add_starts: Vec<Duration>,
    pub dels: Vec<Duration>,
    /// The datastore's round trips after the ADDs, heartbeats running: a
    /// read and a compare-and-swap write by turns, every 10 ms.
    pub store_reads: Vec<Duration>,
    pub store_writes: Vec<Duration>,
    pub store_failures: u64,
    /// CPU time per ADD and its DEL, seconds: [bgpd, felix, etcd].
    pub add_cpu: [f64; 3],
    /// The whole machine's CPU while the ADDs ran.
    pub add_machine: super::machine::MachineCpu,
    /// VmRSS and VmHWM at the end, KiB: [bgpd, felix].
    pub rss_kib: [u64; 2],
    pub hwm_kib: [u64; 2],
    /// Why this size stopped early, if it did.
    pub error: Option<String>,
}

#[derive(Debug, Default)]
pub struct Figures {
    pub sizes: Vec<SizeFigures>,
}
