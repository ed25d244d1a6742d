//! bgpd's log level as the datastore sets it (BGPConfiguration
//! `logSeverityScreen`, the cluster's or the node's override): applied
//! when it changes, unless `TARTAN_LOG` gives the daemon's filter.

use std::sync::{Mutex, OnceLock};

use tartan_api::logging::LevelHandle;
use tracing::info;

static HANDLE: OnceLock<LevelHandle> = OnceLock::new();
static APPLIED: Mutex<Option<&'static str>> = Mutex::new(None);

/// Keeps the handle of the process's log filter (None: logging was set up
/// elsewhere, and levels from the datastore change nothing).
pub fn install(handle: Option<LevelHandle>) {
    if let Some(h) = handle {
        let _ = HANDLE.set(h);
    }
}

/// Logs at `level` (a filter, None: the default) from now on, if that is
/// a change.
pub fn follow(level: Option<&'static str>) {
    let mut applied = APPLIED.lock().unwrap_or_else(|p| p.into_inner());
    if *applied == level {
        return;
    }
    *applied = level;
    let Some(h) = HANDLE.get() else { return };
    if h.set(level) {
        info!(
            level = level.unwrap_or("the default"),
            "log level from BGPConfiguration logSeverityScreen"
        );
    } else {
        info!("logSeverityScreen not applied: TARTAN_LOG sets the log filter");
    }
}
