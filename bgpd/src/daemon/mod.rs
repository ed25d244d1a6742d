//! The running speaker: one instance task owns the RIB and the peers'
//! state; peer tasks, the listener and the control API talk to it over
//! channels (no shared locks on the RIB).
mod control_channel;
mod deferral;
#[cfg(test)]
mod deferral_status_tests;
#[cfg(test)]
mod deferral_tests;
mod deferral_view;
mod drain;
mod drain_state;
mod encode;
mod instance;
#[cfg(test)]
mod kernel_stale_tests;
mod listener;
mod origin;
mod peer_events;
#[cfg(test)]
mod peer_restart_tests;
mod reload;
mod restart;
#[cfg(test)]
mod restart_end_tests;
mod status;
#[cfg(test)]
mod test_instance;

pub use control_channel::ControlHandle;
pub use instance::{Daemon, DaemonOptions};
