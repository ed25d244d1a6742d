//! Bidirectional Forwarding Detection: the Control packet codec and the
//! session state machine (RFC 5880, pure), the runtime over UDP for single
//! hop (RFC 5881) and multihop (RFC 5883), and what BGP needs from it as a
//! client (RFC 5882).
mod handle;
pub mod hops;
pub mod packet;
mod queue;
mod runtime;
pub mod session;
pub mod socket;
pub mod timers;

pub use handle::{BfdClient, BfdHandle, BfdStatus};
pub use hops::Hops;
pub use packet::{ControlPacket, DecodeError, Diag, State};
pub use runtime::{RuntimeOptions, spawn};
pub use session::{Session, SessionConfig, Transition};

#[cfg(test)]
mod tests;
