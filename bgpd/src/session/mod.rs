//! BGP sessions: one task per neighbor that dials and accepts TCP
//! connections, runs the OPEN exchange (with collision detection), and
//! while Established moves messages between the socket and the instance.
//! The rules are pure functions in `fsm`; the tasks only do I/O and timing.
mod framed;
pub mod fsm;
mod handshake;
mod peer;

pub use fsm::{LocalParams, Negotiated, State};
pub use peer::{PeerCommand, PeerCounters, PeerEvent, PeerLink, spawn_peer};
