//! How long bgpd's applies and syncs take, as Prometheus histograms
//! (`tartan_bgp_*_duration_seconds`): the configuration rebuilt from the
//! datastore's objects, a new configuration taken over by the running
//! speaker (from the datastore or a reloaded file), a batch of route
//! changes written to the kernel, and the node's BGPNodeStatus report
//! written to the datastore.
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Buckets from 0.5 ms to about 8 s (doubling), as felix's: one route
/// or one changed peer is well under a millisecond, a full table of
/// thousands of routes or a large cluster's rebuild under a second.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

/// The duration histograms. Cheap to clone: each clone records into the
/// same series.
#[derive(Debug, Clone)]
pub struct Durations {
    /// A rebuild of the configuration from the objects watched in the
    /// datastore (after a burst of changes that may alter it).
    pub config_build: Histogram,
    /// A changed configuration taken over by the speaker: peers added,
    /// removed or reset, filters and announcements changed.
    pub config_apply: Histogram,
    /// One batch of best-route changes written to the kernel (the table
    /// read, the writes it needs).
    pub kernel_route_apply: Histogram,
    /// One write of this node's BGPNodeStatus report (read, then update
    /// or create).
    pub status_write: Histogram,
}

impl Default for Durations {
    fn default() -> Self {
        Durations {
            config_build: duration_histogram(),
            config_apply: duration_histogram(),
            kernel_route_apply: duration_histogram(),
            status_write: duration_histogram(),
        }
    }
}

impl Durations {
    /// Registers every histogram under its full name.
    pub(super) fn register(&self, r: &mut Registry) {
        r.register(
            "tartan_bgp_config_build_duration_seconds",
            "Time to rebuild the speaker's configuration from the datastore's objects",
            self.config_build.clone(),
        );
        r.register(
            "tartan_bgp_config_apply_duration_seconds",
            "Time to take over a changed configuration (from the datastore or a reloaded file)",
            self.config_apply.clone(),
        );
        r.register(
            "tartan_bgp_kernel_route_apply_duration_seconds",
            "Time to write one batch of route changes to the kernel, reading its table included",
            self.kernel_route_apply.clone(),
        );
        r.register(
            "tartan_bgp_status_write_duration_seconds",
            "Time to write this node's BGPNodeStatus report to the datastore",
            self.status_write.clone(),
        );
    }
}
