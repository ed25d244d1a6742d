//! What the operator sees of our restart (`deferral.rs`): the control
//! API's `restart` status (`tartanctl bgp status`), the gauge
//! `tartan_bgp_selection_deferred`, 1 per family while what goes out in
//! it is held, and `tartan_bgp_restarting`, 1 while the kernel routes of
//! the previous run not learned again are kept.
use super::instance::Daemon;
use crate::model::Family;
use std::collections::BTreeMap;
use std::time::Instant;
use tartan_api::bgp::{FamilyDeferral, RestartStatus};

impl Daemon {
    /// The gauges: 1 per family whose output is held, and whether the
    /// restart goes on.
    pub(super) fn publish_deferral(&self) {
        let m = &self.options.metrics;
        for f in Family::ALL {
            m.set_selection_deferred(f, self.deferred(f));
        }
        m.set_restarting(self.restart_until.is_some());
    }

    /// The control API's view; None when not restarting.
    pub(super) fn deferral_status(&self) -> Option<RestartStatus> {
        // The deferral never outlives the kernel routes' hold.
        let until = self.restart_until?;
        let families = Family::ALL
            .into_iter()
            .map(|f| {
                let waiting_for = match &self.deferral {
                    Some(d) if d.pending.contains(&f) => self.waiting_for(d, f),
                    _ => Vec::new(),
                };
                let view = FamilyDeferral {
                    deferred: self.deferred(f),
                    waiting_for,
                };
                (f.to_string(), view)
            })
            .collect::<BTreeMap<_, _>>();
        Some(RestartStatus {
            seconds_left: until.saturating_duration_since(Instant::now()).as_secs(),
            kernel_routes_kept: true,
            families,
        })
    }
}
