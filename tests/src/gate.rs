//! One test file at a time within a test binary. Each group binary holds
//! several of the former `lab/tests` files as modules; the test harness
//! runs a binary's tests in parallel threads, while the files used to be
//! binaries of their own run one after another. Every test takes the gate
//! with its module's path: tests of one file still run side by side, as
//! before, and tests of different files (each starting clusters, peers
//! and daemons) never overlap.

use std::sync::{Condvar, Mutex, MutexGuard};

struct Holder {
    /// The module whose tests hold the gate, if any.
    module: Option<&'static str>,
    /// How many of its tests are running.
    running: usize,
}

static GATE: Mutex<Holder> = Mutex::new(Holder {
    module: None,
    running: 0,
});
static FREED: Condvar = Condvar::new();

fn holder() -> MutexGuard<'static, Holder> {
    // A test that panics while holding the guard poisons nothing: the
    // count is updated before any panic can happen, so the state is whole.
    GATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held for a test's whole run (bind it first, as `_one`, so that it is
/// dropped last, after the test's labs and daemons).
#[must_use = "the gate is released when the guard is dropped"]
pub struct FileGuard {
    module: &'static str,
}

/// Waits until no test of another module runs; call it with
/// `module_path!()` at the start of a test.
pub fn one_file_at_a_time(module: &'static str) -> FileGuard {
    let mut h = holder();
    while h.module.is_some_and(|m| m != module) {
        h = FREED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    h.module = Some(module);
    h.running += 1;
    FileGuard { module }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        let mut h = holder();
        debug_assert_eq!(h.module, Some(self.module));
        h.running -= 1;
        if h.running == 0 {
            h.module = None;
            FREED.notify_all();
        }
    }
}
