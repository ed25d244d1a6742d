//! Unit tests of the BFD codec, state machine and timers: no sockets, no runtime.
mod codec;
mod demand;
pub(in crate::bfd) mod fsm;
mod poll;
mod retire;
mod timers;
