//! Unit tests of the BFD codec, state machine and timers: no sockets, no runtime.
mod codec;
mod fsm;
mod poll;
mod timers;
