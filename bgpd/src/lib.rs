//! Tartan's BGP speaker.
pub mod bfd;
pub mod config;
pub mod control;
pub mod daemon;
pub mod datastore;
pub mod filter;
pub mod kernel;
pub mod log_level;
pub mod model;
pub mod net;
pub mod rib;
pub mod session;
pub mod wire;
