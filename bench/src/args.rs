//! The command-line arguments of each benchmark subcommand.

#[derive(clap::Args)]
pub(crate) struct BfdArgs {
    /// Cuts timed against FRR (0: the CPU run alone).
    #[arg(long, default_value_t = 20)]
    pub(crate) cuts: usize,
    /// BFD interval of the cut runs, milliseconds (multiplier 3).
    #[arg(long, default_value_t = 100)]
    pub(crate) cut_interval_ms: u32,
    #[arg(long, default_value_t = 100)]
    pub(crate) sessions: usize,
    /// BFD interval of the CPU run, milliseconds (multiplier 3).
    #[arg(long, default_value_t = 50)]
    pub(crate) cpu_interval_ms: u32,
    #[arg(long, default_value_t = 10)]
    pub(crate) cpu_seconds: u64,
    /// CPU windows of --cpu-seconds each (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub(crate) cpu_runs: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct ServiceApplyArgs {
    /// Services in one file (each with an EndpointSlice).
    #[arg(long, default_value_t = 1000)]
    pub(crate) services: usize,
    /// Objects stored before the measured apply in the full case.
    #[arg(long, default_value_t = 18_000)]
    pub(crate) stored: usize,
    #[arg(long, default_value_t = 5)]
    pub(crate) runs: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct DnsArgs {
    #[arg(long, default_value_t = 10_000)]
    pub(crate) services: usize,
    /// Ready endpoints per Service.
    #[arg(long, default_value_t = 10)]
    pub(crate) endpoints: usize,
    /// External names (answered from cache when measured).
    #[arg(long, default_value_t = 1000)]
    pub(crate) external: usize,
    /// Seconds per dnsperf run.
    #[arg(long, default_value_t = 5)]
    pub(crate) seconds: u64,
    /// Rounds (medians reported).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Queries per second of the paced latency runs.
    #[arg(long, default_value_t = 5000)]
    pub(crate) latency_qps: u32,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct ConntrackArgs {
    /// Endpoints removed at once.
    #[arg(long, default_value_t = 1000)]
    pub(crate) endpoints: usize,
    /// Entries per endpoint.
    #[arg(long, default_value_t = 2)]
    pub(crate) clients: usize,
    /// Unrelated entries in the table.
    #[arg(long, default_value_t = 6000)]
    pub(crate) unrelated: usize,
    /// Runs (median reported).
    #[arg(long, default_value_t = 9)]
    pub(crate) runs: usize,
}

#[derive(clap::Args)]
pub(crate) struct ServicesArgs {
    /// Numbers of Services timed, comma-separated.
    #[arg(long, default_value = "10,1000,10000")]
    pub(crate) sizes: String,
    /// Ready endpoints per Service.
    #[arg(long, default_value_t = 10)]
    pub(crate) endpoints: usize,
    /// Runs (medians reported).
    #[arg(long, default_value_t = 9)]
    pub(crate) runs: usize,
    /// Connections per latency run (0: skip the latency measurement).
    #[arg(long, default_value_t = 2000)]
    pub(crate) connections: usize,
    /// The two tables the latency compares, e.g. `10,10000`.
    #[arg(long, default_value = "10,10000")]
    pub(crate) latency_sizes: String,
    /// Services loaded into a real tartan-felix through etcd for its RSS
    /// (0: skip).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) felix_services: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct PolicyArgs {
    /// Policies in all (Kubernetes, Tartan and global).
    #[arg(long, default_value_t = 2000)]
    pub(crate) policies: usize,
    /// Pods in the cluster.
    #[arg(long, default_value_t = 500)]
    pub(crate) pods: usize,
    /// Namespaces (at most pods / 3).
    #[arg(long, default_value_t = 50)]
    pub(crate) namespaces: usize,
    /// One pod in this many is on the benchmarked node.
    #[arg(long, default_value_t = 10)]
    pub(crate) local_every: usize,
    /// Runs (medians reported).
    #[arg(long, default_value_t = 9)]
    pub(crate) runs: usize,
    /// Connections per latency run (0: skip the latency measurement).
    #[arg(long, default_value_t = 2000)]
    pub(crate) connections: usize,
    /// Seed of the generated cluster.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct ClusterArgs {
    /// Cluster sizes, comma-separated.
    #[arg(long, default_value = "10,20")]
    pub(crate) sizes: String,
    /// New blocks timed per size.
    #[arg(long, default_value_t = 20)]
    pub(crate) blocks: usize,
    /// iperf3 runs per path.
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: usize,
    /// Seconds per iperf3 run.
    #[arg(long, default_value_t = 5)]
    pub(crate) seconds: u64,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct CniArgs {
    /// Sequential ADD+DEL pairs per plugin.
    #[arg(long, default_value_t = 200)]
    pub(crate) sequential: usize,
    /// ADDs started at once.
    #[arg(long, default_value_t = 100)]
    pub(crate) parallel: usize,
    /// Runs of the parallel ADDs (median reported).
    #[arg(long, default_value_t = 5)]
    pub(crate) parallel_runs: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct DatastoreArgs {
    /// Objects to list.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) objects: usize,
    /// Times the list is repeated (median reported).
    #[arg(long, default_value_t = 7)]
    pub(crate) list_runs: usize,
    /// Updates whose delivery through a watch is timed.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) writes: usize,
    /// Milliseconds between timed updates.
    #[arg(long, default_value_t = 5)]
    pub(crate) pace_ms: u64,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct BgpArgs {
    /// Injector peers.
    #[arg(long, default_value_t = 2)]
    pub(crate) peers: u32,
    /// Unique /24s per injector.
    #[arg(long, default_value_t = 1000)]
    pub(crate) prefixes: u32,
    /// Runs per device (median reported).
    #[arg(long, default_value_t = 1)]
    pub(crate) runs: usize,
    /// Devices, comma-separated: tartan, bird, gobgp, frr.
    #[arg(long, default_value = "bird")]
    pub(crate) devices: String,
    /// Per-device run counts, e.g. `gobgp=1,frr=3`.
    #[arg(long, default_value = "")]
    pub(crate) runs_per_device: String,
    /// Prefixes per UPDATE.
    #[arg(long, default_value_t = 1000)]
    pub(crate) per_update: usize,
    /// Seconds to wait for one run.
    #[arg(long, default_value_t = 300)]
    pub(crate) timeout: u64,
    /// Seconds between the sessions coming up and the first UPDATE.
    #[arg(long, default_value_t = 2.0)]
    pub(crate) settle: f64,
    /// Runs of the generator against the pass-through receiver (0: skip).
    #[arg(long, default_value_t = 3)]
    pub(crate) generator_runs: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub(crate) struct ScaleArgs {
    /// Cluster sizes in Nodes, the real node included.
    #[arg(long, default_value = "3,100,1000,5000")]
    pub(crate) nodes: String,
    #[arg(long, default_value_t = 30)]
    pub(crate) pods_per_node: usize,
    /// Seconds between one Node's status posts.
    #[arg(long, default_value_t = 10)]
    pub(crate) heartbeat_seconds: u64,
    /// Seconds of each CPU window.
    #[arg(long, default_value_t = 30)]
    pub(crate) window_seconds: u64,
    /// CNI ADDs timed per size (500: the p99 is the fifth slowest, not
    /// one outlier).
    #[arg(long, default_value_t = 500)]
    pub(crate) adds: usize,
    /// New blocks timed to the kernel per size.
    #[arg(long, default_value_t = 30)]
    pub(crate) new_blocks: usize,
    /// Services in the store (each with an EndpointSlice).
    #[arg(long, default_value_t = 0)]
    pub(crate) services: usize,
    #[arg(long, default_value_t = 10)]
    pub(crate) endpoints: usize,
    /// NetworkPolicies over the real node's pods.
    #[arg(long, default_value_t = 0)]
    pub(crate) policies: usize,
    /// Pods wired on the real node for the whole run.
    #[arg(long, default_value_t = 0)]
    pub(crate) local_pods: usize,
    /// Write the Markdown results here (also printed).
    #[arg(long)]
    pub(crate) out: Option<std::path::PathBuf>,
}
