//! What the Services benchmark measures: timed writes, the figures at each
//! size, the real felix's memory, and all the figures of a run.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

/// One timed write: the index (feeding it and `update`, pure), the patch
/// or whole table as nft JSON (pure), and nft.
#[derive(Debug, Clone, Copy, Default)]
pub struct Step {
    pub index: Duration,
    pub render: Duration,
    pub nft: Duration,
    pub bytes: usize,
}

impl Step {
    pub fn total(&self) -> Duration {
        self.index + self.render + self.nft
    }
}

#[derive(Debug, Default, Clone)]
pub struct SizeFigures {
    pub services: usize,
    pub elements: usize,
    pub full: Vec<Step>,
    /// A new proxy writing the whole table over the one in the kernel
    /// (felix restarted, or a rebuild after a refused change).
    pub rebuild: Vec<Step>,
    pub replace: Vec<Step>,
    pub add: Vec<Step>,
    pub remove: Vec<Step>,
    /// `sync(true)` with nothing changed, and the pure part of it
    /// (`index.recomputed()` and the comparison).
    pub check: Vec<Duration>,
    pub check_pure: Vec<Duration>,
    /// A no-op transaction (`add table` of the existing table) through
    /// `nft::run`: the cost of one nft process with this table loaded.
    pub floor: Vec<Duration>,
    /// `nft -t -j list ruleset ip`: the same chains, rules and sets as
    /// the check's `nft -t -j list table ip tartan-svc`, without elements.
    pub terse_ruleset: Vec<Duration>,
    /// Peak RSS of the largest `nft` child so far (KiB).
    pub nft_peak_rss_kib: i64,
}

#[derive(Debug, Default, Clone)]
pub struct FelixFigures {
    pub services: usize,
    pub fill: Duration,
    pub baseline_rss_kib: u64,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    /// After a restart with the store already full.
    pub cold_start: Duration,
    pub restart_rss_kib: u64,
    pub restart_hwm_kib: u64,
    /// Why the restart could not be measured.
    pub restart_error: Option<String>,
    /// Restarted over the table left in the kernel: until the whole
    /// table was rewritten in place.
    pub in_place_start: Duration,
    pub in_place_rss_kib: u64,
    pub in_place_hwm_kib: u64,
    pub in_place_error: Option<String>,
    /// felix's `nft` children over the whole measurement.
    pub nft_calls: usize,
    pub nft_peak_kib: u64,
    pub nft_peak_args: String,
}

#[derive(Debug, Default)]
pub struct Figures {
    pub sizes: Vec<SizeFigures>,
    /// Per run: median connect + first byte (µs) to the ClusterIP and,
    /// interleaved, straight to an endpoint, with the small and the large
    /// table.
    pub svc_small: Vec<f64>,
    pub direct_small: Vec<f64>,
    pub svc_large: Vec<f64>,
    pub direct_large: Vec<f64>,
    /// The whole-table writes between latency runs.
    pub swaps_small: Vec<Duration>,
    pub swaps_large: Vec<Duration>,
    pub enforced: String,
    /// Which endpoints answered (connections per server address).
    pub spread: BTreeMap<Ipv4Addr, usize>,
    pub felix: Option<FelixFigures>,
    /// Why felix's memory could not be measured (the rest still stands).
    pub felix_error: Option<String>,
    pub bench_rss_kib: u64,
}
