//! What the policy benchmark measures: timed steps, the ruleset's size, the
//! measured connection's path, and all the figures of a run.

use std::time::Duration;

/// One timed change: felix's compile (pure), the driver's apply (render,
/// serialise, nft), and the render alone (measured apart, pure).
#[derive(Debug, Clone, Copy, Default)]
pub struct Step {
    pub compile: Duration,
    pub apply: Duration,
    pub render: Duration,
    /// The write went through the `nft` program (a command felix does
    /// not encode over netlink).
    pub via_nft: bool,
    /// Commands in the batch (objects added, deleted, flushed).
    pub commands: usize,
}

impl Step {
    pub fn total(&self) -> Duration {
        self.compile + self.apply
    }
    /// What the driver spent outside rendering: serialising and nft.
    pub fn nft(&self) -> Duration {
        self.apply.saturating_sub(self.render)
    }
}

#[derive(Debug, Default, Clone)]
pub struct Size {
    pub chains: usize,
    pub rules: usize,
    pub sets: usize,
    pub set_elements: usize,
    pub map_elements: usize,
    pub full_json_bytes: usize,
    pub profiles: usize,
    /// Interval sets standing for runs of rules.
    pub run_sets: usize,
}

/// The receiver's ingress path in the ruleset.
#[derive(Debug, Default, Clone)]
pub struct Path {
    pub profile: String,
    /// Rules of the server's ingress profile, and of them set lookups
    /// (runs, and guards written in the profile itself).
    pub profile_rules: usize,
    pub lookups: usize,
    /// The stretches behind guards: how many, their guard lookups, and
    /// the rules inside them.
    pub stretches: usize,
    pub guard_lookups: usize,
    pub stretch_rules: usize,
    /// Rules of the profile's Pass chain, and of them set lookups.
    pub pass_rules: usize,
    pub pass_lookups: usize,
    /// Rules of the client's egress profile.
    pub client_egress_rules: usize,
}

#[derive(Debug, Default)]
pub struct Figures {
    pub full: Vec<Step>,
    pub change: Vec<Step>,
    pub relabel: Vec<Step>,
    pub check: Vec<Duration>,
    pub size: Size,
    pub nft_peak_rss_kib: i64,
    pub path: Path,
    /// Per run: median connect + first byte, microseconds.
    pub latency_policy: Vec<f64>,
    pub latency_empty: Vec<f64>,
    /// The second server (dispatched to `open`), connections interleaved
    /// with the first: with the ruleset, and with the empty table.
    pub latency_policy_open: Vec<f64>,
    pub latency_empty_open: Vec<f64>,
    /// Writes that swapped the ruleset between latency runs.
    pub swaps: Vec<Duration>,
    pub enforced: String,
}
