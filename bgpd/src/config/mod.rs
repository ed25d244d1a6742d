//! The speaker's static configuration: a TOML file read at start and again
//! on SIGHUP. Parsing turns the file into checked plain data or into one
//! error that names the key and the line; nothing is applied half-way.
mod file;
mod filters;
mod model;

pub use file::{ConfigError, parse};
pub use model::{Announce, Config, GracefulRestart, Neighbor};
