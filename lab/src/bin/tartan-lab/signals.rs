//! SIGINT, SIGTERM and SIGHUP turn a flag on; long-running commands check
//! it and stop, their guards removing what they made.

use anyhow::{Context, Result, bail};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT/SIGTERM: everything stops and is removed by its guard.
pub(super) static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub(super) fn catch_signals() -> Result<()> {
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(s, &action) }.context("install signal handler")?;
    }
    Ok(())
}

pub(super) fn stopped() -> Result<()> {
    if STOP.load(Ordering::SeqCst) {
        bail!("interrupted");
    }
    Ok(())
}
