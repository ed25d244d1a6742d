//! BGP sessions: one task per neighbor that dials and accepts TCP
//! connections, runs the OPEN exchange (with collision detection), and
//! while Established moves messages between the socket and the instance.
//! The rules are the pure state machine in `machine` (with the OPEN checks
//! in `fsm`); the tasks only turn I/O and time into its events and carry
//! out its actions.
mod attempt;
mod collision;
mod counters;
mod established;
mod events;
mod framed;
pub mod fsm;
mod handshake;
pub mod machine;
mod peer;

#[cfg(test)]
mod handshake_tests;
#[cfg(test)]
mod linger_tests;
#[cfg(test)]
mod new_connection_tests;
#[cfg(test)]
pub(crate) mod test_lab;
#[cfg(test)]
mod tests;

pub use counters::PeerCounters;
pub use events::{PeerCommand, PeerEvent};
pub use fsm::{LocalParams, Negotiated, RestartFlag, State};
pub use peer::{PeerLink, spawn_peer};
