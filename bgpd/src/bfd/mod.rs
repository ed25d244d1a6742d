//! Bidirectional Forwarding Detection: the Control packet codec and the
//! session state machine (RFC 5880, pure), the single-hop runtime over UDP
//! (RFC 5881) and what BGP needs from it as a client (RFC 5882).
pub mod packet;
pub mod session;
pub mod timers;

pub use packet::{ControlPacket, DecodeError, Diag, State};
pub use session::{Session, SessionConfig, Transition};

#[cfg(test)]
mod tests;
